"""The ``flux-chroma`` command (:mod:`~flux_chroma.cli.app`); shared options, exit codes and
error wording are in :mod:`~flux_chroma.cli.support`."""

from flux_chroma.cli.app import app, main

__all__ = ["app", "main"]
