"""Retrieval quality and latency of ``query``: dense vs hybrid, distinct results on vs off.

Measured on documentation the project did not write: the ``copyright``, ``README*``,
``AUTHORS*`` and ``TODO*`` files under ``/usr/share/doc`` (gzipped ones decompressed), one
record per file, ingested with the ingestion job. Three steps, each re-runnable::

    .venv/bin/python -m bench.retrieval corpus usrdoc.jsonl
    flux-chroma ingest usrdoc.jsonl -c usrdoc --tenant bench --chunk-unit chars \\
        --chunk-size 1000 --chunk-overlap 100
    .venv/bin/python -m bench.retrieval measure -c usrdoc --tenant bench

``measure`` prints, for ``mode="dense"`` and ``mode="hybrid"``:

* known-item recall@5: ``--sample`` sentences (8-40 words, seeded) taken from the stored
  chunks and asked back word for word; found when a top-5 hit contains the sentence;
* natural-question recall@5: the hand-written questions below, each with the package folder(s)
  that answer it; found when a top-5 hit's path is in one of them;
* query latency p50/p95 over all those questions (the embedding included, and without it),
  and the cost of distinct results (dense, ``distinct=True`` vs ``False``).

``latency --chunks 100000`` writes that many chunks of every text file under
``/usr/share/doc`` (changelogs included) with hash vectors instead of the model, and compares
the two modes' query latency there (the model's share is left out: it is the same in both).

The server comes from ``--url`` / ``FLUX_CHROMA_URL``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import statistics
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["NATURAL", "build_corpus", "main", "measure"]

_ROOT = Path("/usr/share/doc")
_KINDS = ("copyright", "readme", "authors", "todo")
_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")

NATURAL: list[tuple[str, tuple[str, ...]]] = [
    ("which library implements the GNU cryptographic functions?", ("libgcrypt20",)),
    ("command-line JSON processor", ("jq",)),
    ("how do I add a new user account to the system?", ("adduser",)),
    ("arbitrary precision calculator language", ("bc",)),
    ("tool to browse C source code interactively", ("cscope",)),
    ("who wrote the GNU core utilities?", ("coreutils",)),
    ("message bus for communication between applications", ("dbus", "dbus-bin", "dbus-daemon", "libdbus-1-3")),
    ("the Debian package manager", ("dpkg", "apt")),
    ("ext2 ext3 ext4 file system utilities", ("e2fsprogs",)),
    ("line-oriented text editor", ("ed",)),
    ("run commands in an environment faking root privileges", ("fakeroot", "libfakeroot")),
    ("find files by name in a directory hierarchy", ("findutils",)),
    ("search text using patterns", ("grep",)),
    ("compress files with the deflate algorithm", ("gzip",)),
    ("GNU privacy guard encryption and signing", ("gnupg", "gpg-agent", "dirmngr")),
    ("debugger for programs written in C", ("gdb",)),
    ("internationalization of program messages", ("gettext", "liblocale-gettext-perl")),
    ("distributed version control system", ("git", "git-man")),
    ("typesetting system that formats man pages", ("groff-base",)),
    ("multiple precision arithmetic library for integers", ("libgmp-dev", "libgmp10")),
    ("library for reading and writing PNG images", ("libpng16-16",)),
    ("JPEG image compression library", ("libjpeg-dev", "libjpeg62-turbo-dev")),
    ("XML parser library written in C", ("libxml2", "libexpat1", "libexpat1-dev")),
    ("library for font rendering", ("libfreetype6", "fontconfig")),
    ("pluggable authentication modules", ("libpam0g",)),
    ("Kerberos network authentication", ("libkrb5-3",)),
    ("lossless compression with the LZMA algorithm", ("liblzma5", "liblzma-dev")),
    ("SQL database engine in a library", ("libsqlite3-0",)),
    ("unicode bidirectional algorithm implementation", ("libfribidi0",)),
    ("networking library for SSH2 protocol", ("libssh2-1",)),
]


def _read(path: Path) -> str | None:
    try:
        if path.name.endswith(".gz"):
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                return handle.read()
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError, EOFError):
        return None


def build_corpus(out: Path) -> int:
    """Write the corpus as JSONL (``{"id", "text", "metadata": {"path"}}``); return the records."""
    count = 0
    with out.open("w", encoding="utf-8") as handle:
        for path in sorted(_ROOT.rglob("*")):
            if not path.is_file() or path.is_symlink() or path.stat().st_size > 300_000:
                continue
            if path.name.split(".")[0].lower() not in _KINDS:
                continue
            text = _read(path)
            if text and text.strip():
                rel = str(path.relative_to(_ROOT))
                handle.write(json.dumps({"id": rel, "text": text, "metadata": {"path": rel}}) + "\n")
                count += 1
    return count


def _norm(text: str) -> str:
    return " ".join(text.split())


def _stored(collection: Any) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    offset = 0
    while True:
        page = collection.get(limit=2000, offset=offset, include=["documents", "metadatas"])
        if not page["ids"]:
            return out
        for rid, doc, meta in zip(page["ids"], page["documents"], page["metadatas"], strict=True):
            out.append({"id": rid, "text": doc or "", "path": (meta or {}).get("path", "")})
        offset += len(page["ids"])


def _sentences(records: list[dict[str, Any]], sample: int, seed: int) -> list[str]:
    pool: set[str] = set()
    for record in records:
        for sentence in _SENTENCE.split(_norm(record["text"])):
            words = sentence.split()
            letters = sum(ch.isalpha() for ch in sentence)
            if 8 <= len(words) <= 40 and letters >= 0.7 * len(sentence):
                pool.add(sentence)
    return random.Random(seed).sample(sorted(pool), min(sample, len(pool)))


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def measure(url: str, tenant: str, collection: str, *, sample: int, seed: int) -> dict[str, Any]:
    """Recall@5 and latency of both modes on a collection; see the module docstring."""
    from flux_chroma.chroma.collections import open_collection
    from flux_chroma.tasks.options import ChromaOptions
    from flux_chroma.tasks.reader import query_collection

    target = ChromaOptions(tenant=tenant, url=url).target(collection)
    records = _stored(open_collection(target, create=False).collection)
    known = _sentences(records, sample, seed)

    def ask(question: str, mode: str, distinct: bool = True) -> tuple[list[dict[str, Any]], float, float]:
        start = time.perf_counter()
        hits, stats = query_collection(
            target, [question], k=5, where=None, where_document=None, mode=mode, distinct=distinct
        )
        total = time.perf_counter() - start
        return [dict(h) for h in hits[0]], total, total - float(stats["embed_seconds"])

    ask("warm up the model and the connection", "dense")
    report: dict[str, Any] = {"chunks": len(records), "known_items": len(known), "natural": len(NATURAL)}
    modes = ("dense", "hybrid")
    found_known = dict.fromkeys(modes, 0)
    found_natural = dict.fromkeys(modes, 0)
    totals: dict[str, list[float]] = {m: [] for m in modes}
    server: dict[str, list[float]] = {m: [] for m in modes}
    missed: dict[str, list[str]] = {m: [] for m in modes}
    for question, folders in [(s, ()) for s in known] + list(NATURAL):
        for mode in modes:  # side by side, question by question: the load is the same for both
            hits, total, rest = ask(question, mode)
            totals[mode].append(total)
            server[mode].append(rest)
            if folders:
                paths = [str(h["metadata"].get("path", "")) for h in hits]
                found_natural[mode] += any(p.split("/")[0] in folders for p in paths)
            elif any(question in _norm(h["document"] or "") for h in hits):
                found_known[mode] += 1
            else:
                missed[mode].append(question)
    for mode in modes:
        report[mode] = {
            "known_recall@5": found_known[mode] / max(1, len(known)),
            "natural_recall@5": found_natural[mode] / len(NATURAL),
            "p50_ms": 1000 * statistics.median(totals[mode]),
            "p95_ms": 1000 * _pct(totals[mode], 0.95),
            "p50_ms_without_embedding": 1000 * statistics.median(server[mode]),
            "p95_ms_without_embedding": 1000 * _pct(server[mode], 0.95),
            "missed_known_items": missed[mode][:5],
        }
    plain, folded = [], []
    for sentence in known[:100]:
        folded.append(ask(sentence, "dense", True)[2])
        plain.append(ask(sentence, "dense", False)[2])
    report["distinct"] = {
        "p50_ms_on": 1000 * statistics.median(folded),
        "p50_ms_off": 1000 * statistics.median(plain),
        "questions": len(folded),
    }
    return report


def _all_chunks(limit: int, words: int = 150) -> list[dict[str, Any]]:
    """Up to ``limit`` chunks of ``words`` words from every text file under /usr/share/doc."""
    out: list[dict[str, Any]] = []
    for path in sorted(_ROOT.rglob("*")):
        if len(out) >= limit:
            break
        if not path.is_file() or path.is_symlink() or path.stat().st_size > 2_000_000:
            continue
        text = _read(path)
        if not text or not text.strip():
            continue
        rel = str(path.relative_to(_ROOT))
        tokens = text.split()
        for i in range(0, len(tokens), words):
            out.append({"id": f"{rel}#{i // words}", "text": " ".join(tokens[i : i + words]), "metadata": {"path": rel}})
    return out[:limit]


def latency(url: str, tenant: str, chunks: int, *, questions: int, seed: int) -> dict[str, Any]:
    """Query latency of both modes on ``chunks`` chunks written with hash vectors (no model).

    Only the server's work is compared: the vectors are the benchmark's ``bench-hash`` stand-in
    (the same size as the default model's), so the dense ranking means nothing, but the
    requests, the HNSW search and the full-text probes cost what they cost with real vectors.
    """
    from bench.stand_in import HashEmbedding
    from flux_chroma.tasks.options import ChromaOptions
    from flux_chroma.tasks.reader import query_collection
    from flux_chroma.tasks.validation import Document
    from flux_chroma.tasks.writer import WriteOptions, write_documents

    ef = HashEmbedding(dim=384)
    target = ChromaOptions(tenant=tenant, url=url).target(f"latency-{chunks}")
    records = _all_chunks(chunks)
    started = time.perf_counter()
    for i in range(0, len(records), 4000):
        batch = [Document(r["id"], r["text"], r["metadata"]) for r in records[i : i + 4000]]
        write_documents(target, batch, WriteOptions(ef=ef))
    written = time.perf_counter() - started
    asked = _sentences(records, questions, seed)
    out: dict[str, Any] = {"chunks": len(records), "write_seconds": round(written, 1), "questions": len(asked)}
    times: dict[str, list[float]] = {"dense": [], "hybrid": []}
    for question in asked:
        for mode, spent in times.items():  # side by side, question by question
            start = time.perf_counter()
            query_collection(target, [question], k=5, where=None, where_document=None, ef=ef, mode=mode)
            spent.append(time.perf_counter() - start)
    for mode, spent in times.items():
        out[mode] = {"p50_ms": 1000 * statistics.median(spent), "p95_ms": 1000 * _pct(spent, 0.95)}
    return out


def identifiers(url: str, tenant: str, collection: str, *, sample: int, seed: int) -> dict[str, Any]:
    """Identifier recall@5: identifiers (``snake_case``, ``--options``, ``dotted.names``, versions)
    sampled from the stored chunks, each asked alone; found when a top-5 hit contains it."""
    from flux_chroma.chroma.collections import open_collection
    from flux_chroma.tasks.hybrid import _is_identifier
    from flux_chroma.tasks.options import ChromaOptions
    from flux_chroma.tasks.reader import query_collection

    target = ChromaOptions(tenant=tenant, url=url).target(collection)
    records = _stored(open_collection(target, create=False).collection)
    pool = sorted({
        token.strip(".,;:()[]<>'\"`")
        for record in records
        for token in record["text"].split()
        if 6 <= len(token.strip(".,;:()[]<>'\"`")) <= 40
    })
    pool = [t for t in pool if _is_identifier(t) and any(ch.isalpha() for ch in t) and "@" not in t and "://" not in t]
    asked = random.Random(seed).sample(pool, min(sample, len(pool)))
    out: dict[str, Any] = {"identifiers": len(asked), "pool": len(pool)}
    found = {"dense": 0, "hybrid": 0}
    examples: list[str] = []
    for term in asked:
        hit = {}
        for mode in found:
            hits, _ = query_collection(target, [term], k=5, where=None, where_document=None, mode=mode)
            hit[mode] = any(term in (h["document"] or "") for h in hits[0])
            found[mode] += hit[mode]
        if hit["hybrid"] and not hit["dense"] and len(examples) < 8:
            examples.append(term)
    for mode, n in found.items():
        out[f"{mode}_recall@5"] = n / max(1, len(asked))
    out["found_by_hybrid_only"] = examples
    return out


def main(argv: list[str] | None = None) -> int:
    """Command line: ``corpus OUT.jsonl`` or ``measure -c COLLECTION --tenant T``."""
    parser = argparse.ArgumentParser(prog="python -m bench.retrieval", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    corpus = sub.add_parser("corpus", help="write the /usr/share/doc corpus as JSONL")
    corpus.add_argument("out", type=Path)
    run = sub.add_parser("measure", help="measure recall and latency on an ingested collection")
    run.add_argument("-c", "--collection", required=True)
    run.add_argument("--tenant", required=True)
    run.add_argument("--url", default=None)
    run.add_argument("--sample", type=int, default=200)
    run.add_argument("--seed", type=int, default=24)
    run.add_argument("--probes", type=int, default=None, help="hybrid: probes per question [default: MAX_PROBES]")
    run.add_argument("--word-fill", type=int, default=None, help="hybrid: words fill up to this many probes [default: WORD_FILL]")
    ids = sub.add_parser("identifiers", help="identifier recall@5 of both modes on an ingested collection")
    ids.add_argument("-c", "--collection", required=True)
    ids.add_argument("--tenant", required=True)
    ids.add_argument("--url", default=None)
    ids.add_argument("--sample", type=int, default=100)
    ids.add_argument("--seed", type=int, default=24)
    lat = sub.add_parser("latency", help="dense vs hybrid latency on N chunks written with hash vectors")
    lat.add_argument("--chunks", type=int, default=100_000)
    lat.add_argument("--tenant", default="bench")
    lat.add_argument("--url", default=None)
    lat.add_argument("--questions", type=int, default=100)
    lat.add_argument("--seed", type=int, default=24)
    args = parser.parse_args(argv)
    if args.command == "latency":
        import os

        url = args.url or os.environ.get("FLUX_CHROMA_URL", "http://localhost:8000")
        print(json.dumps(latency(url, args.tenant, args.chunks, questions=args.questions, seed=args.seed), indent=1))
        return 0
    if args.command == "identifiers":
        import os

        url = args.url or os.environ.get("FLUX_CHROMA_URL", "http://localhost:8000")
        print(json.dumps(identifiers(url, args.tenant, args.collection, sample=args.sample, seed=args.seed), indent=1))
        return 0
    if args.command == "corpus":
        print(f"wrote {build_corpus(args.out)} records to {args.out}")
        return 0
    import os

    url = args.url or os.environ.get("FLUX_CHROMA_URL", "http://localhost:8000")
    from flux_chroma.tasks import hybrid

    if args.probes is not None:
        hybrid.MAX_PROBES = args.probes
    if args.word_fill is not None:
        hybrid.WORD_FILL = args.word_fill
    result = measure(url, args.tenant, args.collection, sample=args.sample, seed=args.seed)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
