"""A managed local ``chroma run`` server for development, tests and ``flux-chroma server``.

The child inherits the data directory's ownership lock (:mod:`flux_chroma.chroma.ownership`).
Its default log is a fresh temporary ``chroma.log`` (never inside the data directory), deleted
by a clean stop and kept on failure; every ``ServerStartError`` quotes its path and last lines.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import warnings
from pathlib import Path
from types import FrameType
from typing import Any, Self

import httpx

from flux_chroma.chroma.ownership import (
    LOCK_FILE_NAME,
    acquire_ownership,
    release_ownership,
    write_owner,
)
from flux_chroma.chroma.process import (
    connect_url,
    is_loopback,
    listens,
    port_taken_message,
    probe_port,
    read_tail,
    terminate,
)
from flux_chroma.errors import ConfigurationError, ServerStartError
from flux_chroma.seams import chroma_server_command

__all__ = ["LOCK_FILE_NAME", "ChromaServer"]

_HEARTBEAT = "/api/v2/heartbeat"
_POLL_INTERVAL = 0.15
_REQUEST_TIMEOUT = 1.0
_PORT_ATTEMPTS = 3
_PORT_TAKEN_MARKER = "is not available"
_TAIL_LINES = 20


class ChromaServer:
    """A ``chroma run`` child process that owns one data directory (also a context manager).

    Args:
        path: The Chroma data directory (created when missing).
        host: Address to listen on. Anything but a loopback address triggers a warning,
            because the Chroma 1.5 server has no authentication.
        port: TCP port; 0 picks a free one (retried if taken between picking and binding).
        startup_timeout: Seconds to wait for the heartbeat.
        stop_grace: Seconds to wait after SIGTERM before SIGKILL.
        log_path: File receiving Chroma's output (appended). Default: a temporary
            ``chroma.log``, deleted by a clean :meth:`stop`.

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
        return connect_url(self._host, self._port)

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

    def start(self) -> Self:
        """Take ownership of the data directory, launch ``chroma run`` and wait until it answers.

        Raises:
            ServerStartError: Already started, port taken, the child exited, or the
                heartbeat did not answer within ``startup_timeout``.
            OneOwnerError: Another live server owns the data directory.
        """
        with self._state:
            if self._proc is not None:
                raise ServerStartError(
                    f"ChromaServer for {self._path} is already started at {self.url} "
                    f"(chroma pid {self._proc.pid}); call stop() before starting it again."
                )
            if not is_loopback(self._host):
                warnings.warn(
                    f"ChromaServer listens on {self._host}, which is not a loopback address: "
                    "the Chroma 1.5 server has no authentication, so anyone who can reach "
                    f"port {self._requested_port or '(auto)'} can read and change every "
                    "collection. Bind to 127.0.0.1 or put an authenticating proxy in front.",
                    UserWarning,
                    stacklevel=2,
                )
            command = chroma_server_command()
            lock_fd = acquire_ownership(self._path)
            try:
                self._launch(command, lock_fd)
            except BaseException:
                os.close(lock_fd)
                raise
            self._lock_fd = lock_fd
            atexit.register(self.stop)
            return self

    def stop(self) -> None:
        """Stop the child (SIGTERM, SIGKILL after ``stop_grace``) and release the directory.

        Idempotent; a no-op on a server never started.
        """
        with self._state:
            proc, lock_fd = self._proc, self._lock_fd
            if proc is None:
                return
            crashed = proc.poll() is not None  # exited on its own: keep its log
            terminate(proc, self._stop_grace)  # if interrupted, a later stop() retries
            self._proc, self._lock_fd = None, None
            atexit.unregister(self.stop)
            if lock_fd is not None:
                release_ownership(lock_fd)
            if self._temp_log_dir is not None and not crashed:
                shutil.rmtree(self._temp_log_dir, ignore_errors=True)
                self._temp_log_dir = None

    def wait_forever(self) -> None:
        """Block until SIGINT or SIGTERM, then :meth:`stop` (foreground mode).

        Signal handlers are installed only in the main thread; in another thread this returns
        once :meth:`stop` is called elsewhere.

        Raises:
            ServerStartError: Not started, or the child exited on its own (quotes the log tail).
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
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running pid={self.pid} url={self.url}" if self._proc else "stopped"
        return f"ChromaServer(path={str(self._path)!r}, {state})"

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
        else:
            if self._temp_log_dir is not None:  # kept from a failed start
                shutil.rmtree(self._temp_log_dir, ignore_errors=True)
            self._temp_log_dir = Path(tempfile.mkdtemp(prefix="flux-chroma-server-"))
            self._log_path = self._temp_log_dir / "chroma.log"

    def _launch(self, chroma: list[str], lock_fd: int) -> None:
        attempts = _PORT_ATTEMPTS if self._requested_port == 0 else 1
        for attempt in range(1, attempts + 1):
            port = self._port = probe_port(self._host, self._requested_port)
            if attempt == 1:
                self._open_log()  # only now: a failed pre-check leaves no empty log behind
            assert self._log_path is not None
            command = [*chroma, "run", "--path", str(self._path)]
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
                    f"Cannot launch Chroma's server ({chroma[0]}) for {self._path} ({exc}); check "
                    "the chromadb installation and the log_path."
                ) from exc
            try:
                write_owner(lock_fd, proc.pid, self.url, self._path)
                code = self._wait_ready(proc)
            except BaseException:
                terminate(proc, self._stop_grace)
                raise
            if code is None:
                self._proc = proc
                return
            output = read_tail(self._log_path, offset)
            if _PORT_TAKEN_MARKER in output:
                if attempt < attempts:
                    continue
                raise ServerStartError(port_taken_message(self._host, port))
            raise ServerStartError(
                f"Chroma server for {self._path} on {self._host}:{port} exited with code {code} "
                f"before answering. {self._log_hint(offset)}"
            )

    def _wait_ready(self, proc: subprocess.Popen[bytes]) -> int | None:
        """Return None once the heartbeat answers, or the exit code if the child exits."""
        heartbeat = self.url + _HEARTBEAT
        deadline = time.monotonic() + self._startup_timeout
        with httpx.Client(timeout=_REQUEST_TIMEOUT, trust_env=False) as http:
            while True:
                code = proc.poll()
                if code is not None:
                    return code
                # Before the request, not after: a request made in time can be answered late
                # (the child's socket accepts the connection before its app answers).
                if time.monotonic() >= deadline:
                    raise ServerStartError(
                        f"Chroma server for {self._path} did not answer {heartbeat} within "
                        f"{self._startup_timeout:g} s, so it was stopped. Raise startup_timeout "
                        f"if the machine is slow. {self._log_hint()}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    # The heartbeat must come from our child, not from another server that
                    # holds the port while our child is still about to fail binding it.
                    ok = http.get(heartbeat).status_code == 200
                    if ok and listens(proc.pid, self._port) is not False:
                        return proc.poll()
                time.sleep(_POLL_INTERVAL)

    def _log_hint(self, offset: int = 0) -> str:
        if self._log_path is None:
            return ""
        tail = read_tail(self._log_path, offset).strip()
        lines = [line for line in tail.splitlines() if line.strip()][-_TAIL_LINES:]
        shown = "\n".join(lines) if lines else "(empty)"
        return f"Log {self._log_path}, last lines:\n{shown}"
