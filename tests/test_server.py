"""Tests of flux_chroma.chroma.server.ChromaServer against real `chroma run` processes (loopback only)."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import chromadb
import httpx
import pytest
from chromadb.api import ClientAPI
from chromadb.config import Settings

from flux_chroma.chroma.server import LOCK_FILE_NAME, ChromaServer
from flux_chroma.errors import ConfigurationError, OneOwnerError, ServerStartError

# A separate OS process that owns a server until it is signalled (like `flux-chroma server`).
OWNER_SCRIPT = """
import signal
import sys
from flux_chroma.chroma.server import ChromaServer

server = ChromaServer(sys.argv[1], log_path=sys.argv[2]).start()
# A SIGINT that arrives before wait_forever() installs its handler is dropped, not fatal.
signal.signal(signal.SIGINT, signal.SIG_IGN)
print(server.pid, server.url, flush=True)
server.wait_forever()
print("stopped", flush=True)
"""

COLLECTION = "server-test"
HANG_GUARD = 60.0  # seconds; only stops a broken test from hanging, never a pass criterion


def _client(url: str) -> ClientAPI:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return chromadb.HttpClient(
        host=host, port=int(port), settings=Settings(anonymized_telemetry=False)
    )


def _write_record(url: str) -> None:
    collection = _client(url).get_or_create_collection(COLLECTION, embedding_function=None)
    embeddings: list[Sequence[float]] = [[0.1, 0.2, 0.3]]
    collection.add(ids=["r1"], embeddings=embeddings, documents=["hello"])


def _read_record(url: str) -> list[str | None]:
    collection = _client(url).get_collection(COLLECTION, embedding_function=None)
    documents = collection.get(ids=["r1"])["documents"]
    assert documents is not None
    return list(documents)


def _heartbeat_ok(url: str) -> bool:
    with httpx.Client(timeout=5.0, trust_env=False) as http:
        return http.get(url + "/api/v2/heartbeat").status_code == 200


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True


def _alive(pid: int) -> bool:
    """True while any thread of process ``pid`` runs (a zombie holds no files any more).

    A killed multi-threaded process can show its leader as a zombie while other threads
    are still exiting, so every task is checked.
    """
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for task in tasks:
        with contextlib.suppress(FileNotFoundError):
            stat = Path(f"/proc/{pid}/task/{task}/stat").read_text()
            if stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X"):
                return True
    return False


def _wait_dead(pid: int) -> None:
    deadline = time.monotonic() + HANG_GUARD
    while _alive(pid):
        assert time.monotonic() < deadline, f"process {pid} is still alive"
        time.sleep(0.05)


def _lock_is_free(data_dir: Path) -> bool:
    fd = os.open(data_dir / LOCK_FILE_NAME, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    finally:
        os.close(fd)  # closing also drops the lock we may have taken
    return True


@contextlib.contextmanager
def _owner_process(data_dir: Path, log_path: Path) -> Iterator[tuple[subprocess.Popen[str], int]]:
    """Run OWNER_SCRIPT; yield the process and its chroma pid; kill both (by pid) at the end."""
    stderr = open(log_path.with_suffix(".stderr"), "w")  # noqa: SIM115 - closed below
    proc = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, str(data_dir), str(log_path)],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    chroma_pid: int | None = None
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line, f"owner script failed: {log_path.with_suffix('.stderr').read_text()}"
        chroma_pid = int(line.split()[0])
        yield proc, chroma_pid
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if chroma_pid is not None and _alive(chroma_pid):
            os.kill(chroma_pid, signal.SIGKILL)
            _wait_dead(chroma_pid)
        if proc.stdout is not None:
            proc.stdout.close()
        stderr.close()


def test_start_heartbeat_url_and_stop(tmp_path: Path) -> None:
    data = tmp_path / "data"  # missing: start() creates it
    server = ChromaServer(data, log_path=tmp_path / "chroma.log")
    assert server.pid is None and not server.is_running()

    assert server.start() is server
    pid, port = server.pid, server.port
    assert pid is not None and _alive(pid)
    # What `ps` and `pgrep -f "chroma run"` see, as with Chroma's own `chroma` script.
    assert f"\0chroma\0run\0--path\0{data}\0" in Path(f"/proc/{pid}/cmdline").read_text()
    assert port > 0
    assert server.url == f"http://127.0.0.1:{port}"
    assert server.is_running()
    assert _heartbeat_ok(server.url)
    owner = json.loads((data / LOCK_FILE_NAME).read_text())
    assert owner["chroma_pid"] == pid and owner["owner_pid"] == os.getpid()
    assert owner["url"] == server.url
    with pytest.raises(ServerStartError, match="already started"):
        server.start()

    server.stop()
    assert not _alive(pid)
    assert server.pid is None and not server.is_running()
    assert _port_free(port)
    assert _lock_is_free(data)
    assert (data / "chroma.sqlite3").is_file()  # chroma's own files are left alone
    server.stop()  # idempotent
    assert server.pid is None


def test_context_manager_one_owner_and_persistence(tmp_path: Path) -> None:
    data = tmp_path / "data"
    server = ChromaServer(data, log_path=tmp_path / "chroma.log")
    with server as first:
        assert first is server and server.is_running()
        _write_record(server.url)

        second = ChromaServer(data, log_path=tmp_path / "second.log")
        with pytest.raises(OneOwnerError) as owned:
            second.start()
        message = str(owned.value)
        assert str(data) in message
        assert server.url in message and str(server.pid) in message
        assert "HttpClient" in message
        assert second.pid is None

        # The same port on another directory: the port is taken by the live server.
        other = ChromaServer(tmp_path / "other", port=server.port)
        with pytest.raises(ServerStartError, match=f"127.0.0.1:{server.port}"):
            other.start()
        assert other.pid is None
    assert not server.is_running()

    with server:  # data persists across stop/start of the same object
        assert _read_record(server.url) == ["hello"]


def test_taken_port_raises_and_leaves_nothing(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        server = ChromaServer(data, port=port, log_path=tmp_path / "chroma.log")
        with pytest.raises(ServerStartError) as taken:
            server.start()
    assert f"127.0.0.1:{port}" in str(taken.value)
    assert "already in use" in str(taken.value)
    assert server.pid is None and not server.is_running()
    assert _lock_is_free(data)


def test_startup_timeout_kills_child(tmp_path: Path) -> None:
    data = tmp_path / "data"
    log = tmp_path / "chroma.log"
    # No `chroma run` answers within a millisecond of being spawned.
    server = ChromaServer(data, startup_timeout=0.001, log_path=log)
    with pytest.raises(ServerStartError, match="did not answer") as timed_out:
        server.start()
    assert str(log) in str(timed_out.value)
    assert server.pid is None
    assert _lock_is_free(data)  # the child inherited the lock: free means it is gone


def test_sigkilled_owner_and_chroma_are_taken_over(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with _owner_process(data, tmp_path / "owner.log") as (owner, chroma_pid):
        _write_record(json.loads((data / LOCK_FILE_NAME).read_text())["url"])

        owner.send_signal(signal.SIGKILL)
        owner.wait()
        assert _alive(chroma_pid)
        # The orphaned chroma child still holds the inherited lock: the dir stays owned.
        with pytest.raises(OneOwnerError, match=str(chroma_pid)):
            ChromaServer(data, log_path=tmp_path / "early.log").start()

        os.kill(chroma_pid, signal.SIGKILL)
        _wait_dead(chroma_pid)

    with ChromaServer(data, log_path=tmp_path / "new.log") as server:
        owner_info = json.loads((data / LOCK_FILE_NAME).read_text())
        assert owner_info["chroma_pid"] == server.pid
        assert _read_record(server.url) == ["hello"]


def test_wait_forever_stops_cleanly_on_sigint(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with _owner_process(data, tmp_path / "owner.log") as (owner, chroma_pid):
        assert _alive(chroma_pid)
        deadline = time.monotonic() + HANG_GUARD
        while owner.poll() is None:  # resend until wait_forever() is there to receive it
            assert time.monotonic() < deadline, "owner ignored SIGINT"
            owner.send_signal(signal.SIGINT)
            with contextlib.suppress(subprocess.TimeoutExpired):
                owner.wait(timeout=0.5)
        assert owner.returncode == 0
        assert owner.stdout is not None
        assert owner.stdout.read().strip() == "stopped"
        _wait_dead(chroma_pid)  # reaped by the owner's stop(), so this returns at once
    assert _lock_is_free(data)
    assert (data / LOCK_FILE_NAME).read_text() == ""


def test_non_loopback_host_warns(tmp_path: Path) -> None:
    not_a_dir = tmp_path / "file"
    not_a_dir.write_text("x")
    server = ChromaServer(not_a_dir, host="0.0.0.0")
    # The warning comes first; the start then fails before anything is spawned or bound.
    with (
        pytest.warns(UserWarning, match="no authentication"),
        pytest.raises(ServerStartError, match="data directory"),
    ):
        server.start()
    assert server.pid is None


@pytest.mark.parametrize(
    "options",
    [{"port": -1}, {"port": 70000}, {"startup_timeout": 0}, {"stop_grace": -1.0}],
)
def test_invalid_options(tmp_path: Path, options: dict[str, float]) -> None:
    with pytest.raises(ConfigurationError):
        ChromaServer(tmp_path, **options)  # type: ignore[arg-type]
