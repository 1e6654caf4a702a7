"""Flux's local state folder and log level, set up by flux-chroma's entry points only.

**Where the state lives.** Flux keeps executions in ``database_url``; ``FLUX_HOME`` alone does
not move it. :func:`flux_home` resolves one home folder (``--flux-home``, else ``FLUX_HOME``,
else ``./.flux``) and points both ``home`` and ``database_url`` at it for the duration of a
``with`` block (the CLI, the demo and the quality evaluation use it).

Importing :mod:`flux_chroma` changes nothing in the process: no import hooks, no global
listeners, no logging set-up. Flux runs flux-chroma inside its workers' child processes,
where ``flux.config`` is a read-only snapshot that holds only a few settings; anything
done at import time runs there too (an import-time read of a setting outside that
snapshot crash-looped every job of a fleet).

**``./.flux``.** Flux keeps inline executions in ``database_url``, by default
``sqlite:///.flux/flux.db`` relative to the current directory, and does not create that
folder (``sqlite3.OperationalError: unable to open database file``). flux-chroma's own
entry points (the ``flux-chroma`` commands, :func:`~flux_chroma.ingest.run_ingest` and the
other inline job runners, the demo) call :func:`ensure_flux_db_folder` before Flux opens
its database. A script of your own that calls ``workflow.run()`` needs the folder to exist
(``mkdir -p .flux``), as with any Flux workflow.

**Flux's log lines.** Flux logs at ``INFO`` on stdout. The ``flux-chroma`` commands lower
Flux's logger to ``WARNING`` and move it to stderr (so ``--json`` output stays clean),
unless ``FLUX_LOG_LEVEL`` asks for a level; library code never touches logging.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flux_chroma.errors import ConfigurationError

__all__ = [
    "DEFAULT_FLUX_HOME",
    "ensure_flux_db_folder",
    "flux_home",
    "flux_sqlite_path",
    "quiet_flux_logs",
    "resolve_flux_home",
]

DEFAULT_FLUX_HOME = ".flux"
"""Flux's own default home, relative to the current directory."""


def quiet_flux_logs() -> None:
    """Default Flux's log level to WARNING and send its log lines to stderr (CLI only).

    ``FLUX_LOG_LEVEL`` wins when set. Called by the ``flux-chroma`` commands, never at import.
    """
    asked = os.environ.get("FLUX_LOG_LEVEL", "").strip().upper()
    level = asked if asked in logging.getLevelNamesMapping() else "WARNING"
    logger = logging.getLogger("flux")
    logger.setLevel(level)
    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


def flux_sqlite_path() -> Path | None:
    """The absolute path of Flux's SQLite database file, or None.

    Returns:
        The file Flux's current configuration (``database_url``) points at; None when Flux
        does not use a SQLite file (PostgreSQL, in memory) or when the process runs inside a
        Flux worker's child, whose configuration snapshot has no database URL.
    """
    from flux.config import Configuration

    try:
        url = str(Configuration.get().settings.database_url)
    except (AttributeError, RuntimeError):  # a runner child's settings snapshot
        return None
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    database = url[len(prefix) :].split("?", 1)[0]
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database).expanduser().resolve()


def ensure_flux_db_folder() -> Path | None:
    """Create the folder of Flux's SQLite database when it is missing.

    Returns:
        The database file, or None when Flux does not keep its state in a SQLite file.

    Raises:
        ConfigurationError: The folder cannot be created (names it and the fix).
    """
    target = flux_sqlite_path()
    if target is None or target.parent.is_dir():
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"Flux keeps its state in {target} but its folder {target.parent} cannot be created "
            f"({type(exc).__name__}: {exc}). Run from a writable folder, or set FLUX_HOME and "
            "FLUX_DATABASE_URL (sqlite:////absolute/path/flux.db) to a writable place."
        ) from None
    return target


def resolve_flux_home(option: str | os.PathLike[str] | None) -> Path | None:
    """Decide which folder holds Flux's state.

    Args:
        option: An explicit folder (``--flux-home``), or None.

    Returns:
        The absolute folder to use; None when ``FLUX_DATABASE_URL`` is set and no folder was
        given (Flux then reads its own environment unchanged).
    """
    if option is not None:
        return Path(option).expanduser().resolve()
    if os.environ.get("FLUX_DATABASE_URL"):
        return None
    return Path(os.environ.get("FLUX_HOME") or DEFAULT_FLUX_HOME).expanduser().resolve()


@contextmanager
def flux_home(option: str | os.PathLike[str] | None = None) -> Iterator[Path | None]:
    """Run the block with Flux's home and SQLite database in one folder.

    Args:
        option: The folder; None means ``FLUX_HOME`` or ``./.flux`` (or, when
            ``FLUX_DATABASE_URL`` is set, whatever Flux's environment says).

    Yields:
        The folder in use, or None when Flux's environment decides.
    """
    from flux.config import Configuration

    home = resolve_flux_home(option)
    if home is None:
        ensure_flux_db_folder()
        yield None
        return
    config = Configuration.get()
    config.override(home=str(home), database_url=f"sqlite:///{home / 'flux.db'}")
    try:
        ensure_flux_db_folder()
        yield home
    finally:
        config.reset()
