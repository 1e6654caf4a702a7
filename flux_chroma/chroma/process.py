"""Process handling for :class:`~flux_chroma.chroma.server.ChromaServer`: the ``chroma``
script, ports probed the way Chroma binds them, ``/proc`` listen checks, stopping, log tails."""

from __future__ import annotations

import contextlib
import errno
import ipaddress
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

from flux_chroma.errors import ServerStartError

__all__ = [
    "connect_url",
    "is_loopback",
    "listens",
    "port_taken_message",
    "probe_port",
    "read_tail",
    "terminate",
]

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def terminate(proc: subprocess.Popen[bytes], grace: float, sig: int = signal.SIGTERM) -> None:
    """Send ``sig`` to the child's process group, wait ``grace`` seconds, then SIGKILL it."""
    if proc.poll() is None:
        # Not reaped yet, so the pid (== process group id) cannot have been reused.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def listens(pid: int, port: int) -> bool | None:
    """Whether ``pid`` holds a listening TCP socket on ``port``, from ``/proc``.

    None when that cannot be told (no procfs, unreadable tables): trust the heartbeat then.
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
            listening = len(fields) > 9 and fields[3] == "0A" and fields[1].endswith(suffix)
            if listening and fields[9] in inodes:
                return True
    return False if readable else None


def connect_url(host: str, port: int) -> str:
    connect = host
    with contextlib.suppress(ValueError):
        ip = ipaddress.ip_address(host)
        if ip.is_unspecified:
            connect = "::1" if ip.version == 6 else "127.0.0.1"
    if ":" in connect:
        connect = f"[{connect}]"
    return f"http://{connect}:{port}"


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def probe_port(host: str, port: int) -> int:
    """Bind a throw-away socket to ``port`` (0: a free one) like Chroma does; the port bound."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )[0]
    except socket.gaierror as exc:
        raise ServerStartError(f"Cannot resolve ChromaServer host {host!r} ({exc}).") from exc
    try:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            probe.bind(address)
            return int(probe.getsockname()[1])
    except OSError as exc:
        if port and exc.errno == errno.EADDRINUSE:
            raise ServerStartError(port_taken_message(host, port)) from exc
        where = f"{host}:{port}" if port else f"a port on {host}"
        raise ServerStartError(f"Cannot bind {where} ({exc}); check the host.") from exc


def port_taken_message(host: str, port: int) -> str:
    return (
        f"Cannot start Chroma on {host}:{port}: the port is already in use. Stop whatever "
        f"listens there (if it is a Chroma server, connect to {connect_url(host, port)} instead), "
        "choose another port, or use port 0 to pick a free one."
    )


def read_tail(path: Path, offset: int, limit: int = 8192) -> str:
    try:
        with open(path, "rb") as log:
            size = log.seek(0, os.SEEK_END)
            log.seek(max(offset, size - limit))
            data = log.read()
    except OSError:
        return ""
    return _ANSI.sub("", data.decode("utf-8", errors="replace"))
