"""examples/replayable_ingest.py runs as is: a worker process is SIGKILLed mid-job and resumed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD = 300  # seconds; only stops a broken test from hanging


@pytest.mark.slow
def test_replayable_ingest_example_resumes_and_replays() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("FLUX_HOME", "FLUX_DATABASE_URL", "FLUX_CHROMA_URL")}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "replayable_ingest.py")],
        check=False, capture_output=True, text=True, env=env, cwd=ROOT, timeout=HANG_GUARD,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    chunks, batches = map(int, re.search(r"-> (\d+) chunks in (\d+) batches", out).groups())  # type: ignore[union-attr]
    assert "(same id: True)" in out
    assert out.count("replayed from Flux's log") == 3  # batches 1-3, finished by the killed worker
    assert out.count("redone idempotently") == 1  # batch 4: written, killed before its checkpoint
    assert out.count("written now") == batches - 4
    assert f"collection demo__notes holds {chunks} records; the plan has {chunks} chunks" in out
    assert re.search(rf"second run \S+-r2: added 0, skipped {chunks}, embedded 0, deleted 0", out)
