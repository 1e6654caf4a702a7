"""Every example in examples/ runs as is, as a subprocess, against its own real Chroma server.

(`examples/replayable_ingest.py` is exercised by the ingestion tests; the distributed
example by tests/test_distributed.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD = 300  # seconds; only stops a broken test from hanging


def run_example(name: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run an example the way a user would: plain environment, from some working directory."""
    env = {k: v for k, v in os.environ.items() if k not in ("FLUX_HOME", "FLUX_DATABASE_URL", "FLUX_CHROMA_URL", "FLUX_LOG_LEVEL")}
    return subprocess.run(
        [sys.executable, str(ROOT / "examples" / name)],
        check=False, capture_output=True, text=True, env=env, cwd=cwd, timeout=HANG_GUARD,
    )


def test_quickstart_prints_chroma_first(tmp_path: Path) -> None:
    done = run_example("quickstart.py", tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith("Chroma server http://127.0.0.1:")
    assert "ingested 3 docs into demo__handbook (default model, dim 384)" in lines
    ranked = [ln for ln in lines if ln[:2] in ("1.", "2.", "3.")]
    assert len(ranked) == 3
    assert ranked[0].startswith("1. ChromaDB is an embedding database.")
    assert list(tmp_path.iterdir()) == []  # Flux state and Chroma data lived in a temporary folder
    assert " - INFO - " not in done.stdout + done.stderr  # Flux's own log lines stay quiet


def test_multi_tenant_kb_shows_isolation(tmp_path: Path) -> None:
    done = run_example("multi_tenant_kb.py", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "server collection 'acme__handbook'" in out and "server collection 'globex__handbook'" in out
    assert "top hit 'Acme refunds any order within 30 days.'" in out
    assert "top hit 'Globex gives store credit, never refunds.'" in out
    assert out.count("sees collections ['handbook']") == 2
    assert "InvalidNameError" in out
    assert "globex still has {'handbook': 2}" in out
    assert out.rstrip().endswith("tenants isolated: yes")
    assert list(tmp_path.iterdir()) == []


def test_user_task_example_inherits_tenancy_and_error_handling(tmp_path: Path) -> None:
    done = run_example("user_task.py", tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "1. wrote 3 docs to 'acme__handbook'" in out
    assert "2. shipping: 'Orders ship within two business days.' {'team': 'ops'}" in out
    assert "2. refunds:" in out and "missing" not in out
    assert "3. 'globex__handbook' -> InvalidNameError" in out
    assert "4. 'archive' -> CollectionNotFoundError after 1 attempt" in out
    assert out.rstrip().endswith("user task inherits flux-chroma's guarantees: yes")
    assert list(tmp_path.iterdir()) == []
