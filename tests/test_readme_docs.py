"""docs/retrieval-quality.md's second labelled set: the installed packages' READMEs.

The block's export runs verbatim, and the shipped labels are exactly what
`readme_questions.py` derives from that export (every question's README is here, and its
relevant documents are every README holding its evidence). The block's `ingest` and `eval`
lines are the shipped-set block's with other names; test_quality_docs.py runs those verbatim
with the real default model on Python's documentation topics, so they are not run twice.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from test_quality_docs import PAGE, ROOT, run
from user_shell import code_blocks

EVAL = ROOT / "examples" / "eval"


def _readme_block() -> list[str]:
    (block,) = [b for b in code_blocks(PAGE, "bash") if "readmes-natural.jsonl" in b]
    return block.strip().splitlines()


def _jsonl(path: Path) -> list[object]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_the_readme_export_runs_verbatim_and_its_labels_are_the_shipped_ones(url: str, tmp_path: Path) -> None:
    shutil.copytree(EVAL, tmp_path / "examples" / "eval")  # "from a checkout"
    done = run(tmp_path, ["bash", "-c", _readme_block()[0]], url)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "package READMEs" in done.stdout
    derive = [sys.executable, "examples/eval/readme_questions.py", "package-readmes", "readmes", "derived.jsonl"]
    checked = run(tmp_path, derive, url)
    assert checked.returncode == 0, checked.stdout + checked.stderr[-2000:]
    shipped, derived = (_jsonl(p) for p in (EVAL / "readmes-natural.jsonl", tmp_path / "derived.jsonl"))
    assert derived == shipped
    assert len(shipped) == 42  # the page's count


def test_the_readme_ingest_and_eval_lines_are_the_shipped_set_commands() -> None:
    (pydoc,) = [b for b in code_blocks(PAGE, "bash") if "pydoc-natural.jsonl" in b]
    renamed = [
        line.replace("pydoc-topics", "package-readmes")
        .replace("pydoc-natural", "readmes-natural")
        .replace("pydoc", "readmes")
        for line in pydoc.strip().splitlines()[1:]
    ]
    assert _readme_block()[1:] == renamed
