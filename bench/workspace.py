"""Private state for one benchmark run: temp folders, Flux env, a Chroma server, child processes.

:func:`prepare_environment` must run before anything imports ``flux``: Flux reads
``FLUX_HOME`` / ``FLUX_DATABASE_URL`` once. Every process started here is stopped by pid.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "ROOT",
    "ChildResult",
    "flux_env",
    "prepare_environment",
    "proc_cpu_seconds",
    "run_child",
    "Workspace",
]

ROOT = Path(__file__).resolve().parent.parent
_TICKS = os.sysconf("SC_CLK_TCK")


def flux_env(home: Path, cache_dir: Path) -> dict[str, str]:
    """Environment variables that give a process its own Flux state and embedding cache.

    Args:
        home: Flux home folder (the SQLite database goes inside).
        cache_dir: flux-chroma embedding cache folder.

    Returns:
        The variables to set.
    """
    home.mkdir(parents=True, exist_ok=True)
    return {
        "FLUX_HOME": str(home),
        "FLUX_DATABASE_URL": f"sqlite:///{home / 'flux.db'}",
        "FLUX_CHROMA_CACHE_DIR": str(cache_dir),
        "FLUX_LOG_LEVEL": "WARNING",
    }


def prepare_environment(work: Path) -> None:
    """Point this process' Flux state and embedding cache into ``work`` (call before importing flux).

    Args:
        work: The run's private folder.
    """
    os.environ.update(flux_env(work / "flux-home", work / "embedding-cache"))


def proc_cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a live process, from ``/proc/<pid>/stat`` (0.0 if gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return 0.0
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime (fields 14 and 15)


@dataclass
class Workspace:
    """The run's folders and its Chroma server.

    Attributes:
        work: Private temp folder (deleted by :meth:`close` unless ``keep``).
        keep: Keep the folder after the run.
    """

    work: Path
    keep: bool = False
    server: Any = None
    _children: list[subprocess.Popen[str]] = field(default_factory=list)

    @classmethod
    def create(cls, workdir: str | None = None, keep: bool = False) -> Workspace:
        """Make the folder and set the Flux environment of this process.

        Args:
            workdir: Use this empty or new folder (kept) instead of a fresh temp folder.
            keep: Keep a fresh temp folder after the run.

        Returns:
            The workspace (server not started yet).
        """
        if workdir:
            work = Path(workdir).resolve()
            if work.exists() and any(work.iterdir()):
                raise SystemExit(f"--workdir {work} is not empty; give an empty or new folder.")
            work.mkdir(parents=True, exist_ok=True)
            keep = True
        else:
            work = Path(tempfile.mkdtemp(prefix="flux-chroma-bench-"))
        prepare_environment(work)
        return cls(work=work, keep=keep)

    def start_server(self) -> Any:
        """Start a private ``chroma run`` server on a free loopback port.

        Returns:
            The started :class:`~flux_chroma.ChromaServer`.
        """
        from flux_chroma import ChromaServer

        self.server = ChromaServer(
            self.work / "chroma-data", port=0, log_path=self.work / "chroma.log"
        )
        self.server.start()
        os.environ["FLUX_CHROMA_URL"] = self.server.url
        return self.server

    def server_cpu(self) -> float:
        """CPU seconds the server process has used so far."""
        return (
            proc_cpu_seconds(self.server.pid)
            if self.server is not None and self.server.pid
            else 0.0
        )

    def close(self) -> None:
        """Stop the server and delete the folder (unless kept)."""
        if self.server is not None:
            self.server.stop()
            self.server = None
        if not self.keep:
            shutil.rmtree(self.work, ignore_errors=True)


@dataclass
class ChildResult:
    """What a child benchmark process reported.

    Attributes:
        output: The JSON object the child printed last.
        maxrss_mib: ``ru_maxrss`` from ``wait4``. On Linux it also counts the parent's RSS at
            fork time (``exec`` folds the replaced image's peak into it); children therefore
            report their own ``VmHWM`` as ``peak_rss_mib`` in their output.
        cpu_seconds: User + system CPU of the child.
        seconds: Wall time from launch to exit.
    """

    output: dict[str, Any]
    maxrss_mib: float
    cpu_seconds: float
    seconds: float


def child_command(mode: str, params: dict[str, Any]) -> list[str]:
    """The command line of a child benchmark process."""
    return [sys.executable, "-m", "bench.child", mode, json.dumps(params)]


def launch_child(mode: str, params: dict[str, Any], env: dict[str, str]) -> subprocess.Popen[str]:
    """Start ``python -m bench.child MODE PARAMS`` with extra environment variables.

    Args:
        mode: Child mode (see :mod:`bench.child`).
        params: JSON parameters.
        env: Variables added to this process' environment.

    Returns:
        The process, with pipes on stdin and stdout.
    """
    return subprocess.Popen(
        child_command(mode, params),
        cwd=ROOT,
        env={**os.environ, **env},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


def reap_child(proc: subprocess.Popen[str], started: float) -> ChildResult:
    """Read a child's output, wait for it with ``wait4`` and return its measurements.

    Args:
        proc: A process from :func:`launch_child` (its stdin is closed here).
        started: ``time.perf_counter()`` at launch.

    Returns:
        The child's result.

    Raises:
        RuntimeError: The child failed or printed no JSON result.
    """
    assert proc.stdout is not None
    if proc.stdin is not None and not proc.stdin.closed:
        proc.stdin.close()
    lines = proc.stdout.read().splitlines()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - started
    result = None
    for line in reversed(lines):
        if line.startswith("{"):
            result = json.loads(line)
            break
    if proc.returncode != 0 or result is None:
        tail = "\n".join(lines[-20:])
        raise RuntimeError(f"bench child {proc.args!r} exited {proc.returncode}; output:\n{tail}")
    return ChildResult(
        output=result,
        maxrss_mib=usage.ru_maxrss / 1024,
        cpu_seconds=usage.ru_utime + usage.ru_stime,
        seconds=seconds,
    )


def run_child(mode: str, params: dict[str, Any], env: dict[str, str]) -> ChildResult:
    """Run one child to completion.

    Args:
        mode: Child mode.
        params: JSON parameters.
        env: Extra environment variables.

    Returns:
        Its result.
    """
    started = time.perf_counter()
    proc = launch_child(mode, params, env)
    try:
        return reap_child(proc, started)
    finally:
        stop_child(proc)


def stop_child(proc: subprocess.Popen[str]) -> None:
    """Kill a child that is still running (by its pid) and reap it."""
    if proc.returncode is None and proc.poll() is None:
        proc.kill()
        proc.wait()


def self_peak_rss_mib() -> float:
    """Peak RSS of this process in MiB."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
