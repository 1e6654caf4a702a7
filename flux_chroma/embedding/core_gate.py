"""The host's cores as tokens: at most one model run per core at a time, host-wide.

The thread budget (:mod:`flux_chroma.embedding.threads`) gives each embedding process its
share of the cores, but never less than one thread: four processes on two cores still run
four model threads at once, and the kernel time-slices them (measured in docs/benchmarks.md
row 7: 4 processes of 1 thread reached 0.75x the docs/s of 1 process of 2 threads, while 2
processes of 1 thread reached 1.0x). The gate turns that time-slicing into a queue: a model run
first takes a token (a ``flock``-ed file, one per core), so at most ``cores`` run at once and
the others wait their turn, doing their other work (upserts, checkpoints) meanwhile.

Taking a token: a waiter first holds the queue file (a blocking ``flock``), then polls the
token files without blocking and takes up to the tokens it wants (at least one) before it lets
the queue go. A process that just released a token queues behind the current waiter, so the
waiters take turns. Each acquisition opens its own file descriptions, so threads of one process
queue against each other too. A process that dies releases its locks; a run that waits longer
than :data:`PATIENCE_SECONDS` (a holder that hangs) goes ahead without a token: late, never
stuck. No wait is needed when a token is free: the cost is a few ``open``/``flock`` calls.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

__all__ = ["PATIENCE_SECONDS", "CoreGate"]

PATIENCE_SECONDS = 60.0
"""A model run that waited this long for a core runs without one (a token holder hangs)."""

_POLL_FIRST = 0.0005
_POLL_MAX = 0.002  # a freed core idles at most this long


class CoreGate:
    """One token file per core in a folder shared by the host's embedding processes.

    Args:
        folder: The folder (the thread budget's slot folder).
        cores: Tokens, one per core this process may run on.
    """

    def __init__(self, folder: Path, cores: int) -> None:
        self.folder = folder
        self.cores = max(1, cores)
        self._made = False

    def _open(self, name: str) -> int | None:
        try:
            if not self._made:  # once per gate, not once per file and run
                self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
                self._made = True
            return os.open(self.folder / name, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None

    def _take(self, want: int) -> list[int]:
        """Take from 1 to ``want`` free tokens without blocking (empty: none is free)."""
        got: list[int] = []
        for index in range(self.cores):
            if len(got) >= want:
                break
            fd = self._open(f"core-{index}")
            if fd is None:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
            else:
                got.append(fd)
        return got

    @contextmanager
    def hold(self, want: int) -> Iterator[int]:
        """Hold up to ``want`` cores (at least one, waiting for it) for one model run.

        Args:
            want: The run's intra-op threads.

        Yields:
            The tokens held (0 when the folder is unusable or the wait ran out of patience).
        """
        queue = self._open("queue")
        got: list[int] = []
        try:
            if queue is not None:
                fcntl.flock(queue, fcntl.LOCK_EX)  # wait for our turn
                deadline = time.monotonic() + PATIENCE_SECONDS
                delay = _POLL_FIRST
                while not (got := self._take(max(1, want))) and time.monotonic() < deadline:
                    time.sleep(delay)
                    delay = min(2 * delay, _POLL_MAX)
        finally:
            if queue is not None:
                os.close(queue)  # lets the next waiter in
        try:
            yield len(got)
        finally:
            for fd in got:
                with suppress(OSError):
                    os.close(fd)  # closing the only description releases its flock
