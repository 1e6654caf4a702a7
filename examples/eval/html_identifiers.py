r"""Identifiers in real HTML manuals, asked for by name: a check of HTML conversion for search.

Markdown converters escape underscores (``XML_GetBuffer`` -> ``XML\_GetBuffer``); stored that
way, an identifier cannot be found word for word by full-text search. This script copies the
HTML manuals of four Debian packages (libxslt1-dev, libffi8, libtasn1-doc, libexpat1-dev) to
``OUT/corpus`` and writes ``OUT/labels.jsonl``: for each page, up to 5 identifiers that
markdownify's default escaping changes and that at most 3 pages name, each asked as
``"What is NAME?"``; its relevant documents are the pages naming it. It also prints how many
HTML pages under /usr/share/doc and /usr/share/gtk-doc hold such identifiers.

    python examples/eval/html_identifiers.py html-ids
    flux-chroma ingest html-ids/corpus -c htmlids --source-id html --tenant quality-demo
    flux-chroma eval html-ids/labels.jsonl -c htmlids --tenant quality-demo
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import sys
from pathlib import Path

from markdownify import markdownify

MANUALS = {
    "libxslt": "/usr/share/doc/libxslt1-dev/gtk-doc/html",
    "libffi": "/usr/share/doc/libffi8/html",
    "libtasn1": "/usr/share/gtk-doc/html/libtasn1",
    "expat": "/usr/share/doc/libexpat1-dev/expat.html",
}
_ESCAPED = re.compile(r"\b[A-Za-z]\w*(?:\\_\w+)+")


def _markdown(html: bytes) -> str:
    return markdownify(html.decode("utf-8", "replace"))  # default options: underscores escaped


def escaped_identifiers(html: bytes) -> set[str]:
    """Identifiers (8+ characters) that markdownify's default escaping writes with ``\\_``."""
    names = {name.replace("\\_", "_") for name in _ESCAPED.findall(_markdown(html))}
    return {name for name in names if len(name) >= 8}


def main(out: Path) -> None:
    pages = sorted(p for p in Path("/usr/share/doc").rglob("*.html")) + sorted(Path("/usr/share/gtk-doc").rglob("*.html"))
    holding = sum(bool(escaped_identifiers(p.read_bytes())) for p in pages if p.is_file())
    print(f"{holding} of {len(pages)} HTML pages under /usr/share/doc and /usr/share/gtk-doc hold escaped identifiers")
    corpus = out / "corpus"
    shutil.rmtree(corpus, ignore_errors=True)
    for name, folder in MANUALS.items():
        shutil.copytree(folder, corpus / name)  # real files: a symlinked folder is not entered
    files = sorted(corpus.rglob("*.html"))
    text = {f.relative_to(corpus).as_posix(): _markdown(f.read_bytes()).replace("\\_", "_") for f in files}
    labels = []
    for f in files:
        names = [n for n in escaped_identifiers(f.read_bytes()) if sum(n in t for t in text.values()) <= 3]
        for n in sorted(names, key=lambda n: hashlib.sha256(n.encode()).hexdigest())[:5]:
            labels.append({"question": f"What is {n}?", "relevant_documents": [f"html/{k}" for k, t in text.items() if n in t]})
    (out / "labels.jsonl").write_text("".join(json.dumps(q) + "\n" for q in labels), encoding="utf-8")
    print(f"{len(labels)} questions over {len(files)} pages in {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
