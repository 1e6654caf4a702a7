"""How many threads one ONNX session may use: a per-host budget shared by every embedder.

An ONNX session uses every core by default. When several processes embed on one host
(several Flux workers, parallel ingestion units, the subprocess runner), they oversubscribe
the cores and each runs slower than its share. The budget, in order:

1. ``FastDefaultEmbedding(threads=N)``;
2. ``$FLUX_CHROMA_EMBED_THREADS``;
3. otherwise a share of this process's cores: ``max(1, cores // live embedders)``, where the
   live embedders on this host are counted with :class:`HostSlots`.

:class:`HostSlots` is a folder in the temp directory (one per OS user) holding one file per
process that embeds, each ``flock``-ed by its process for as long as it lives. The file's
modification time says what the process is doing: while it embeds, a time in the future
(``now +`` :data:`BUSY_LEASE`); once it stops, the time it stopped. A file nobody holds belongs
to a process that died: it is removed when counted. A held file whose process stopped embedding
more than :data:`IDLE_SECONDS` ago (an idle worker) does not count. Counting costs a directory
listing and one non-blocking lock attempt per file; it is done when a process starts embedding
(and at most every :data:`RECHECK_SECONDS` while several embeddings of one process overlap),
and a session is rebuilt when its share changed. A share is at least one thread, so more
embedders than cores would still oversubscribe: :mod:`flux_chroma.embedding.core_gate` then
queues their model runs.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import threading
import time
from pathlib import Path

from flux_chroma.errors import ConfigurationError

__all__ = [
    "BUSY_LEASE",
    "EMBED_THREADS_ENV",
    "IDLE_SECONDS",
    "MAX_THREADS",
    "RECHECK_SECONDS",
    "HostSlots",
    "configured_threads",
    "cpu_count",
    "share",
    "validate_threads",
]

EMBED_THREADS_ENV = "FLUX_CHROMA_EMBED_THREADS"
"""Environment variable: threads per embedding session in this process (a positive integer)."""

MAX_THREADS = 1024
"""Largest accepted thread count."""

RECHECK_SECONDS = 2.0
"""How often (at most) an embedding process recounts the live embedders on its host."""

IDLE_SECONDS = 15.0
"""A process that stopped embedding this long ago no longer counts as a live embedder.

