"""flux_chroma.local_fleet's process handling, on real OS processes (no Flux server needed).

The Flux server, PostgreSQL and workers themselves are exercised by test_distributed.py
(run_local.py), test_serving_runner.py (bench.flux_stack) and the cluster tests (bench.fleet).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from flux_chroma.errors import ServerStartError
from flux_chroma.local_fleet import Processes, clean_env, wait_for

SHELL_WITH_CHILD = [
    sys.executable,
    "-c",
    (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'])\n"
        "print(child.pid, flush=True)\n"
        "time.sleep(300)\n"
    ),
]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_stop_ends_each_process_group_with_its_children(tmp_path: Path) -> None:
    procs = Processes(tmp_path, announce=False)
    started = procs.start("parent", SHELL_WITH_CHILD, clean_env())
    log = tmp_path / "parent" / "output.log"
    child = int(wait_for("the child's pid", lambda: log.read_text().strip(), procs, "parent", 60))
    assert os.getpgid(started.pid) == started.pid and os.getpgid(child) == started.pid
    assert procs.pids() == {"parent": started.pid}
    procs.stop()
    assert started.poll() is not None
    deadline = time.monotonic() + 30  # the child is reaped by init: a hang guard only
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "the child of a stopped process group is still running"


def test_a_process_that_exits_ends_the_wait_with_its_log(tmp_path: Path) -> None:
    procs = Processes(tmp_path, announce=False)
    procs.start("broken", [sys.executable, "-c", "print('no such flag: --frobnicate'); raise SystemExit(3)"], clean_env())
    with pytest.raises(ServerStartError) as caught:
        wait_for("something that never comes", lambda: None, procs, "broken", 60)
    assert "broken exited with 3" in str(caught.value) and "--frobnicate" in str(caught.value)
    procs.stop()


def test_clean_env_drops_flux_and_chroma_settings_unless_kept() -> None:
    # conftest.py sets FLUX_HOME and FLUX_CHROMA_CACHE_DIR for the session.
    assert "FLUX_HOME" in os.environ and "FLUX_CHROMA_CACHE_DIR" in os.environ
    plain = clean_env(EXTRA="1")
    assert "FLUX_HOME" not in plain and "FLUX_CHROMA_CACHE_DIR" not in plain and plain["EXTRA"] == "1"
    kept = clean_env(("FLUX_CHROMA_",))
    assert kept["FLUX_CHROMA_CACHE_DIR"] == os.environ["FLUX_CHROMA_CACHE_DIR"] and "FLUX_HOME" not in kept
    assert plain["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)
