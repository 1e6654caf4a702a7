"""Run ``flux-chroma`` in this process (helper for the CLI tests).

For tests of what the command prints, writes and exits with, where no process boundary is under
test: the real Typer app runs through Click's test runner, against the same real servers, with
the test's environment and working folder, and returns what ``subprocess.run`` would, without a
fresh interpreter importing chromadb and Flux (about 1-2 s of CPU per call). Signals, terminals,
``flux-chroma server`` and exit paths of a real process stay in subprocess tests.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import traceback
from pathlib import Path

from typer.testing import CliRunner


def run_cli(
    *args: str, env: dict[str, str | None] | None = None, cwd: str | os.PathLike[str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``flux-chroma ARGS`` in-process: the exit code, stdout and stderr, as a subprocess gives them.

    Args:
        *args: The command line after ``flux-chroma``.
        env: Variables set for the call only (a ``None`` value unsets one).
        cwd: The working folder of the call (default: the test's).

    An exception that escapes the command (a bug: the command maps every failure to an exit code)
    is appended to stderr as a traceback, as Python would print it.
    """
    from flux_chroma.cli.app import app
    from flux_chroma.flux_state import quiet_flux_logs

    quiet_flux_logs()  # what `main()` does before the app runs
    folder = contextlib.chdir(Path(cwd)) if cwd is not None else contextlib.nullcontext()
    with folder:
        result = CliRunner().invoke(app, list(args), env=env, prog_name="flux-chroma")
    stderr = result.stderr
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        stderr += "".join(traceback.format_exception(result.exception))
    return subprocess.CompletedProcess(
        ["flux-chroma", *args], result.exit_code, result.stdout, stderr
    )
