"""The question scripts of ``examples/eval`` ask back each title that one page has, as their
docstrings say, and the questions load as labelled sets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from flux_chroma import load_labels

EVAL = Path(__file__).resolve().parent.parent / "examples" / "eval"
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
    asked = _asked("heading_questions.py", book, "book")
    assert asked == {"Storing Keys with Values": ["book/ch01/keys.html"], "Reading a File Back": ["book/two.html"]}


def test_example_titles_found_on_one_page_become_how_do_i_questions(tmp_path: Path) -> None:
    aws = tmp_path / "aws"
    (aws / "ec2").mkdir(parents=True)
    (aws / "ec2" / "describe-instances.rst").write_text(
        "**Example 1: To describe an instance**\n\nThe following example ... ::\n\n    aws ec2 describe-instances\n\n"
        "**Example 2: To list tags.**\n\nText.\n"
    )
    (aws / "ec2" / "describe-tags.rst").write_text("**To list tags**\n\nText with **bold** words.\n")
    asked = _asked("example_title_questions.py", aws, "aws")
    assert asked == {"how do I describe an instance": ["aws/ec2/describe-instances.rst"]}


def _asked(script: str, folder: Path, source: str) -> dict[str, list[str]]:
    out = folder.parent / "questions.jsonl"
    command = [sys.executable, str(EVAL / script), str(folder), source, str(out)]
    done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=120)
    assert done.returncode == 0, done.stderr
    return {q["question"]: q["relevant_documents"] for q in load_labels(out)}
