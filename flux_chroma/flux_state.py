"""Flux's local state and log level, for every entry point that imports flux-chroma.

**The rule for ``./.flux``.** Flux keeps inline executions in ``database_url``, by default
``sqlite:///.flux/flux.db`` relative to the current directory, and does not create that
folder (``sqlite3.OperationalError: unable to open database file``). Once ``flux_chroma``
is imported, the folder of Flux's SQLite database is created the moment Flux first opens it:
a plain ``workflow.run``, :func:`~flux_chroma.ingest.run_ingest`, the ``flux-chroma``
commands and the examples all follow this one rule. Nothing is created at import time (so
``flux-chroma --help`` leaves no folder behind), and no other SQLite database is touched.
When the folder cannot be created, a :class:`~flux_chroma.errors.ConfigurationError` names
it and says what to set instead.

**Flux's log lines.** Flux logs at ``INFO`` on stdout by default (``Database schema
migrated: ...`` on the first run in a folder). Importing ``flux_chroma`` lowers Flux's
logger to ``WARNING`` unless a level was asked for (``FLUX_LOG_LEVEL`` or Flux's own
configuration). A Flux worker reconfigures its logging when it starts and keeps its level.
"""

from __future__ import annotations

import importlib.abc
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

from flux_chroma.errors import ConfigurationError

__all__ = ["install", "quiet_flux_logs", "flux_sqlite_path", "ensure_flux_db_folder"]

_FLUX_MODELS = "flux.models"  # the Flux module that creates database engines
_installed = False


def quiet_flux_logs() -> None:
    """Default Flux's log level to WARNING and send its log lines to stderr, not stdout.

    A level set through ``FLUX_LOG_LEVEL`` or Flux's configuration wins. Flux logs to stdout,
    which would also corrupt ``--json`` output of the commands.
    """
    from flux.config import Configuration

    settings = Configuration.get().settings
    asked = os.environ.get("FLUX_LOG_LEVEL") or ("log_level" in settings.model_fields_set and settings.log_level)
    level = str(asked or "WARNING").upper()
    logger = logging.getLogger("flux")
    logger.setLevel(level if level in logging.getLevelNamesMapping() else "WARNING")
    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is sys.stdout:
            handler.setStream(sys.stderr)


def flux_sqlite_path() -> Path | None:
    """The absolute path of Flux's SQLite database file, or None (not SQLite, or in memory).

    Returns:
        The path Flux's current configuration (``database_url``) points at.
    """
    from flux.config import Configuration

    url = str(Configuration.get().settings.database_url)
    prefix = "sqlite:///"
    if not url.startswith(prefix):
        return None
    database = url[len(prefix) :].split("?", 1)[0]
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database).expanduser().resolve()


def ensure_flux_db_folder(database: str | os.PathLike[str]) -> None:
    """Create the folder of ``database`` when it is Flux's SQLite database and is missing.

    Args:
        database: The SQLite file SQLAlchemy is about to open.

    Raises:
        ConfigurationError: The folder cannot be created (names it and the fix).
    """
    target = flux_sqlite_path()
    if target is None or Path(database).expanduser().resolve() != target or target.parent.is_dir():
        return
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigurationError(
            f"Flux keeps its state in {target} but its folder {target.parent} cannot be created "
            f"({type(exc).__name__}: {exc}). Run from a writable folder, or set FLUX_HOME and "
            "FLUX_DATABASE_URL (sqlite:////absolute/path/flux.db) to a writable place."
        ) from None


def _on_connect(dialect: Any, _record: Any, cargs: Sequence[Any], cparams: dict[str, Any]) -> None:
    if dialect.name != "sqlite":
        return
    database = cargs[0] if cargs else cparams.get("database")
    if isinstance(database, str) and database and database != ":memory:":
        ensure_flux_db_folder(database)


def _listen() -> None:
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    if not event.contains(Engine, "do_connect", _on_connect):
        event.listen(Engine, "do_connect", _on_connect)


class _BeforeFluxModels(importlib.abc.MetaPathFinder):
    """Registers the listener just before Flux first imports its database layer (one shot)."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> None:
        if fullname == _FLUX_MODELS:
            if self in sys.meta_path:
                sys.meta_path.remove(self)
            _listen()


def install() -> None:
    """Apply the ``./.flux`` rule and quiet Flux's INFO lines (idempotent; no I/O).

    SQLAlchemy is not imported here: the listener is registered when Flux imports its
    database layer, which only happens once a workflow runs.
    """
    global _installed
    quiet_flux_logs()
    if _installed:
        return
    _installed = True
    if _FLUX_MODELS in sys.modules:
        _listen()
    else:
        sys.meta_path.insert(0, _BeforeFluxModels())
