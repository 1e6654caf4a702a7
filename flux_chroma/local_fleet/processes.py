"""OS processes of a local fleet, each in its own process group, stopped by the pid started.

The group id is the pid started here, so a worker's execution children stop with it; nothing
is found or stopped by name.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from flux_chroma.chroma.process import terminate
from flux_chroma.errors import ServerStartError
from flux_chroma.local_fleet.postgres import LocalPostgres, free_port

__all__ = ["Processes", "free_port", "tool", "clean_env", "wait_for", "flux_cli"]

BIN = Path(sys.executable).parent
STARTUP_TIMEOUT = 90.0  # seconds a process may take to answer (a hang guard)
RUN_TIMEOUT = 180.0  # seconds a ``flux`` command may take


class Processes:
    """The processes started here, stopped in reverse order by pid (a throwaway PostgreSQL last).

    Args:
        workdir: Each process runs in ``workdir/NAME`` and logs to ``workdir/NAME/output.log``.
        announce: Print ``started NAME pid N`` / ``stopped NAME ...`` lines.
    """

    def __init__(self, workdir: Path, *, announce: bool = True) -> None:
        self.workdir = workdir
        self.announce = announce
        self.procs: list[tuple[str, subprocess.Popen[bytes], Path]] = []
        self.postgres: LocalPostgres | None = None
        self.groups: dict[str, str] = {}

    def _say(self, text: str) -> None:
        if self.announce:
            print(text, flush=True)

    def start_postgres(self) -> str:
        """Start a throwaway :class:`LocalPostgres`; return its ``FLUX_DATABASE_URL``."""
        self.postgres = LocalPostgres()
        self.postgres.start()
        self._say(f"started {'postgres':<9} pid {self.postgres.pid}")
        return self.postgres.url

    def start(
        self, name: str, argv: Sequence[str], env: dict[str, str], *, group: str | None = None
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` in its own process group (so its children stop with it).

        Args:
            name: Its folder, its log, its key in :meth:`pids`.
            env: Its whole environment.
            group: Independent peers, such as a fleet's workers: :meth:`stop` stops them at once
                (at the last one's turn), so their drains do not add up.
        """
        cwd = self.workdir / name
        cwd.mkdir(parents=True, exist_ok=True)
        log = cwd / "output.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                list(argv), cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.procs.append((name, proc, log))
        if group is not None:
            self.groups[name] = group
        self._say(f"started {name:<9} pid {proc.pid}")
        return proc

    def pids(self) -> dict[str, int]:
        """``{name: pid}`` of every process started."""
        pids = {name: proc.pid for name, proc, _ in self.procs}
        if self.postgres is not None and self.postgres.pid is not None:
            pids["postgres"] = self.postgres.pid
        return pids

    def log_tail(self, name: str, lines: int = 15) -> str:
        """The last lines of one process's output."""
        log = self.workdir / name / "output.log"  # where start() sends it
        text = log.read_text(errors="replace") if log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def signal(self, name: str, sig: int, *, forget: bool = False) -> None:
        """Send ``sig`` to the process group of ``name`` and wait for it to end.

        Args:
            forget: Drop it from the list afterwards (it may be started again under its name).

        Raises:
            KeyError: No process of that name was started.
        """
        for entry in self.procs:
            proc_name, proc, _ = entry
            if proc_name == name and proc.poll() is None:
                os.killpg(proc.pid, sig)  # the group id is the pid we started
                proc.wait(timeout=30)
                if forget:
                    self.procs.remove(entry)  # safe: the loop ends here
                return
        if all(proc_name != name for proc_name, _, _ in self.procs):
            raise KeyError(name)

    def stop(self) -> None:
        """SIGTERM each process group (by the pid we started), SIGKILL after 15 s.

        In reverse start order; the members of a ``group`` together, at the last one's turn.
        """
        batches: dict[object, list[tuple[str, subprocess.Popen[bytes]]]] = {}
        for name, proc, _ in reversed(self.procs):  # key: its group, else the process itself
            batches.setdefault(self.groups.get(name, proc), []).append((name, proc))
        for batch in batches.values():
            for _, member in batch:
                if member.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(member.pid, signal.SIGTERM)  # the group id is the pid we started
            deadline = time.monotonic() + 15
            for member_name, member in batch:
                # Signal 0 sends nothing (SIGTERM went above): wait out the rest, then SIGKILL.
                terminate(member, max(0.0, deadline - time.monotonic()), 0)
                self._say(f"stopped {member_name:<9} pid {member.pid} (exit {member.returncode})")
        if self.postgres is not None:
            self.postgres.stop()
            self._say(f"stopped {'postgres':<9} pid {self.postgres.pid}")


def tool(name: str) -> str:
    """The path of a command next to this Python or on PATH (else ``ServerStartError``)."""
    path = BIN / name
    found = str(path) if path.exists() else shutil.which(name)
    if not found:
        raise ServerStartError(f"`{name}` is not installed in this environment (pip install -e .)")
    return found


def clean_env(keep: Sequence[str] = (), **extra: str) -> dict[str, str]:
    """This process's environment without ``FLUX_``/``CHROMA_`` variables, plus ``extra``.

    ``keep``: prefixes passed through anyway (e.g. ``FLUX_CHROMA``, flux-chroma's own settings).
    This Python's ``bin`` folder comes first on ``PATH``.
    """
    env = {
        k: v
        for k, v in os.environ.items()
        if k.startswith(tuple(keep)) or not k.startswith(("FLUX_", "CHROMA_"))
    }
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}")
    env.update(extra)
    return env


def wait_for(
    what: str, probe: Callable[[], Any], procs: Processes, name: str, timeout: float = STARTUP_TIMEOUT
) -> Any:
    """Return ``probe``'s first true value (its HTTP and OS errors count as "not yet").

    Raises:
        ServerStartError: One of ``procs`` exited, or ``timeout`` passed (with ``name``'s log).
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for proc_name, proc, _ in procs.procs:
            if proc.poll() is not None:
                raise ServerStartError(
                    f"{proc_name} exited with {proc.returncode}:\n{procs.log_tail(proc_name)}"
                )
        try:
            value = probe()
        except (httpx.HTTPError, OSError, ValueError, subprocess.SubprocessError):
            value = None
        if value:
            return value
        time.sleep(0.3)
    raise ServerStartError(f"timed out waiting for {what}:\n{procs.log_tail(name)}")


def flux_cli(args: Sequence[str], env: dict[str, str], timeout: float = RUN_TIMEOUT) -> str:
    """Run one ``flux`` command; its standard output (``ServerStartError`` when it fails)."""
    done = subprocess.run(
        [tool("flux"), *args], env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise ServerStartError(
            f"flux {' '.join(args[:3])} failed ({done.returncode}): {done.stderr or done.stdout}"
        )
    return done.stdout
