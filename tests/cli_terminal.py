"""Run ``flux-chroma`` in a real pseudo-terminal of a chosen size (helper for the CLI tests).

The child gets the pty as stdin, stdout and stderr, with the window size set through
``TIOCSWINSZ`` (no ``COLUMNS``/``LINES``), so rich sees a real terminal of that width.
"""

from __future__ import annotations

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass

HANG_GUARD = 300.0  # seconds; only stops a broken test from hanging
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]")
_DROP = ("COLUMNS", "LINES", "FORCE_COLOR", "NO_COLOR", "TERM", "FORCE_TERMINAL", "TTY_COMPATIBLE")


@dataclass
class PtyRun:
    """What one command printed on its terminal, and how it ended."""

    returncode: int
    raw: str
    seconds: float

    @property
    def text(self) -> str:
        """The output without escape sequences, ``\\r\\n`` turned into ``\\n``."""
        return _ANSI.sub("", self.raw).replace("\r\n", "\n")

    @property
    def lines(self) -> list[str]:
        """Every line as the terminal showed it (a ``\\r`` redraw starts a new line)."""
        return re.split(r"[\r\n]", self.text)

    def longest(self) -> int:
        """Length of the longest line, in characters."""
        return max((len(line.rstrip()) for line in self.lines), default=0)


def run_in_pty(
    *args: str,
    cols: int = 80,
    rows: int = 50,
    env: dict[str, str] | None = None,
    cwd: str | None = None,
    on_output: Callable[[str, subprocess.Popen[bytes]], None] | None = None,
    timeout: float = HANG_GUARD,
) -> PtyRun:
    """Run ``python -m flux_chroma.cli ARGS`` on a ``cols`` x ``rows`` pseudo-terminal.

    Args:
        *args: The command's arguments.
        cols: Terminal width.
        rows: Terminal height.
        env: Extra environment variables.
        cwd: Working directory.
        on_output: Called with the output so far after each read (e.g. to send a signal).
        timeout: Hang guard; the child is killed and ``TimeoutError`` raised past it.

    Returns:
        The exit code and the raw output.
    """
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
    full_env = {k: v for k, v in os.environ.items() if k not in _DROP}
    full_env.update({"TERM": "xterm-256color", **(env or {})})
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "flux_chroma.cli", *args],
        stdin=slave, stdout=slave, stderr=slave, env=full_env, cwd=cwd, start_new_session=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    try:
        while True:
            if time.monotonic() - started > timeout:
                os.killpg(proc.pid, signal.SIGKILL)
                raise TimeoutError(f"flux-chroma {' '.join(args)} still running after {timeout} s")
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every writer closed the terminal
                break
            if not data:
                break
            chunks.append(data)
            if on_output is not None:
                on_output(b"".join(chunks).decode(errors="replace"), proc)
        returncode = proc.wait(timeout=timeout)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return PtyRun(returncode, b"".join(chunks).decode(errors="replace"), time.monotonic() - started)
