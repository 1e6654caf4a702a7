"""The ``flux-chroma`` command: server, ingest, query, collections, doctor, demo.

Modules: :mod:`~flux_chroma.cli.app` (the typer commands), :mod:`~flux_chroma.cli.support`
(shared options, exit codes, error printing in the command line's words),
:mod:`~flux_chroma.cli.workflows` (the small workflows the commands run),
:mod:`~flux_chroma.cli.ingest` (progress display), :mod:`~flux_chroma.cli.render` (tables),
:mod:`~flux_chroma.cli.doctor` and :mod:`~flux_chroma.cli.host_checks` (``doctor``'s checks).
Where Flux keeps its state is :mod:`flux_chroma.flux_state`.
"""

from flux_chroma.cli.app import app, main

__all__ = ["app", "main"]
