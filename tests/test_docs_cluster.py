"""docs/deployment.md's cluster walkthrough, run verbatim against the fleet it tells you to start.

``examples/distributed/run_local.py --workers 3 --hold --workdir DIR`` runs in the background
(as terminal 1 of the walkthrough); the shell block between the ``cluster-walkthrough``
markers runs in bash (terminal 2), with ``/tmp/fc-fleet`` replaced by this test's folder.
Then the fleet gets SIGTERM and must leave no process behind.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from user_shell import user_env

from flux_chroma.embedding.onnx_session import threads_per_process

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "deployment.md"
HANG_GUARD = 400.0  # seconds; only stops a broken test from hanging


def _walkthrough() -> tuple[str, str]:
    text = PAGE.read_text()
    start = re.search(r"^```bash\n(python examples/distributed/run_local\.py [^\n]*)\n```", text, re.MULTILINE)
    block = re.search(r"<!-- cluster-walkthrough:start -->\n```bash\n(.*?)```\n<!-- cluster-walkthrough:end -->", text, re.DOTALL)
    assert start and block, "docs/deployment.md lost its cluster walkthrough"
    return start.group(1), block.group(1)


@pytest.mark.slow
def test_cluster_walkthrough_runs_verbatim(tmp_path: Path) -> None:
    fleet_cmd, script = _walkthrough()
    workdir = tmp_path / "fc-fleet"
    assert "--workdir /tmp/fc-fleet" in fleet_cmd
    argv = fleet_cmd.replace("/tmp/fc-fleet", str(workdir)).split()
    assert argv[0] == "python"
    env = user_env()
    log = (tmp_path / "fleet.log").open("w")
    fleet = subprocess.Popen([sys.executable, *argv[1:]], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not (workdir / "fleet.env").exists():
            assert fleet.poll() is None, (tmp_path / "fleet.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "the fleet did not get ready"
            time.sleep(0.5)
        # Three workers on one host: each embeds with its share of the cores (docs/deployment.md).
        share = str(threads_per_process(3)).encode()
        workers = sorted(workdir.glob("worker-*/pid"))
        assert len(workers) == 3, workers
        for worker in workers:
            environ = Path(f"/proc/{int(worker.read_text())}/environ").read_bytes().split(b"\0")
            assert b"FLUX_CHROMA_EMBED_THREADS=" + share in environ, worker
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script.replace("/tmp/fc-fleet", str(workdir))],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        last = done.stdout.strip().splitlines()[-1]
        match = re.fullmatch(r"COMPLETED chunks (\d+) added (\d+) skipped (\d+) workers \[(.*)\]", last)
        assert match, done.stdout[-3000:]
        print(last)
        chunks, added, skipped = (int(match.group(i)) for i in (1, 2, 3))
        assert chunks > 100 and added + skipped == chunks
        assert "ingest_unit" in done.stdout  # the units were listed while the job ran
    finally:
        if fleet.poll() is None:
            os.killpg(fleet.pid, signal.SIGTERM)
            try:
                fleet.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(fleet.pid, signal.SIGKILL)
                fleet.wait(timeout=30)
        log.close()
    pids = [int(p.read_text()) for p in workdir.glob("*/pid")]
    assert len(pids) >= 6  # chroma, postgres, flux-server, 3 workers
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
