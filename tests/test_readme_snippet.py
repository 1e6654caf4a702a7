"""A newcomer's first hour: the README's Python snippet runs verbatim in an empty folder.

The snippet is cut out of README.md (never copied here), saved as ``kb.py`` in an empty
temporary folder and run with this venv's python, as a user would: a plain environment
(no ``FLUX_HOME``, ``FLUX_DATABASE_URL`` or ``FLUX_LOG_LEVEL``), the server picked through
``FLUX_CHROMA_URL``, the README's commands run verbatim. Also here: importing flux_chroma
changes nothing in the process (no import hooks, listeners or logging set-up; Flux runs it in
its workers' child processes), and flux-chroma's own entry points create ``./.flux``.
"""

from __future__ import annotations

import ast
import socket
import subprocess
import sys
from pathlib import Path

from user_shell import SESSION_SETTINGS, code_blocks, run_user, section, user_env

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD = 300  # seconds; only stops a broken test from hanging


def readme_snippet() -> str:
    """The one ```python block of README.md's "## Quickstart" section."""
    readme = (ROOT / "README.md").read_text()
    blocks = code_blocks(section(readme, "Quickstart\n"), "python")
    assert len(blocks) == 1, "README's Quickstart section should hold exactly one python block"
    return str(blocks[0])


def run_python(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run this venv's python in ``cwd`` with a user's plain environment plus ``env``."""
    return run_user(cwd, [sys.executable, *args], user_env(keep=SESSION_SETTINGS, **(env or {})), HANG_GUARD)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def readme_commands() -> str:
    """The ```bash block right after "save this as kb.py" in README's Quickstart section."""
    readme = (ROOT / "README.md").read_text()
    blocks = code_blocks(section(readme, "Quickstart\n"), "bash")
    assert len(blocks) == 1, "README's Quickstart section should hold exactly one bash block"
    return str(blocks[0])


def run_readme_commands(cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the README's bash block verbatim in ``cwd`` with this venv first on PATH."""
    return run_user(cwd, readme_commands(), user_env(keep=SESSION_SETTINGS, **env), HANG_GUARD)


def test_readme_snippet_runs_verbatim_in_an_empty_folder(url: str, tmp_path: Path) -> None:
    (tmp_path / "kb.py").write_text(readme_snippet())
    done = run_readme_commands(tmp_path, {"FLUX_CHROMA_URL": url})
    assert done.returncode == 0, done.stdout + done.stderr
    printed = [line for line in done.stdout.splitlines() if line.startswith("[")]
    assert len(printed) == 1, done.stdout  # one hit list, printed once (the __main__ guard)
    hits = ast.literal_eval(printed[0])
    assert isinstance(hits, list) and hits[0]["id"] == "c1"
    assert hits[0]["document"] == "ChromaDB is an embedding database."
    assert (tmp_path / ".flux" / "flux.db").is_file()

    again = run_readme_commands(tmp_path, {"FLUX_CHROMA_URL": url, "FLUX_LOG_LEVEL": "WARNING"})
    assert again.returncode == 0 and again.stdout == printed[0] + "\n", again.stdout + again.stderr


def test_readme_snippet_with_the_server_down_exits_non_zero_readably(tmp_path: Path) -> None:
    (tmp_path / "kb.py").write_text(readme_snippet())
    (tmp_path / ".flux").mkdir()
    done = run_python(tmp_path, "kb.py", env={"FLUX_CHROMA_URL": closed_port_url(), "FLUX_LOG_LEVEL": "WARNING"})
    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.startswith("error: Chroma server at http://127.0.0.1:")
    assert "unreachable" in done.stderr and "Traceback" not in done.stderr


IMPORT_EFFECTS = """
import logging, sys
import flux.task, flux.workflow  # noqa: E401,F401  Flux's own import sets up its logger: not ours
before = (list(sys.meta_path), logging.getLogger("flux").level, logging.getLogger().handlers[:])
import flux_chroma, flux_chroma.cli, flux_chroma.ingest.workflow  # noqa: E401,F401
after = (list(sys.meta_path), logging.getLogger("flux").level, logging.getLogger().handlers[:])
assert before == after, (before, after)
assert "sqlalchemy" not in sys.modules  # so no SQLAlchemy listener either
print("clean")
"""


def test_importing_flux_chroma_changes_nothing_in_the_process(tmp_path: Path) -> None:
    done = run_python(tmp_path, "-c", IMPORT_EFFECTS)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "clean\n"
    assert list(tmp_path.iterdir()) == []  # and creates nothing


RUN_INGEST = """
from flux_chroma import run_ingest
run_ingest({"tenant": "acme", "collection": "handbook", "sources": [{"kind": "files", "path": "docs"}]})
"""


def test_a_state_folder_that_cannot_be_created_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("Refunds within 30 days.")
    (tmp_path / "a-file").write_text("not a folder")
    bad = tmp_path / "a-file" / "state"
    done = run_python(tmp_path, "-c", RUN_INGEST, env={"FLUX_DATABASE_URL": f"sqlite:///{bad}/flux.db"})
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("flux_chroma.errors.ConfigurationError: Flux keeps its state in")
    assert str(bad) in last and "FLUX_DATABASE_URL" in last


def test_run_ingest_creates_the_default_state_folder(url: str, tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.md").write_text("Refunds within 30 days.")
    done = run_python(tmp_path, "-c", RUN_INGEST, env={"FLUX_CHROMA_URL": url})
    assert done.returncode == 0, done.stderr
    assert (tmp_path / ".flux" / "flux.db").is_file()
