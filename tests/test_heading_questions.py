"""``examples/eval/heading_questions.py`` asks back each section title that one page has, as
its docstring says, and the questions load as a labelled set."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from flux_chroma import load_labels

SCRIPT = Path(__file__).resolve().parent.parent / "examples" / "eval" / "heading_questions.py"
PAGE = '<html><body><nav><h2>Table of Contents Here</h2></nav><main>{}</main></body></html>'


def _heading(title: str) -> str:
    anchor = title.lower().replace(" ", "-")
    return f'<h2 id="{anchor}"><a class="header" href="#{anchor}">{title}</a></h2><p>Text.</p>'


def test_titles_found_on_one_page_become_questions(tmp_path: Path) -> None:
    book = tmp_path / "book"
    (book / "ch01").mkdir(parents=True)
    (book / "ch01" / "keys.html").write_text(PAGE.format(_heading("Storing Keys with Values") + _heading("Summary of Chapter")))
    (book / "two.html").write_text(PAGE.format(_heading("Summary of Chapter") + _heading("Short title") + "<h3>Reading  a\nFile Back</h3>"))
    (book / "print.html").write_text(PAGE.format(_heading("Storing Keys with Values")))  # the whole book again: not read
    out = tmp_path / "headings.jsonl"
    done = subprocess.run([sys.executable, str(SCRIPT), str(book), "book", str(out)], capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    asked = {q["question"]: q["relevant_documents"] for q in load_labels(out)}
    assert asked == {"Storing Keys with Values": ["book/ch01/keys.html"], "Reading a File Back": ["book/two.html"]}
