"""The one-owner rule: a data directory is owned by at most one live Chroma server.

Ownership is an exclusive ``flock`` on ``DIR/.flux-chroma.lock``, inherited by the ``chroma``
child: it holds while either is alive and the kernel frees it when both are gone. Never delete
the lock file: two processes could then lock two different files of the same name. It holds
the owner's details so a refused second server can say where to connect instead.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from flux_chroma.errors import OneOwnerError, ServerStartError

__all__ = ["LOCK_FILE_NAME", "acquire_ownership", "release_ownership", "write_owner"]

LOCK_FILE_NAME = ".flux-chroma.lock"
"""Name of the ownership lock file inside a data directory."""


def acquire_ownership(path: Path) -> int:
    """Create the data directory ``path`` if needed and lock its ownership file (no blocking).

    Returns:
        The locked file descriptor (close-on-exec; pass it to the child explicitly).

    Raises:
        ServerStartError: The directory or its lock file cannot be created.
        OneOwnerError: Another live process owns the directory (the message names it).
    """
    lock_path = path / LOCK_FILE_NAME
    try:
        path.mkdir(parents=True, exist_ok=True)
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise ServerStartError(
            f"Cannot use {path} as a Chroma data directory ({exc}); "
            "pass a writable directory path."
        ) from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        info = _read_owner(fd)
        os.close(fd)
        raise OneOwnerError(_owner_message(path, lock_path, info)) from None
    except BaseException:
        os.close(fd)
        raise
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)  # drop a stale owner's info left by a killed server
    return fd


def release_ownership(fd: int) -> None:
    """Clear the owner's details and close the lock (the child may still hold it)."""
    with contextlib.suppress(OSError):
        os.ftruncate(fd, 0)
    os.close(fd)


def write_owner(fd: int, chroma_pid: int, url: str, path: Path) -> None:
    """Record who owns the directory in its lock file (read by a refused second server)."""
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
    """The owner's details, or ``{}`` when unreadable or its processes are all gone.

    A process refused between a new owner's lock and its truncation of the stale record would
    otherwise name the dead owner.
    """
    try:
        info = json.loads(os.pread(fd, 65536, 0).decode("utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(info, dict):
        return {}
    pids = [info.get(key) for key in ("owner_pid", "chroma_pid")]
    if not any(isinstance(pid, int) and _pid_alive(pid) for pid in pids):
        return {}
    return info


def _pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


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
