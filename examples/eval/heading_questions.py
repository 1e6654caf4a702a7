"""Section titles asked back: a check that HTML headings reach the stored chunks.

Reads every ``*.html`` page under FOLDER (``print.html``, which repeats a whole book, left
out) and writes OUT, one question per line: each h2 or h3 title of three or more words that
only one page has, asked as it is written, whose relevant document is that page
(``SOURCE/<relative path>``). Up to 200 titles, taken in SHA-256 order of their text, so the
same folder gives the same file. mdBook writes every heading as ``<h2><a class="header">``,
which flux-chroma once dropped as navigation; the Rust book rustup ships is such a folder:

    BOOK=~/.rustup/toolchains/stable-x86_64-unknown-linux-gnu/share/doc/rust/html/book
    python examples/eval/heading_questions.py $BOOK book /tmp/headings.jsonl
    flux-chroma ingest $BOOK -c rustbook --source-id book --exclude print.html --tenant quality-demo
    flux-chroma eval /tmp/headings.jsonl -c rustbook --tenant quality-demo

A set made of titles tests exactly whether titles are stored; it says little about questions
people ask in their own words.
"""

from __future__ import annotations

import hashlib
import json
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

from bs4 import BeautifulSoup

LIMIT = 200


def titles(page: Path) -> set[str]:
    """The h2 and h3 titles of three or more words in a page's ``<main>`` (else its body)."""
    soup = BeautifulSoup(page.read_bytes(), "html.parser")
    main = soup.find("main") or soup.body or soup
    found = (h.get_text(" ", strip=True) for h in main.find_all(["h2", "h3"]))
    return {" ".join(t.split()) for t in found if len(t.split()) >= 3}


def main(folder: Path, source: str, out: Path) -> None:
    pages: defaultdict[str, set[str]] = defaultdict(set)
    for page in sorted(folder.rglob("*.html")):
        if page.name != "print.html":
            for title in titles(page):
                pages[title].add(page.relative_to(folder).as_posix())
    write_questions(pages, source, out, "heading", LIMIT)


def write_questions(pages: dict[str, set[str]], source: str, out: Path, kind: str, limit: int, ask: Callable[[str], str] = str) -> None:
    """Write to ``out`` the titles of ``pages`` (title -> pages holding it) that one page has,
    up to ``limit`` in SHA-256 order, each asked as ``ask(title)``."""
    unique = sorted((t for t, where in pages.items() if len(where) == 1), key=lambda t: hashlib.sha256(t.encode()).hexdigest())
    with out.open("w", encoding="utf-8") as f:
        for title in unique[:limit]:
            (page,) = pages[title]
            f.write(json.dumps({"question": ask(title), "relevant_documents": [f"{source}/{page}"], "kind": kind}) + "\n")
    print(f"{len(unique)} titles on one page only; {min(len(unique), limit)} questions written to {out}")


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: heading_questions.py FOLDER SOURCE OUT")
    main(Path(sys.argv[1]).expanduser(), sys.argv[2], Path(sys.argv[3]))
