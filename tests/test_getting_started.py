"""docs/getting-started.md, step 3 and the first lines of step 4, verbatim in an empty folder.

Against a fresh data directory, as the page says: its own Chroma server on a free loopback
port. The page's `export FLUX_CHROMA_URL=http://127.0.0.1:8000` line is the one line changed
(to that port); `kb.py` and every other command are cut out of the page.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from user_shell import code_blocks, run_user, section, user_env

from flux_chroma import ChromaServer

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "getting-started.md").read_text()
HANG_GUARD = 300  # seconds; only stops a broken test from hanging
FLUX_LOG_LINE = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,?\d* - [\w.]+ - [A-Z]+ - ")  # the page: Flux logs INFO lines


def _section(number: int) -> str:
    return section(PAGE, f"{number}. ")


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[str]:
    server = ChromaServer(tmp_path / "chroma-data", port=0)
    server.start()
    try:
        yield server.url
    finally:
        server.stop()


def _bash(cwd: Path, script: str, url: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_user(cwd, script, user_env() if url is None else user_env(FLUX_CHROMA_URL=url), HANG_GUARD)


def test_the_own_workflow_step_and_the_first_commands_run_verbatim(fresh_server: str, tmp_path: Path) -> None:
    work = tmp_path / "kb"
    work.mkdir()
    (kb,) = code_blocks(_section(3), "python")
    (work / "kb.py").write_text(kb)
    server_line, commands = code_blocks(_section(3), "bash")
    assert server_line.strip() == "flux-chroma server --path ./chroma-data --port 8000"
    export = "export FLUX_CHROMA_URL=http://127.0.0.1:8000"
    assert export in commands
    done = _bash(work, commands.replace(export, f"export FLUX_CHROMA_URL={fresh_server}"))
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]

    promised = re.search(r"The first run prints `([^`]+)`, the second `([^`]+)`", _section(3))
    distances = re.findall(r"`(\w+ \d\.\d{4})`", _section(3))
    assert promised is not None and len(distances) == 2, "the page says what kb.py prints"
    first, second = promised.groups()
    printed = [line for line in done.stdout.splitlines() if not FLUX_LOG_LINE.match(line)]
    assert printed == [first, *distances, second, *distances], done.stdout

    collections, ask = code_blocks(_section(4), "bash")[0].strip().splitlines()[:2]
    listed = _bash(work, collections, fresh_server)
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert re.search(r"handbook\s.*\s2\s.*default", listed.stdout), listed.stdout
    answered = _bash(work, ask, fresh_server)
    assert answered.returncode == 0, answered.stderr[-2000:]
    ranked = re.findall(r"^\s*\d+\. (\d\.\d{4})\s+(\w+)$", answered.stdout, flags=re.MULTILINE)
    assert [f"{name} {distance}" for distance, name in ranked] == distances
