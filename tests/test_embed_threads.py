"""The embedder thread budget: ``threads=`` and ``FLUX_CHROMA_EMBED_THREADS`` are validated
and win; otherwise a process gets its share of the host's cores among the processes that
embed on it, counted through flock-ed slot files (real child processes here; no timing)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from fault_tools import python_child

from flux_chroma import ConfigurationError
from flux_chroma.embedding import FastDefaultEmbedding, onnx_session
from flux_chroma.embedding.threads import (
    BUSY_LEASE,
    EMBED_THREADS_ENV,
    IDLE_SECONDS,
    Budget,
    HostSlots,
    configured_threads,
    cpu_count,
    share,
)

HANG_GUARD = 60


@pytest.mark.parametrize(
    "bad", [0, -1, True, 1.5, "2", 2000, None], ids=["zero", "negative", "bool", "float", "str", "huge", "none"]
)
def test_threads_argument_is_validated(bad: object) -> None:
    if bad is None:
        assert FastDefaultEmbedding(threads=None).threads is None
        return
    with pytest.raises(ConfigurationError, match=r"threads= must be a whole number of threads from 1 to 1024"):
        FastDefaultEmbedding(threads=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["abc", "0", "-3", "1.5", "99999"])
def test_environment_variable_is_validated(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EMBED_THREADS_ENV, bad)
    with pytest.raises(ConfigurationError, match=EMBED_THREADS_ENV) as caught:
        configured_threads()
    assert repr(bad) in str(caught.value)
    with pytest.raises(ConfigurationError, match=EMBED_THREADS_ENV):
        FastDefaultEmbedding().embed(["the variable is read when a session is built"])
    assert configured_threads(3) == 3  # an explicit threads= wins over the variable


def test_argument_then_variable_set_the_session_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    ef = FastDefaultEmbedding(threads=1)
    one = ef.embed(["thread budget"])
    assert onnx_session._SESSIONS[(os.getpid(), str(ef.model_dir))][0] == 1
    monkeypatch.setenv(EMBED_THREADS_ENV, "2")
    two = FastDefaultEmbedding().embed(["thread budget"])
    assert onnx_session._SESSIONS[(os.getpid(), str(ef.model_dir))][0] == 2  # rebuilt
    assert np.allclose(one, two, atol=1e-6)
    copy = pickle.loads(pickle.dumps(ef))
    assert copy.threads == 1 and "threads=1" in repr(copy)


def test_share_of_the_cores() -> None:
    assert [share(2, n) for n in (0, 1, 2, 3, 4)] == [2, 2, 1, 1, 1]
    assert [share(8, n) for n in (1, 2, 3, 4, 8, 9)] == [8, 4, 2, 2, 1, 1]


def _holder(folder: Path) -> subprocess.Popen[str]:
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from flux_chroma.embedding.threads import HostSlots\n"
        f"HostSlots(Path({str(folder)!r})).claim()\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = python_child(code)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


@pytest.fixture
def holders(tmp_path: Path) -> Iterator[list[subprocess.Popen[str]]]:
    procs = [_holder(tmp_path / "slots") for _ in range(3)]
    try:
        yield procs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.wait(HANG_GUARD)


def test_live_embedders_are_counted_across_processes(
    tmp_path: Path, holders: list[subprocess.Popen[str]]
) -> None:
    slots = HostSlots(tmp_path / "slots")
    assert slots.live() == 1 + 3  # this process always counts itself
    slots.claim()
    assert slots.live() == 4
    assert Budget(slots).threads() == share(cpu_count(), 4)

    # A SIGKILLed holder is no longer counted, and its file is removed.
    dead = holders[0]
    os.kill(dead.pid, signal.SIGKILL)
    dead.wait(HANG_GUARD)
    assert slots.live() == 3
    assert not (tmp_path / "slots" / f"slot-{dead.pid}").exists()

    # A holder that has not embedded for IDLE_SECONDS does not count (its file stays).
    idle = tmp_path / "slots" / f"slot-{holders[1].pid}"
    old = time.time() - IDLE_SECONDS - 5
    os.utime(idle, (old, old))
    assert slots.live() == 2 and idle.exists()

    # A holder that exits normally, and this process releasing its slot.
    assert holders[2].stdin is not None
    holders[2].stdin.close()
    holders[2].wait(HANG_GUARD)
    slots.release()
    assert slots.live() == 1
    assert Budget(slots).threads() == cpu_count()


def test_busy_while_embedding_then_idle_from_the_end(tmp_path: Path) -> None:
    # Two embeddings at once in this process: busy until the last one ends, then idle from then.
    budget = Budget(HostSlots(tmp_path / "slots"))
    slot = tmp_path / "slots" / f"slot-{os.getpid()}"
    budget.threads()
    budget.threads()
    assert slot.stat().st_mtime > time.time() + BUSY_LEASE / 2
    budget.done()
    assert slot.stat().st_mtime > time.time() + BUSY_LEASE / 2  # one still runs
    budget.done()
    assert time.time() - 60 < slot.stat().st_mtime <= time.time()


def test_a_process_that_stopped_embedding_stops_counting(tmp_path: Path) -> None:
    # A real embedding in another process: counted while it embeds (its slot is leased ahead),
    # idle from the end of its last embedding, so after IDLE_SECONDS it no longer takes a share.
    code = (
        "import os, sys, tempfile, time\n"
        "from flux_chroma.embedding import FastDefaultEmbedding\n"
        "slot = f'{tempfile.gettempdir()}/flux-chroma-embedders-{os.getuid()}/slot-{os.getpid()}'\n"
        "def texts():  # read by embed() while its session is in use\n"
        "    print(os.stat(slot).st_mtime - time.time(), flush=True)\n"
        "    yield 'an embedding that ended'\n"
        "FastDefaultEmbedding().embed(texts())\n"
        "print(time.time(), flush=True)\n"
        "sys.stdin.read()\n"
    )
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop(EMBED_THREADS_ENV, None)
    proc = python_child(code, env)
    try:
        assert proc.stdout is not None
        ahead = float(proc.stdout.readline())
        assert ahead > BUSY_LEASE / 2  # while it embeds, its slot is leased ahead
        ended = float(proc.stdout.readline())
        folder = tmp_path / f"flux-chroma-embedders-{os.getuid()}"
        slot = folder / f"slot-{proc.pid}"
        assert slot.stat().st_mtime <= ended  # marked idle when its embedding ended
        slots = HostSlots(folder)
        assert slots.live() == 2  # lately busy: still counted
        old = time.time() - IDLE_SECONDS - 1
        os.utime(slot, (old, old))
        assert slots.live() == 1 and slot.exists()  # alive, idle: not counted
    finally:
        proc.kill()
        proc.wait(HANG_GUARD)


def test_a_share_that_flips_back_reuses_its_session() -> None:
    # Another process embedding now and then flips this process's share between two values:
    # the previous session is kept, so flipping back swaps sessions instead of building one.
    key = (os.getpid(), str(FastDefaultEmbedding().model_dir))
    FastDefaultEmbedding(threads=1).embed(["flip"])
    one = onnx_session._SESSIONS[key][1]
    FastDefaultEmbedding(threads=2).embed(["flip"])
    two = onnx_session._SESSIONS[key][1]
    assert two is not one
    FastDefaultEmbedding(threads=1).embed(["flip"])
    assert onnx_session._SESSIONS[key][1] is one
    FastDefaultEmbedding(threads=2).embed(["flip"])
    assert onnx_session._SESSIONS[key][1] is two
