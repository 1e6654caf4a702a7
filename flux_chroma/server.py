"""A managed local ``chroma run`` server for development, tests and ``flux-chroma server``.

:class:`ChromaServer` starts ``chroma run --path DIR --host HOST --port PORT`` as a child
process, waits until its heartbeat answers, and stops it with SIGTERM (then SIGKILL).

One-owner rule: a data directory is owned by at most one live server. Ownership is an
exclusive ``flock`` on ``DIR/.flux-chroma.lock``. The locked file descriptor is also
inherited by the ``chroma`` child, so the directory stays owned while either this process or
the child is alive, and the kernel frees it when both are gone (a stale lock file left by a
SIGKILLed owner is simply taken over). The lock file is never deleted: deleting it would let
two processes lock two different files of the same name.

Chroma's output goes to ``log_path``. By default that is ``chroma.log`` in a fresh temporary
directory (never inside the data directory); it is deleted by a clean :meth:`ChromaServer.stop`
and kept when the server fails, and every :class:`~flux_chroma.errors.ServerStartError` quotes
its path and its last lines.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import ipaddress
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Self

import httpx

from flux_chroma.errors import ConfigurationError, OneOwnerError, ServerStartError

__all__ = ["LOCK_FILE_NAME", "ChromaServer"]

LOCK_FILE_NAME = ".flux-chroma.lock"
"""Name of the ownership lock file created inside the data directory."""

_HEARTBEAT = "/api/v2/heartbeat"
_POLL_INTERVAL = 0.15
_REQUEST_TIMEOUT = 1.0
_PORT_ATTEMPTS = 3
_PORT_TAKEN_MARKER = "is not available"
_TAIL_LINES = 20
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class ChromaServer:
    """A ``chroma run`` child process that owns one data directory.

    Use it as a context manager or call :meth:`start` and :meth:`stop`::

        with ChromaServer("./chroma-data") as server:
            client = chromadb.HttpClient(host=server.host, port=server.port)

    Args:
        path: The Chroma data directory (created when missing).
        host: Address to listen on. Anything but a loopback address triggers a warning,
            because the Chroma 1.5 server has no authentication.
        port: TCP port; 0 picks a free port (and retries a fresh one if it is taken
            between picking and binding).
        startup_timeout: Seconds to wait for the heartbeat before giving up.
        stop_grace: Seconds to wait after SIGTERM before sending SIGKILL.
        log_path: File that receives Chroma's stdout and stderr (appended to). Default:
            ``chroma.log`` in a fresh temporary directory, deleted by a clean :meth:`stop`.

    Raises:
        ConfigurationError: ``port``, ``startup_timeout`` or ``stop_grace`` is out of range.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        startup_timeout: float = 60.0,
        stop_grace: float = 10.0,
        log_path: str | os.PathLike[str] | None = None,
    ) -> None:
        if not 0 <= port <= 65535:
            raise ConfigurationError(f"ChromaServer port={port} is invalid: use 0..65535.")
        if not startup_timeout > 0:
            raise ConfigurationError(
                f"ChromaServer startup_timeout={startup_timeout} is invalid: use a number > 0."
            )
        if not stop_grace >= 0:
            raise ConfigurationError(
                f"ChromaServer stop_grace={stop_grace} is invalid: use a number >= 0."
            )
        self._path = Path(path).expanduser().resolve()
        self._host = host
        self._requested_port = port
        self._port = port
        self._startup_timeout = float(startup_timeout)
        self._stop_grace = float(stop_grace)
        self._user_log_path = Path(log_path).expanduser().resolve() if log_path else None
        self._log_path: Path | None = self._user_log_path
        self._temp_log_dir: Path | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._lock_fd: int | None = None
        self._state = threading.RLock()

    # ------------------------------------------------------------------ properties

    @property
    def path(self) -> Path:
        """The absolute data directory."""
        return self._path

    @property
    def host(self) -> str:
        """The address the server listens on."""
        return self._host

    @property
    def port(self) -> int:
        """The actual port after :meth:`start` (the requested one before)."""
        return self._port

    @property
    def url(self) -> str:
        """The base URL clients use, e.g. ``http://127.0.0.1:8000`` (valid after start)."""
        return _url(self._host, self._port)

    @property
    def pid(self) -> int | None:
        """The ``chroma`` child's pid while started, else None."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path | None:
        """The file receiving Chroma's output (None before the first start)."""
        return self._log_path

    @property
    def lock_path(self) -> Path:
        """The ownership lock file inside the data directory."""
        return self._path / LOCK_FILE_NAME

    def is_running(self) -> bool:
        """Return True while the ``chroma`` child started by this object is alive."""
        proc = self._proc
        return proc is not None and proc.poll() is None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Self:
        """Take ownership of the data directory, launch ``chroma run`` and wait until it answers.

        Returns:
            This server, so ``server = ChromaServer(path).start()`` works.

        Raises:
            ServerStartError: Already started, ``chroma`` not installed, port taken, the
                child exited, or the heartbeat did not answer within ``startup_timeout``.
            OneOwnerError: Another live server owns the data directory.
        """
        with self._state:
            if self._proc is not None:
                raise ServerStartError(
                    f"ChromaServer for {self._path} is already started at {self.url} "
                    f"(chroma pid {self._proc.pid}); call stop() before starting it again."
                )
            if not _is_loopback(self._host):
                warnings.warn(
                    f"ChromaServer listens on {self._host}, which is not a loopback address: "
                    "the Chroma 1.5 server has no authentication, so anyone who can reach "
                    f"port {self._requested_port or '(auto)'} can read and change every "
                    "collection. Bind to 127.0.0.1 or put an authenticating proxy in front.",
                    UserWarning,
                    stacklevel=2,
                )
            executable = _find_chroma()
            lock_fd = self._acquire_ownership()
            try:
                self._launch(executable, lock_fd)
            except BaseException:
                os.close(lock_fd)
                raise
            self._lock_fd = lock_fd
            atexit.register(self.stop)
            return self

    def stop(self) -> None:
        """Stop the child (SIGTERM, then SIGKILL after ``stop_grace``) and release the directory.

        Safe to call more than once and on a server that was never started.
        """
        with self._state:
            proc, lock_fd = self._proc, self._lock_fd
            if proc is None:
                return
            crashed = proc.poll() is not None  # exited on its own: keep its log
            _terminate(proc, self._stop_grace)  # if interrupted, a later stop() retries
            self._proc, self._lock_fd = None, None
            atexit.unregister(self.stop)
            if lock_fd is not None:
                with contextlib.suppress(OSError):
                    os.ftruncate(lock_fd, 0)
                os.close(lock_fd)
            if self._temp_log_dir is not None and not crashed:
                shutil.rmtree(self._temp_log_dir, ignore_errors=True)
                self._temp_log_dir = None

    def wait_forever(self) -> None:
        """Block until SIGINT or SIGTERM arrives, then :meth:`stop` cleanly (foreground mode).

        Signal handlers are installed only while waiting and only in the main thread; in
        another thread this returns once :meth:`stop` is called elsewhere.

        Raises:
            ServerStartError: The server is not started, or the ``chroma`` child exited on
                its own (the message quotes the log tail).
        """
        if self._proc is None:
            raise ServerStartError(
                f"ChromaServer for {self._path} is not started; call start() before wait_forever()."
            )
        received: list[int] = []

        def _on_signal(signum: int, _frame: FrameType | None) -> None:
            received.append(signum)  # no locks here: a handler may interrupt any code

        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                previous[sig] = signal.signal(sig, _on_signal)
        try:
            while not received:
                proc = self._proc
                if proc is None:
                    return
                code = proc.poll()
                if code is not None:
                    raise ServerStartError(
                        f"Chroma server at {self.url} (data {self._path}) exited unexpectedly "
                        f"with code {code}. {self._log_hint()}"
                    )
                time.sleep(0.2)
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler if handler is not None else signal.SIG_DFL)

    def __enter__(self) -> Self:
        """Start the server unless it is already running; return it."""
        if self._proc is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Stop the server."""
        self.stop()

    def __repr__(self) -> str:
        """Show the data directory and, while running, the pid and URL."""
        state = f"running pid={self.pid} url={self.url}" if self._proc else "stopped"
        return f"ChromaServer(path={str(self._path)!r}, {state})"

    # ------------------------------------------------------------------ internals

    def _acquire_ownership(self) -> int:
        try:
            self._path.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ServerStartError(
                f"Cannot use {self._path} as a Chroma data directory ({exc}); "
                "pass a writable directory path."
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info = _read_owner(fd)
            os.close(fd)
            raise OneOwnerError(_owner_message(self._path, self.lock_path, info)) from None
        except BaseException:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)  # drop a stale owner's info left by a killed server
        return fd

    def _open_log(self) -> None:
        if self._user_log_path is not None:
            try:
                self._user_log_path.parent.mkdir(parents=True, exist_ok=True)
                self._user_log_path.touch()
            except OSError as exc:
                raise ServerStartError(
                    f"Cannot write the Chroma server log {self._user_log_path} ({exc}); "
                    "pass a writable log_path."
                ) from exc
            self._log_path = self._user_log_path
        else:
            if self._temp_log_dir is not None:  # kept from a failed start
                shutil.rmtree(self._temp_log_dir, ignore_errors=True)
            self._temp_log_dir = Path(tempfile.mkdtemp(prefix="flux-chroma-server-"))
            self._log_path = self._temp_log_dir / "chroma.log"

    def _launch(self, executable: str, lock_fd: int) -> None:
        attempts = _PORT_ATTEMPTS if self._requested_port == 0 else 1
        for attempt in range(1, attempts + 1):
            if self._requested_port == 0:
                port = _free_port(self._host)
            else:
                port = self._requested_port
                _check_port_free(self._host, port)
            self._port = port
            if attempt == 1:
                self._open_log()  # only now: a failed pre-check leaves no empty log behind
            assert self._log_path is not None
            command = [executable, "run", "--path", str(self._path)]
            command += ["--host", self._host, "--port", str(port)]
            try:
                with open(self._log_path, "ab") as log:
                    offset = log.tell()
                    proc = subprocess.Popen(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        pass_fds=(lock_fd,),  # the child holds the ownership lock too
                        start_new_session=True,  # terminal Ctrl-C reaches us, not chroma
                        env={**os.environ, "NO_COLOR": "1"},
                    )
            except OSError as exc:
                raise ServerStartError(
                    f"Cannot launch {executable} for {self._path} ({exc}); check the chromadb "
                    "installation and the log_path."
                ) from exc
            try:
                _write_owner(lock_fd, proc.pid, self.url, self._path)
                code = self._wait_ready(proc)
            except BaseException:
                _terminate(proc, self._stop_grace)
                raise
            if code is None:
                self._proc = proc
                return
            output = _read_tail(self._log_path, offset)
            if _PORT_TAKEN_MARKER in output:
                if attempt < attempts:
                    continue
                raise ServerStartError(_port_taken_message(self._host, port))
            raise ServerStartError(
                f"Chroma server for {self._path} on {self._host}:{port} exited with code {code} "
                f"before answering. {self._log_hint(offset)}"
            )
        raise AssertionError("unreachable")  # pragma: no cover

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> int | None:
        """Return None once the heartbeat answers, or the exit code if the child exits."""
        heartbeat = self.url + _HEARTBEAT
        deadline = time.monotonic() + self._startup_timeout
        with httpx.Client(timeout=_REQUEST_TIMEOUT, trust_env=False) as http:
            while True:
                code = proc.poll()
                if code is not None:
                    return code
                with contextlib.suppress(httpx.HTTPError):
                    # The heartbeat must come from our child, not from another server that
                    # holds the port while our child is still about to fail binding it.
                    ok = http.get(heartbeat).status_code == 200
                    if ok and _listens(proc.pid, self._port) is not False:
                        code = proc.poll()
                        return None if code is None else code
                if time.monotonic() >= deadline:
                    raise ServerStartError(
                        f"Chroma server for {self._path} did not answer {heartbeat} within "
                        f"{self._startup_timeout:g} s, so it was stopped. Raise startup_timeout "
                        f"if the machine is slow. {self._log_hint()}"
                    )
                time.sleep(_POLL_INTERVAL)

    def _log_hint(self, offset: int = 0) -> str:
        if self._log_path is None:
            return ""
        tail = _read_tail(self._log_path, offset).strip()
        lines = [line for line in tail.splitlines() if line.strip()][-_TAIL_LINES:]
        shown = "\n".join(lines) if lines else "(empty)"
        return f"Log {self._log_path}, last lines:\n{shown}"


# ---------------------------------------------------------------------- helpers


def _find_chroma() -> str:
    """Locate the ``chroma`` console script: next to ``sys.executable``, then on PATH."""
    beside = Path(sys.executable).parent / "chroma"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("chroma")
    if found:
        return found
    raise ServerStartError(
        f"The `chroma` command was not found next to {sys.executable} or on PATH. Install "
        "chromadb 1.5 in this environment (pip install 'chromadb>=1.5,<1.6')."
    )


def _terminate(proc: subprocess.Popen[bytes], grace: float) -> None:
    """SIGTERM the child's process group, wait ``grace`` seconds, then SIGKILL it."""
    if proc.poll() is None:
        # Not reaped yet, so the pid (== process group id) cannot have been reused.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _listens(pid: int, port: int) -> bool | None:
    """Tell whether process ``pid`` holds a listening TCP socket on ``port``.

    Reads ``/proc`` (Linux). Returns None when that cannot be told (no procfs, unreadable
    tables); the caller then trusts the heartbeat and the child still being alive.
    """
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except FileNotFoundError:
        return False if Path("/proc/self/fd").is_dir() else None  # exited, or no procfs
    except OSError:
        return None
    inodes: set[str] = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
            if target.startswith("socket:["):
                inodes.add(target[8:-1])
    suffix = f":{port:04X}"
    readable = False
    for table in ("tcp", "tcp6"):  # the child's own network namespace
        try:
            rows = Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]
        except OSError:
            continue
        readable = True
        for row in rows:
            # sl, local_address, rem_address, st (0A = LISTEN), ..., inode (index 9)
            fields = row.split()
            if (
                len(fields) > 9
                and fields[3] == "0A"
                and fields[1].endswith(suffix)
                and fields[9] in inodes
            ):
                return True
    return False if readable else None