Long enough to cover the gap between two batches of one job (upsert, verify, checkpoint, the
next task's dispatch), short enough that a worker that went idle stops halving the others' share.
"""

BUSY_LEASE = 3600.0
"""While a process embeds, its slot's time is set this far ahead (so it counts however long
one call takes; a process that dies releases its ``flock`` and stops counting at once)."""


def validate_threads(value: object, source: str, *, text: bool = False) -> int:
    """Return ``value`` as a thread count, or raise naming where it came from.

    Args:
        value: An int (or, with ``text``, its decimal text as read from the environment).
        source: What set it, for the message (``"threads="``, ``"FLUX_CHROMA_EMBED_THREADS"``).
        text: Accept a decimal string.

    Returns:
        The thread count (1 to :data:`MAX_THREADS`).

    Raises:
        ConfigurationError: Not a whole number from 1 to :data:`MAX_THREADS`.
    """
    number: int | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif text and isinstance(value, str) and value.strip().isdigit():
        number = int(value.strip())
    if number is None or not 1 <= number <= MAX_THREADS:
        raise ConfigurationError(
            f"{source} must be a whole number of threads from 1 to {MAX_THREADS}, got {value!r}. "
            f"Leave it unset to share this host's cores among the processes that embed on it."
        )
    return number


def configured_threads(explicit: int | None = None) -> int | None:
    """The fixed thread count for a session, or None to share the host's cores.

    Args:
        explicit: ``threads=`` of the embedding function (already validated), if any.

    Returns:
        ``explicit``, else ``$FLUX_CHROMA_EMBED_THREADS``, else None.

    Raises:
        ConfigurationError: ``$FLUX_CHROMA_EMBED_THREADS`` is set but not a valid count.
    """
    if explicit is not None:
        return explicit
    env = os.environ.get(EMBED_THREADS_ENV, "").strip()
    return validate_threads(env, EMBED_THREADS_ENV, text=True) if env else None


def cpu_count() -> int:
    """Cores this process may run on (its CPU affinity)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def share(cores: int, live: int) -> int:
    """One embedder's share of ``cores`` when ``live`` embedders run (at least 1 thread)."""
    return max(1, cores // max(1, live))


class HostSlots:
    """One ``flock``-ed file per embedding process in a per-user temp folder.

    Args:
        folder: Where the slot files live (default: ``<tmp>/flux-chroma-embedders-<uid>``).
    """

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder or Path(tempfile.gettempdir()) / f"flux-chroma-embedders-{os.getuid()}"
        self._fd: int | None = None
        self._pid = -1
        self._lock = threading.Lock()

    def claim(self, busy: bool = True) -> None:
        """Hold this process's slot and mark it busy, or idle from now (a forked child claims its own).

        Args:
            busy: Mark the process as embedding now (else: it stopped embedding now).

        A folder that cannot be used (read-only temp directory) leaves the process uncounted.
        """
        with self._lock:
            try:
                if self._fd is None or self._pid != os.getpid() or not os.fstat(self._fd).st_nlink:
                    # (re)create: a counter may remove a file in the instant before its flock
                    self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                    path = self.folder / f"slot-{os.getpid()}"
                    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    self._fd, self._pid = fd, os.getpid()
                stamp = time.time() + (BUSY_LEASE if busy else 0.0)
                os.utime(self._fd, (stamp, stamp))
            except OSError:
                return

    def release(self) -> None:
        """Give this process's slot back (for tests; a process that exits releases it too)."""
        with self._lock:
            if self._fd is not None and self._pid == os.getpid():
                (self.folder / f"slot-{self._pid}").unlink(missing_ok=True)
                os.close(self._fd)
            self._fd, self._pid = None, -1

    def live(self) -> int:
        """Count the processes embedding now or lately (this one included); remove dead ones' files."""
        count = 1  # this process
        mine = f"slot-{os.getpid()}"
        recent = time.time() - IDLE_SECONDS
        try:
            entries = [p for p in self.folder.glob("slot-*") if p.name != mine]
        except OSError:
            return count
        for path in entries:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue  # removed meanwhile
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:  # its process holds it: alive; count it if busy or lately busy
                count += os.fstat(fd).st_mtime >= recent
            else:
                path.unlink(missing_ok=True)  # nobody holds it: that process is gone
            finally:
                os.close(fd)
        return count


class Budget:
    """The thread count of this process's sessions when the host's cores are shared.

    Each :meth:`threads` (an embedding starts) is paired with one :meth:`done` (it ended);
    the process counts as busy on the host while any embedding of it runs.

    Args:
        slots: The host's slot registry.
    """

    def __init__(self, slots: HostSlots | None = None) -> None:
        self.slots = slots or HostSlots()
        self._checked = 0.0
        self._threads = 0
        self._running = 0
        self._lock = threading.Lock()

    def threads(self) -> int:
        """Mark an embedding as started; this process's share now.

        Counted afresh when this process starts embedding, and at most every
        :data:`RECHECK_SECONDS` while several embeddings of it overlap.
        """
        with self._lock:
            self._running += 1
            now = time.monotonic()
            starting = self._running == 1  # this process was idle: count afresh
            if starting or now - self._checked >= RECHECK_SECONDS:
                self.slots.claim(busy=True)
                self._threads = share(cpu_count(), self.slots.live())
                self._checked = now
            return self._threads

    def done(self) -> None:
        """Mark an embedding as ended; the last one to end marks the process idle from now."""
        with self._lock:
            self._running = max(0, self._running - 1)
            if self._running == 0:
                self.slots.claim(busy=False)
