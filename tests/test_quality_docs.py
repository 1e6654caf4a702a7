"""docs/retrieval-quality.md's examples run verbatim, in order, in an empty folder.

The first Python block and the first bash block use a three-file handbook; the shipped-set
walkthrough (export, ingest, eval) and the migration gate block run on Python's own
documentation topics with the real default model (slow: a few minutes on 2 cores).
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from user_shell import SESSION_SETTINGS, code_blocks, run_user, user_env

from flux_chroma import load_labels

ROOT = Path(__file__).resolve().parent.parent
PAGE = (ROOT / "docs" / "retrieval-quality.md").read_text()


def run(cwd: Path, args: list[str], url: str) -> subprocess.CompletedProcess[str]:
    """A user's shell with FLUX_CHROMA_URL set, as the page says (on 2 busy cores one ONNX thread
    per xdist worker embeds these corpora with about a fifth less CPU than two)."""
    return run_user(cwd, args, user_env(keep=SESSION_SETTINGS, FLUX_CHROMA_URL=url))


def python_block(cwd: Path, index: int, url: str) -> subprocess.CompletedProcess[str]:
    (cwd / f"block{index}.py").write_text(code_blocks(PAGE, "python")[index])
    return run(cwd, [sys.executable, f"block{index}.py"], url)


def test_the_label_example_is_a_valid_labelled_question() -> None:
    (example,) = code_blocks(PAGE, "json")
    assert load_labels([__import__("json").loads(example)])[0]["relevant_documents"] == ["hb/leave.md"]


def test_documents_eval_and_the_cli_run_verbatim(url: str, tmp_path: Path) -> None:
    done = python_block(tmp_path, 0, url)
    assert done.returncode == 0, done.stderr[-3000:]
    printed = re.search(r"It prints `(\[.*?\])`", PAGE)
    assert printed is not None, "the page says what the example prints"
    first, figures = done.stdout.strip().splitlines()[-2:]
    assert ast.literal_eval(first) == ast.literal_eval(printed.group(1))
    # Once: Flux re-imports the file to register the workflow; the __main__ guard keeps that
    # import from running the whole example again (and again, from inside that import).
    assert done.stdout.splitlines().count(first) == 1, done.stdout[-3000:]
    assert set(ast.literal_eval(figures)) == {"dense", "hybrid"}
    outputs = []
    for line in code_blocks(PAGE, "bash")[0].strip().splitlines():
        shell = run(tmp_path, ["bash", "-c", line], url)
        assert shell.returncode == 0, (line, shell.stderr[-2000:])
        outputs.append(shell.stdout)
    docs, show, evaluated = outputs
    assert "hb/leave.md" in docs and "3 documents, 3 chunks" in docs
    assert "Employees get 25 days of paid leave" in show
    assert "recall@5" in evaluated and "hybrid" in evaluated


@pytest.mark.slow
def test_the_shipped_set_and_the_migration_gate_run_verbatim(url: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "eval", tmp_path / "examples" / "eval")  # "from a checkout"
    for line in code_blocks(PAGE, "bash")[1].strip().splitlines():
        shell = run(tmp_path, ["bash", "-c", line], url)
        assert shell.returncode == 0, (line, shell.stderr[-2000:])
    assert "hybrid" in shell.stdout and "140 questions" in shell.stdout
    done = python_block(tmp_path, 1, url)
    assert done.returncode == 0, done.stderr[-3000:]
    message, recall = done.stdout.strip().splitlines()[-2:]
    assert message.startswith("migration quality gate: recall@10 on 140 labelled questions") and "NOT switched" in message
    assert float(recall) > 0.8  # the name still answers with the default model
