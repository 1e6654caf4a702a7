"""Example titles asked back: "how do I ..." questions from reStructuredText example pages.

The AWS CLI ships one page of examples per command, each example under a bold title such as
``**Example 1: To describe an instance**``. Reads every ``*.rst`` page under FOLDER and
writes OUT, one question per line: each "To ..." title that only one page has, asked as "how
do I <rest of the title, lower case>", whose relevant document is that page
(``SOURCE/<relative path>``). Up to 2,000 titles, taken in SHA-256 order of their text, so the
same folder gives the same file. Six services of an installed ``awscli`` package:

    EX=$(python -c 'import awscli, os; print(os.path.dirname(awscli.__file__))')/examples
    mkdir aws && cp -r $EX/{s3api,s3,ec2,iam,lambda,dynamodb} aws/
    python examples/eval/example_title_questions.py aws aws /tmp/titles.jsonl
    flux-chroma ingest aws -c aws --source-id aws --tenant quality-demo
    flux-chroma eval /tmp/titles.jsonl -c aws --tenant quality-demo

The titles are in the pages word for word, so this set tests finding a page among hundreds of
near neighbours (create, delete and describe pages of one service), not paraphrase.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

from heading_questions import write_questions

LIMIT = 2000
_TITLE = re.compile(r"^\*\*(?:Example \d+: )?To (.+?)\*\*\s*$", re.MULTILINE)


def titles(page: Path) -> set[str]:
    """The page's bold "To ..." titles, without "To", lower case, without a closing period."""
    return {m.group(1).strip().rstrip(".").lower() for m in _TITLE.finditer(page.read_text(encoding="utf-8"))}


def main(folder: Path, source: str, out: Path) -> None:
    pages: defaultdict[str, set[str]] = defaultdict(set)
    for page in sorted(folder.rglob("*.rst")):
        for title in titles(page):
            pages[title].add(page.relative_to(folder).as_posix())
    write_questions(pages, source, out, "title", LIMIT, lambda title: f"how do I {title}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: example_title_questions.py FOLDER SOURCE OUT")
    main(Path(sys.argv[1]).expanduser(), sys.argv[2], Path(sys.argv[3]))
