"""Embedding threads: ``threads=``, else ``FLUX_CHROMA_EMBED_THREADS``, else every core this
process may run on, read back from the ONNX sessions' own options. Processes that embed do not
coordinate, so a stopped one cannot hold up another (real child processes; no timing)."""

from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fault_tools import python_child

from flux_chroma import ConfigurationError
from flux_chroma.embedding import FastDefaultEmbedding, onnx_session
from flux_chroma.embedding.onnx_session import EMBED_THREADS_ENV, cpu_count, load_session

HANG_GUARD = 120


def _intra_op_threads(ef: FastDefaultEmbedding) -> int:
    """The intra-op threads of the session ``ef`` embeds with, as onnxruntime reports them."""
    return int(load_session(ef.model_dir, ef.threads).get_session_options().intra_op_num_threads)


@pytest.mark.parametrize(
    "bad",
    [0, -1, True, 1.5, "2", 2000, None],
    ids=["zero", "negative", "bool", "float", "str", "huge", "none"],
)
def test_threads_argument_is_validated(bad: object) -> None:
    if bad is None:
        assert FastDefaultEmbedding(threads=None).threads is None
        return
    with pytest.raises(
        ConfigurationError, match=r"threads= must be a whole number of threads from 1 to 1024"
    ):
        FastDefaultEmbedding(threads=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ["abc", "0", "-3", "1.5", "99999"])
def test_environment_variable_is_validated(bad: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(EMBED_THREADS_ENV, bad)
    with pytest.raises(ConfigurationError, match=EMBED_THREADS_ENV) as caught:
        FastDefaultEmbedding().embed(["the variable is read when the session is looked up"])
    assert repr(bad) in str(caught.value)
    assert _intra_op_threads(FastDefaultEmbedding(threads=1)) == 1  # threads= wins over it


def test_argument_then_variable_then_every_core(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(EMBED_THREADS_ENV, raising=False)
    default = FastDefaultEmbedding()
    assert _intra_op_threads(default) == cpu_count() == len(os.sched_getaffinity(0))
    every = default.embed(["embedding threads"])

    monkeypatch.setenv(EMBED_THREADS_ENV, "1")
    assert _intra_op_threads(FastDefaultEmbedding()) == 1
    one = FastDefaultEmbedding().embed(["embedding threads"])
    assert _intra_op_threads(FastDefaultEmbedding(threads=3)) == 3  # threads= wins
    three = FastDefaultEmbedding(threads=3).embed(["embedding threads"])

    assert np.allclose(every, one, atol=1e-6) and np.allclose(every, three, atol=1e-6)
    copy = pickle.loads(pickle.dumps(FastDefaultEmbedding(threads=3)))
    assert copy.threads == 3 and "threads=3" in repr(copy)


def test_one_session_per_thread_count() -> None:
    folder = FastDefaultEmbedding().model_dir
    FastDefaultEmbedding(threads=1).embed(["one session per count"])
    FastDefaultEmbedding(threads=2).embed(["one session per count"])
    one, two = load_session(folder, 1), load_session(folder, 2)
    assert one is not two
    FastDefaultEmbedding(threads=1).embed(["one session per count"])
    assert load_session(folder, 1) is one and load_session(folder, 2) is two
    assert onnx_session._SESSIONS[(os.getpid(), str(folder), 1)] is one


# Three threads embedding batches of long texts in a loop: at any moment one runs the model and
# the others wait for it, as in an ingestion with parallel units. Before this change
# a waiting thread held the host-wide queue lock of embedding/core_gate.py, so stopping the
# process at such a moment blocked every other embedding process of the OS user.
STOPPED = """
import sys, threading
from flux_chroma.embedding import FastDefaultEmbedding
ef = FastDefaultEmbedding()
texts = [f"text {i}: " + "a longer text embedded again and again " * 30 for i in range(8)]
def loop():
    while True:
        ef.embed(texts)
        print("embedded", flush=True)
for _ in range(3):
    threading.Thread(target=loop, daemon=True).start()
sys.stdin.read()
"""

ONE_TEXT = """
from flux_chroma.embedding import FastDefaultEmbedding
print(len(FastDefaultEmbedding().embed(["one text while another embedder is stopped"])))
"""


def test_a_stopped_embedding_process_does_not_block_another(tmp_path: Path) -> None:
    # A private temp folder: the stopped child can stall nothing outside this test.
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop(EMBED_THREADS_ENV, None)
    stopped = python_child(STOPPED, env)
    try:
        assert stopped.stdout is not None
        for _ in range(6):  # each thread embedded about twice: well into its loop
            assert stopped.stdout.readline().strip() == "embedded"
        os.kill(stopped.pid, signal.SIGSTOP)  # Ctrl-Z, a cgroup freeze, a debugger
        done = subprocess.run(
            [sys.executable, "-c", ONE_TEXT],
            check=False,
            env=env,
            capture_output=True,
            text=True,
            timeout=HANG_GUARD,
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "1"
    finally:
        os.kill(stopped.pid, signal.SIGCONT)
        stopped.kill()
        stopped.wait(HANG_GUARD)
