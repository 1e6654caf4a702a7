"""Where inline Flux runs keep their state (used by the CLI, the demo and the examples).

Flux keeps executions in ``database_url``, which defaults to ``sqlite:///.flux/flux.db``
relative to the current directory; ``FLUX_HOME`` alone does not move it. :func:`flux_home`
resolves one home folder and points both ``home`` and ``database_url`` at it, for the
duration of a ``with`` block, and creates Flux's SQLite folder when it is missing
(:mod:`flux_chroma.flux_state`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from flux_chroma.flux_state import ensure_flux_db_folder, quiet_flux_logs

__all__ = ["DEFAULT_FLUX_HOME", "flux_home", "quiet_flux_logs", "resolve_flux_home"]

DEFAULT_FLUX_HOME = ".flux"
"""Flux's own default home, relative to the current directory."""


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
