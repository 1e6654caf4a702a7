"""Flux's local state folder and log level, set up by flux-chroma's entry points only.

Flux keeps executions in ``database_url`` (``FLUX_HOME`` alone does not move it), by default
``sqlite:///.flux/flux.db``, and does not create that folder. :func:`flux_home` points both at
one folder for a ``with`` block; the entry points call :func:`ensure_flux_db_folder`.

Nothing here runs at import: Flux runs flux-chroma in worker child processes whose
``flux.config`` is a read-only snapshot of a few settings (an import-time read of another
setting crash-looped every job of a fleet).
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
    "ensure_flux_db_folder",
    "flux_home",
    "quiet_flux_logs",
    "resolve_flux_home",
]

DEFAULT_FLUX_HOME = ".flux"
"""Flux's own default home, relative to the current directory."""


def quiet_flux_logs() -> None:
    """Default Flux's log level to WARNING and send its lines to stderr (``FLUX_LOG_LEVEL`` wins).

    Called by entry points only (keeping ``--json`` output clean), never by library code.
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

    None for PostgreSQL, in memory, or in a worker child (its snapshot has no database URL).
    """
    from flux.config import Configuration

    try:
        url = str(Configuration.get().settings.database_url)
    except (AttributeError, RuntimeError):  # a runner child's settings snapshot
        return None
    if not url.startswith("sqlite:///"):
        return None
    database = url.removeprefix("sqlite:///").split("?", 1)[0]
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database).expanduser().resolve()


def ensure_flux_db_folder() -> Path | None:
    """Create the folder of Flux's SQLite database if missing; return the file (or None).

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

    Returns:
        ``option`` (``--flux-home``), else ``FLUX_HOME``, else ``./.flux``, made absolute;
        None when ``FLUX_DATABASE_URL`` is set and no option given.
    """
    if option is not None:
        return Path(option).expanduser().resolve()
    if os.environ.get("FLUX_DATABASE_URL"):
        return None
    return Path(os.environ.get("FLUX_HOME") or DEFAULT_FLUX_HOME).expanduser().resolve()


@contextmanager
def flux_home(option: str | os.PathLike[str] | None = None) -> Iterator[Path | None]:
    """Run the block with Flux's home and SQLite database in :func:`resolve_flux_home`'s folder.

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