def _url(host: str, port: int) -> str:
    connect = host
    with contextlib.suppress(ValueError):
        ip = ipaddress.ip_address(host)
        if ip.is_unspecified:
            connect = "::1" if ip.version == 6 else "127.0.0.1"
    if ":" in connect:
        connect = f"[{connect}]"
    return f"http://{connect}:{port}"


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _bind_probe(host: str, port: int) -> int:
    """Bind a throw-away socket like Chroma does (SO_REUSEADDR) and return its port."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ServerStartError(f"Cannot resolve ChromaServer host {host!r} ({exc}).") from exc
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
        bound: int = probe.getsockname()[1]
        return bound


def _free_port(host: str) -> int:
    try:
        return _bind_probe(host, 0)
    except OSError as exc:
        raise ServerStartError(f"Cannot bind a port on {host} ({exc}); check the host.") from exc


def _check_port_free(host: str, port: int) -> None:
    try:
        _bind_probe(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise ServerStartError(_port_taken_message(host, port)) from exc
        raise ServerStartError(f"Cannot bind {host}:{port} ({exc}); check the host.") from exc


def _port_taken_message(host: str, port: int) -> str:
    return (
        f"Cannot start Chroma on {host}:{port}: the port is already in use. Stop whatever "
        f"listens there (if it is a Chroma server, connect to {_url(host, port)} instead), "
        "choose another port, or use port 0 to pick a free one."
    )


def _read_tail(path: Path, offset: int, limit: int = 8192) -> str:
    try:
        with open(path, "rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(offset, size - limit))
            data = log.read()
    except OSError:
        return ""
    return _ANSI.sub("", data.decode("utf-8", errors="replace"))


def _write_owner(fd: int, chroma_pid: int, url: str, path: Path) -> None:
    info = {
        "chroma_pid": chroma_pid,
        "owner_pid": os.getpid(),
        "url": url,
        "path": str(path),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    data = json.dumps(info).encode()
    os.ftruncate(fd, 0)
    os.pwrite(fd, data, 0)


def _read_owner(fd: int) -> dict[str, Any]:
    try:
        info = json.loads(os.pread(fd, 65536, 0).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def _owner_message(path: Path, lock_path: Path, info: dict[str, Any]) -> str:
    url = info.get("url")
    if url:
        owner = (
            f"chroma pid {info.get('chroma_pid')}, started by pid {info.get('owner_pid')} "
            f"at {info.get('started_at')}, url {url}"
        )
    else:
        owner = "owner details unavailable: it is starting or stopping"
    target = f"flux-chroma url={url}" if url else "flux-chroma url=<its url>"
    return (
        f"Data directory {path} is already owned by a running Chroma server ({owner}). "
        "One server process must own a data directory: connect to that server with "
        f"chromadb.HttpClient ({target}) instead of starting another one on it. "
        f"Lock: {lock_path}."
    )
