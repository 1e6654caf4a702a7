"""The labelled set shipped in examples/eval/ is what its scripts generate from Python's own
documentation topics, and it is well-formed: at least 100 natural questions, every relevant
document a real topic, every known-item passage found word for word in its documents."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from flux_chroma import load_labels

EVAL = Path(__file__).resolve().parent.parent / "examples" / "eval"


def regenerate(tmp_path: Path) -> Path:
    topics = tmp_path / "topics"
    for script, args in (
        ("export_pydoc_topics.py", [str(topics)]),
        ("make_known_items.py", [str(topics), "pydoc", str(tmp_path / "known.jsonl")]),
        ("natural_questions.py", [str(topics), "pydoc", str(tmp_path / "natural.jsonl")]),
    ):
        done = subprocess.run([sys.executable, str(EVAL / script), *args], capture_output=True, text=True, check=False, timeout=120)
        assert done.returncode == 0, (script, done.stderr)
    return topics


def test_the_shipped_files_are_what_the_scripts_generate(tmp_path: Path) -> None:
    regenerate(tmp_path)
    hint = f"Python {sys.version.split()[0]}'s topics differ from the shipped set's: re-run the scripts (see examples/eval/*.py)"
    assert (tmp_path / "known.jsonl").read_bytes() == (EVAL / "pydoc-known-items.jsonl").read_bytes(), hint
    assert (tmp_path / "natural.jsonl").read_bytes() == (EVAL / "pydoc-natural.jsonl").read_bytes(), hint


def test_the_shipped_set_is_well_formed(tmp_path: Path) -> None:
    topics = regenerate(tmp_path)
    texts = {f"pydoc/{p.name}": " ".join(p.read_text().split()) for p in topics.glob("*.txt")}
    natural = load_labels(EVAL / "pydoc-natural.jsonl")
    known = load_labels(EVAL / "pydoc-known-items.jsonl")
    assert len(natural) >= 100 and len({q["question"] for q in natural}) == len(natural)
    assert len(known) >= 150
    for q in natural + known:
        assert set(q["relevant_documents"]) <= set(texts), q
    for q in known:
        assert all(q["question"] in texts[d] for d in q["relevant_documents"]), q
