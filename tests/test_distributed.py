"""The distributed example end to end: Chroma server, PostgreSQL, Flux server and two Flux workers
as real OS processes on loopback, driven through `flux workflow run`, then torn down by pid."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from user_shell import user_env

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "distributed" / "run_local.py"
HANG_GUARD = 170  # seconds; only stops a broken test from hanging


def _processes_mentioning(marker: str) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmdline:
                found.append(f"{entry.name}: {cmdline}")
    return found


@pytest.mark.slow
def test_run_local_deploys_ingests_queries_and_tears_down(tmp_path: Path) -> None:
    workdir = tmp_path / "distributed-stack"
    summary_file = tmp_path / "summary.json"
    env = user_env()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--workdir", str(workdir), "--summary", str(summary_file)],
        check=False, capture_output=True, text=True, env=env, timeout=HANG_GUARD,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(summary_file.read_text())
    assert summary["ok"] is True

    # Five processes were started, and every one of them (and their children) is gone.
    assert summary["flux_db"] == "postgresql"
    # The Flux server ran the dispatch mode docs/deployment.md sets for a fleet (PostgreSQL).
    assert "Event dispatcher started" in (workdir / "flux-server" / "output.log").read_text()
    assert set(summary["pids"]) == {"chroma", "postgres", "flux-server", "worker-1", "worker-2"}
    for pid in summary["pids"].values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert _processes_mentioning(str(workdir)) == []

    # Both tenants were ingested through the Flux server by its workers...
    receipts = {i["tenant"]: i for i in summary["ingest"]}
    assert set(receipts) == {"acme", "globex"}
    for tenant, item in receipts.items():
        assert item["worker"] in {"worker-1", "worker-2"}
        assert item["receipt"]["physical_name"] == f"{tenant}__handbook"
        assert (item["receipt"]["docs"], item["receipt"]["added"], item["receipt"]["batches"]) == (3, 3, 2)

    # ...and each tenant's question was answered from its own documents only.
    answers = {a["tenant"]: a for a in summary["ask"]}  # "tenant": what the workflow itself used
    assert set(answers) == {"acme", "globex"}
    assert answers["acme"]["hits"][0]["document"].startswith("Acme refunds")
    assert answers["globex"]["hits"][0]["document"].startswith("Globex gives store credit")
    assert all(h["document"].startswith("Acme") for h in answers["acme"]["hits"])
    assert all(h["document"].startswith("Globex") for h in answers["globex"]["hits"])
    assert [c["name"] for c in answers["acme"]["collections"]] == ["handbook"]
    assert "stopped worker-1" in done.stdout and "stopped chroma" in done.stdout
    assert "stopped postgres" in done.stdout


@pytest.mark.slow
def test_run_local_tears_everything_down_when_interrupted(tmp_path: Path) -> None:
    workdir = tmp_path / "interrupted-stack"
    summary_file = tmp_path / "summary.json"
    env = user_env()
    proc = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--workdir", str(workdir), "--summary", str(summary_file)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # interrupt once the last process has been started
            if line.startswith("started worker-2"):
                break
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_GUARD) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    summary = json.loads(summary_file.read_text())
    assert summary["ok"] is False
    assert set(summary["pids"]) == {"chroma", "postgres", "flux-server", "worker-1", "worker-2"}
    for pid in summary["pids"].values():
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert _processes_mentioning(str(workdir)) == []
