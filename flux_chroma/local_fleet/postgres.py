"""A throwaway PostgreSQL server for a local Flux fleet (SQLite suits a single worker only).

PostgreSQL refuses to run as root: as root, every PostgreSQL command runs as the ``postgres``
OS user (``runuser -u postgres --``) and the data directory is chowned to it.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import random
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

from flux_chroma.chroma.process import probe_port, terminate
from flux_chroma.errors import ServerStartError

__all__ = ["LocalPostgres", "postgres_bin_dir", "PostgresUnavailable", "free_port"]

STARTUP_TIMEOUT = 60.0


class PostgresUnavailable(ServerStartError):
    """The PostgreSQL server binaries are missing, or the server did not start."""


def postgres_bin_dir() -> Path:
    """The folder of ``initdb``, ``postgres`` and ``pg_ctl``, newest version first.

    Raises:
        PostgresUnavailable: None is installed.
    """
    for candidate in sorted(Path("/usr/lib/postgresql").glob("*/bin"), key=lambda p: int(p.parent.name), reverse=True):
        if (candidate / "initdb").exists():
            return candidate
    found = shutil.which("initdb")
    if found:
        return Path(found).parent
    raise PostgresUnavailable(
        "PostgreSQL server binaries (initdb, postgres, pg_ctl) are not installed. On Debian/Ubuntu: "
        "apt-get install -y postgresql-15 (or postgresql). Or pass --flux-db sqlite for one worker."
    )


def free_port() -> int:
    """A free TCP port on 127.0.0.1 (for PostgreSQL, the Flux server, ...), below the kernel's
    ephemeral range: between the pick and the server's bind, no outgoing connection can be
    given it (a fleet's Flux server, which connects to PostgreSQL before it binds, once failed
    with "address already in use")."""
    try:
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        low = 32768  # Linux's default; elsewhere the range starts higher
    for _ in range(100):
        with contextlib.suppress(ServerStartError):
            return probe_port("127.0.0.1", random.randrange(max(1024, low - 12000), max(1025, low)))
    return probe_port("127.0.0.1", 0)


class LocalPostgres:
    """A PostgreSQL server in a temporary directory on a free loopback port.

    Its superuser and its database are both ``flux`` (trust authentication, loopback only).
    """

    def __init__(self) -> None:
        self.bin = postgres_bin_dir()
        self.database = self.user = "flux"
        self.root = Path(tempfile.mkdtemp(prefix="flux-postgres-"))
        self.data = self.root / "data"
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self._as_postgres = os.geteuid() == 0

    @property
    def url(self) -> str:
        """SQLAlchemy URL for Flux (``FLUX_DATABASE_URL``)."""
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{self.database}"

    @property
    def pid(self) -> int | None:
        """Process id of the started server command (its process group id too)."""
        return self.proc.pid if self.proc else None

    def _argv(self, tool: str, *args: str) -> list[str]:
        argv = [str(self.bin / tool), *args]
        if not self._as_postgres:
            return argv
        # root's PATH on Debian has /usr/sbin; a minimal one (env -i, cron) may not
        runuser = shutil.which("runuser", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"]))
        if runuser is None:
            raise PostgresUnavailable("runuser not found (util-linux): as root, PostgreSQL must run as the postgres user")
        return [runuser, "-u", "postgres", "--", *argv]

    def _run(self, tool: str, *args: str) -> None:
        done = subprocess.run(self._argv(tool, *args), capture_output=True, text=True, check=False, timeout=STARTUP_TIMEOUT)
        if done.returncode != 0:
            raise PostgresUnavailable(f"{tool} failed ({done.returncode}): {done.stderr.strip() or done.stdout.strip()}")

    def start(self) -> Self:
        """initdb, start the server, wait until it answers, create the database.

        Raises:
            PostgresUnavailable: A step failed (with PostgreSQL's own words).
        """
        if self._as_postgres:
            entry = pwd.getpwnam("postgres")
            os.chown(self.root, entry.pw_uid, entry.pw_gid)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.user, "-E", "UTF8", "--no-instructions")
        self.port = free_port()
        log = (self.root / "postgres.log").open("ab")
        self.proc = subprocess.Popen(
            self._argv(
                "postgres", "-D", str(self.data), "-p", str(self.port), "-k", str(self.root), "-h", "127.0.0.1",
                "-c", "max_connections=200", "-c", "fsync=off",
            ),
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        log.close()
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if self.proc.poll() is not None:
                raise PostgresUnavailable(f"postgres exited with {self.proc.returncode}:\n{self.log_tail()}")
            ready = subprocess.run(
                [str(self.bin / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user],
                capture_output=True, check=False,
            )  # fmt: skip
            if ready.returncode == 0:
                break
            if time.monotonic() > deadline:
                raise PostgresUnavailable(f"postgres did not accept connections in {STARTUP_TIMEOUT:.0f} s:\n{self.log_tail()}")
            time.sleep(0.2)
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", self.user, self.database)
        return self

    def log_tail(self, lines: int = 20) -> str:
        """The last lines of the server's log."""
        log = self.root / "postgres.log"
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:]) if log.exists() else ""

    def stop(self) -> None:
        """Fast shutdown (SIGINT to the server), SIGKILL of its process group after 15 s; remove the folder."""
        if self.proc is not None:
            terminate(self.proc, 15, signal.SIGINT)  # SIGINT: postgres's fast shutdown
        shutil.rmtree(self.root, ignore_errors=True)

