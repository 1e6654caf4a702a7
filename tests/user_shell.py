"""A user's shell, and the code blocks of a page, for tests that run documented code verbatim.

As in a fresh terminal after ``source .venv/bin/activate``: this virtualenv's ``bin`` first on
PATH and none of the test session's Flux or Chroma variables (tests/conftest.py sets
``FLUX_HOME``, ``FLUX_DATABASE_URL`` and ``FLUX_CHROMA_CACHE_DIR``), only those a test names:
settings the docs tell users to set.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path

HANG_GUARD = 900.0  # seconds; only stops a hung run

SESSION_SETTINGS = ("FLUX_CHROMA_CACHE_DIR", "FLUX_CHROMA_EMBED_THREADS")
"""Documented settings (docs/configuration.md) a test may pass on from the session: the
embedding cache stays in the session's temporary folder (not the user's home, where a second
run would find every text embedded), and under pytest-xdist each process embeds with its share
of the cores, as docs/deployment.md tells users who run N embedding processes."""


def section(page: str, heading: str) -> str:
    """The text of ``page``'s ``## heading`` section (the heading's start is enough: ``"3. "``),
    up to the next ``## `` heading."""
    return page.split(f"\n## {heading}", 1)[1].split("\n## ", 1)[0]


def code_blocks(text: str, language: str) -> list[str]:
    """The fenced ```` ```language ```` blocks of Markdown ``text``, in order, as a user copies them."""
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


def user_env(*, keep: Iterable[str] = (), **settings: str) -> dict[str, str]:
    """This process's environment as a user's shell has it, plus ``settings``.

    Args:
        keep: Names of the session's ``FLUX_*``/``CHROMA_*`` variables to pass on (e.g.
            :data:`SESSION_SETTINGS`); every other one is dropped.
        **settings: Variables the test sets, as the docs tell a user to.
    """
    kept = set(keep)
    env = {k: v for k, v in os.environ.items() if k in kept or not k.startswith(("FLUX_", "CHROMA_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **settings}


def run_user(
    cwd: Path, command: str | Sequence[str], env: dict[str, str], timeout: float = HANG_GUARD
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in ``cwd``: a bash script (run with ``-euo pipefail``) or an argv."""
    argv = ["bash", "-euo", "pipefail", "-c", command] if isinstance(command, str) else list(command)
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=timeout)
