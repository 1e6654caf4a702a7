"""A newcomer's first hour: the README's Python snippet runs verbatim in an empty folder.

The snippet is cut out of README.md (never copied here), saved as ``kb.py`` in an empty
temporary folder and run with this venv's python, as a user would: a plain environment
(no ``FLUX_HOME``, ``FLUX_DATABASE_URL`` or ``FLUX_LOG_LEVEL``), the server picked through
``FLUX_CHROMA_URL``. Also here: the one rule for ``./.flux`` (created when Flux first opens
its database, by every entry point; a readable error when it cannot be) and Flux's own INFO
lines staying silent unless asked for.
"""

from __future__ import annotations

import ast
import os
import re
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HANG_GUARD = 300  # seconds; only stops a broken test from hanging
_USER_ENV_DROPPED = ("FLUX_HOME", "FLUX_DATABASE_URL", "FLUX_LOG_LEVEL", "FLUX_CHROMA_URL")


def readme_snippet() -> str:
    """The one ```python block of README.md's "## Quickstart" section."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Quickstart\n", 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 1, "README's Quickstart section should hold exactly one python block"
    return str(blocks[0])


def run_python(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run this venv's python in ``cwd`` with a user's plain environment plus ``env``."""
    base = {k: v for k, v in os.environ.items() if k not in _USER_ENV_DROPPED}
    return subprocess.run(
        [sys.executable, *args],
        cwd=cwd,
        env={**base, **(env or {})},
        capture_output=True,
        text=True,
        check=False,
        timeout=HANG_GUARD,
    )


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_readme_snippet_runs_verbatim_in_an_empty_folder(url: str, tmp_path: Path) -> None:
    (tmp_path / "kb.py").write_text(readme_snippet())
    done = run_python(tmp_path, "kb.py", env={"FLUX_CHROMA_URL": url})
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1, done.stdout  # one hit list, printed once (the __main__ guard)
    hits = ast.literal_eval(lines[0])
    assert isinstance(hits, list) and hits[0]["id"] == "c1"
    assert hits[0]["document"] == "ChromaDB is an embedding database."
    assert (tmp_path / ".flux" / "flux.db").is_file()  # the state folder was created for it
    assert " - INFO - " not in done.stdout + done.stderr  # Flux's own INFO lines stay quiet

    again = run_python(tmp_path, "kb.py", env={"FLUX_CHROMA_URL": url})
    assert again.returncode == 0 and again.stdout == done.stdout


def test_readme_snippet_with_the_server_down_exits_non_zero_readably(tmp_path: Path) -> None:
    (tmp_path / "kb.py").write_text(readme_snippet())
    done = run_python(tmp_path, "kb.py", env={"FLUX_CHROMA_URL": closed_port_url()})
    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.startswith("error: Chroma server at http://127.0.0.1:")
    assert "unreachable" in done.stderr and "Traceback" not in done.stderr


def test_flux_info_lines_come_back_when_asked_for(url: str, tmp_path: Path) -> None:
    (tmp_path / "kb.py").write_text(readme_snippet())
    done = run_python(tmp_path, "kb.py", env={"FLUX_CHROMA_URL": url, "FLUX_LOG_LEVEL": "INFO"})
    assert done.returncode == 0, done.stderr
    assert "flux.migrations.runner - INFO - Database schema migrated" in done.stdout + done.stderr


def test_importing_flux_chroma_creates_nothing(tmp_path: Path) -> None:
    done = run_python(tmp_path, "-c", "import flux_chroma, flux_chroma.cli")
    assert done.returncode == 0, done.stderr
    assert list(tmp_path.iterdir()) == []


PLAIN_WORKFLOW = """
from flux import ExecutionContext, workflow
import flux_chroma  # noqa: F401

@workflow
async def hello(ctx: ExecutionContext[str]):
    return f"hello {ctx.input}"

if __name__ == "__main__":
    print(hello.run("there").output)
"""


def test_plain_workflow_run_gets_its_state_folder(tmp_path: Path) -> None:
    (tmp_path / "wf.py").write_text(PLAIN_WORKFLOW)
    done = run_python(tmp_path, "wf.py")
    assert done.returncode == 0, done.stderr
    assert done.stdout == "hello there\n"
    assert (tmp_path / ".flux" / "flux.db").is_file()

    nested = tmp_path / "elsewhere" / "state"
    moved = run_python(tmp_path, "wf.py", env={"FLUX_DATABASE_URL": f"sqlite:///{nested}/flux.db"})
    assert moved.returncode == 0, moved.stderr
    assert (nested / "flux.db").is_file()


def test_a_state_folder_that_cannot_be_created_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "wf.py").write_text(PLAIN_WORKFLOW)
    (tmp_path / "a-file").write_text("not a folder")
    bad = tmp_path / "a-file" / "state"
    done = run_python(tmp_path, "wf.py", env={"FLUX_DATABASE_URL": f"sqlite:///{bad}/flux.db"})
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("flux_chroma.errors.ConfigurationError: Flux keeps its state in")
    assert str(bad) in last and "FLUX_DATABASE_URL" in last
