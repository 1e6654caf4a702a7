"""The second labelled set (installed packages' READMEs) is what its scripts generate from this
environment, and well-formed: at least 30 distinct questions, each README it names exported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from flux_chroma import load_labels

EVAL = Path(__file__).resolve().parent.parent / "examples" / "eval"


def test_the_readme_set_is_what_the_scripts_generate_here(tmp_path: Path) -> None:
    folder, out = tmp_path / "readmes", tmp_path / "natural.jsonl"
    for script, args in (
        ("export_package_readmes.py", [str(folder)]),
        ("readme_questions.py", [str(folder), "readmes", str(out)]),
    ):
        done = subprocess.run([sys.executable, str(EVAL / script), *args], capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, (script, done.stdout, done.stderr)
    assert out.read_bytes() == (EVAL / "readmes-natural.jsonl").read_bytes(), "re-run examples/eval/readme_questions.py"
    labels = load_labels(EVAL / "readmes-natural.jsonl")
    assert len(labels) >= 30 and len({q["question"] for q in labels}) == len(labels)
    exported = {f"readmes/{p.name}" for p in folder.glob("*.md")}
    assert all(set(q["relevant_documents"]) <= exported for q in labels)
    assert "readmes/flux_chroma.md" not in exported  # never the project's own text
