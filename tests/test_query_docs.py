"""docs/retrieval.md's example runs verbatim and prints what the page says it prints."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from test_readme_snippet import run_python
from user_shell import code_blocks

ROOT = Path(__file__).resolve().parent.parent


def test_retrieval_page_example_runs_and_prints_the_documented_output(url: str, tmp_path: Path) -> None:
    page = (ROOT / "docs" / "retrieval.md").read_text()
    blocks = code_blocks(page, "python")
    assert len(blocks) == 1
    printed = re.search(r"It prints `(\{.*?\})`", page)
    assert printed is not None, "the page says what the example prints"
    (tmp_path / ".flux").mkdir()
    (tmp_path / "hybrid_demo.py").write_text(blocks[0])
    done = run_python(tmp_path, "hybrid_demo.py", env={"FLUX_CHROMA_URL": url})
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert ast.literal_eval(last) == ast.literal_eval(printed.group(1)), done.stdout
