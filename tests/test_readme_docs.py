"""docs/retrieval-quality.md's second labelled set runs verbatim: export the installed packages'
READMEs, ingest them, eval the 42 natural questions in both modes (the real default model; slow)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_quality_docs import ROOT, blocks, run


@pytest.mark.slow
def test_the_readme_set_runs_verbatim(url: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "examples" / "eval", tmp_path / "examples" / "eval")  # "from a checkout"
    (block,) = [b for b in blocks("bash") if "readmes-natural.jsonl" in b]
    for line in block.strip().splitlines():
        shell = run(tmp_path, ["bash", "-c", line], url)
        assert shell.returncode == 0, (line, shell.stderr[-2000:])
    assert "42 questions" in shell.stdout and "hybrid" in shell.stdout and "dense" in shell.stdout
    assert "name nothing" not in shell.stdout + shell.stderr  # every README a question names is here
