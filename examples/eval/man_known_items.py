"""Known-item questions over the man pages of this machine (/usr/share/man/man1).

Copies PAGES pages (default 500: the first in SHA-256 order of their names; links and pages
that only include another left out) to ``OUT/corpus`` and writes ``OUT/labels.jsonl``:
passages chosen as ``make_known_items.py`` chooses them from each page as ``man`` itself
shows it (``man -l``, one line per paragraph), asked back word for word; relevant: every page
whose text holds the passage. A person pastes what ``man`` printed.

    python examples/eval/man_known_items.py man-items
    flux-chroma ingest man-items/corpus -c manitems --source-id man --tenant quality-demo
    flux-chroma eval man-items/labels.jsonl -c manitems --tenant quality-demo
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from make_known_items import _normal, asked_back

MAN1 = Path("/usr/share/man/man1")


def shown(page: Path) -> str:
    """The page as ``man -l`` prints it to a pipe in a UTF-8 locale, 2,000 columns wide."""
    env = {"PATH": "/usr/bin:/bin", "MANWIDTH": "2000", "LC_ALL": "C.UTF-8"}
    done = subprocess.run(["man", "-l", "-P", "cat", str(page)], env=env, capture_output=True, text=True, timeout=60, check=True)
    return done.stdout


def main(out: Path, count: int) -> None:
    corpus, pages = out / "corpus", out / "pages"
    shutil.rmtree(out, ignore_errors=True)
    corpus.mkdir(parents=True)
    pages.mkdir()
    chosen = [p for p in MAN1.glob("*.gz") if not p.is_symlink() and not gzip.decompress(p.read_bytes()).startswith(b".so ")]
    chosen = sorted(chosen, key=lambda p: hashlib.sha256(p.name.encode()).hexdigest())[:count]
    texts = {}
    for page in chosen:
        shutil.copy(page, corpus / page.name)
        text = shown(page)
        texts[f"man/{page.name}"] = _normal(text)
        (pages / f"{page.name}.txt").write_text(text, encoding="utf-8")
    asked = asked_back(pages, "pages", texts, out / "labels.jsonl")
    print(f"{asked} questions from {len(texts)} man pages in {out}")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        sys.exit("usage: man_known_items.py OUT [PAGES]")
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) == 3 else 500)
