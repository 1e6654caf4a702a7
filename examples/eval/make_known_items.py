"""Generate known-item questions: sentences and phrases sampled from a folder of documents.

A known-item question is a passage of a document asked back word for word, as people paste
an error message or a line they remember. Sampling is deterministic (candidates are ordered
by a SHA-256 of their text, no random numbers), so the same folder gives the same file:

    python examples/eval/export_pydoc_topics.py /tmp/pydoc-topics
    python examples/eval/make_known_items.py /tmp/pydoc-topics pydoc /tmp/known.jsonl

Each line is ``{"question", "relevant_documents", "kind": "known-item"}``; the relevant
documents are every file (``<source id>/<relative path>``) whose text contains the passage.
"""

from __future__ import annotations

import hashlib
import json
import re
import sys
from pathlib import Path

SENTENCES_PER_DOC = 2
PHRASES_PER_DOC = 1
_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")
_PROSE = re.compile(r"^[A-Z][a-z]")


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _normal(text: str) -> str:
    return " ".join(text.split())


def candidates(text: str) -> list[str]:
    """Prose sentences of 8 to 40 words (no code, no tables), in a fixed pseudo-random order."""
    sentences = {_normal(s) for s in _SPLIT.split(_normal(text))}
    good = [
        s
        for s in sentences
        if 8 <= len(s.split()) <= 40 and _PROSE.match(s) and not re.search(r"[=*|>]{2}|\.\.\.|\+-", s)
    ]
    return sorted(good, key=_digest)


def known_items(folder: Path, source_id: str) -> list[dict[str, object]]:
    """The known-item questions of every ``*.txt`` file under ``folder``."""
    docs = {f"{source_id}/{p.relative_to(folder).as_posix()}": _normal(p.read_text(encoding="utf-8")) for p in sorted(folder.rglob("*.txt"))}
    out: list[dict[str, object]] = []
    seen: set[str] = set()
    for text in docs.values():
        chosen = [s for s in candidates(text) if s not in seen][: SENTENCES_PER_DOC + PHRASES_PER_DOC]
        for i, sentence in enumerate(chosen):
            seen.add(sentence)
            if i >= SENTENCES_PER_DOC:  # a phrase: 6 words from the middle of the sentence
                words = sentence.split()
                start = int(_digest(sentence), 16) % max(1, len(words) - 6)
                sentence = " ".join(words[start : start + 6]).strip(",;:")
            relevant = [d for d, t in docs.items() if sentence in t]
            out.append({"question": sentence, "relevant_documents": relevant, "kind": "known-item"})
    return out


def asked_back(folder: Path, source_id: str, texts: dict[str, str], out: Path) -> int:
    """Write to ``out`` the known items of ``folder``, each relevant to every document of
    ``texts`` (id -> normalised text) that holds it; return how many (a passage none holds is
    dropped)."""
    labels = []
    for item in known_items(folder, source_id):
        question = str(item["question"])
        relevant = [doc for doc, text in texts.items() if question in text]
        if relevant:
            labels.append({"question": question, "relevant_documents": relevant, "kind": "known-item"})
    out.write_text("".join(json.dumps(q, ensure_ascii=False) + "\n" for q in labels), encoding="utf-8")
    return len(labels)


def main() -> None:
    """Entry point: ``make_known_items.py FOLDER SOURCE_ID OUT.jsonl``."""
    if len(sys.argv) != 4:
        sys.exit("usage: make_known_items.py FOLDER SOURCE_ID OUT.jsonl")
    items = known_items(Path(sys.argv[1]), sys.argv[2])
    Path(sys.argv[3]).write_text("".join(json.dumps(i, ensure_ascii=False) + "\n" for i in items), encoding="utf-8")
    print(f"wrote {len(items)} known-item questions to {sys.argv[3]}")


if __name__ == "__main__":
    main()
