"""Side-by-side benchmark: FastDefaultEmbedding vs Chroma's DefaultEmbeddingFunction.

Builds N short documents (~30 tokens each) deterministically from Python standard-library
docstrings, warms both functions, then times them alternately on the same documents and
prints docs/s of each, the speed-up (goal >= 10x) and the largest absolute difference
between their vectors (goal <= 1e-5). Needs the model files (no download is attempted).

Usage::

    .venv/bin/python bench/bench_embedder.py [--docs 1000] [--repeats 2] [--batch-size 32]
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import re
import statistics
import time
from typing import Any

import numpy as np

MODULES = (
    "argparse", "ast", "asyncio", "base64", "bisect", "calendar", "collections", "concurrent.futures",
    "contextlib", "copy", "csv", "dataclasses", "datetime", "decimal", "difflib", "email",
    "enum", "fractions", "ftplib", "functools", "gzip", "hashlib", "heapq", "hmac", "html",
    "http.client", "imaplib", "inspect", "io", "ipaddress", "itertools", "json", "logging",
    "mailbox", "math", "mimetypes", "operator", "os", "pathlib", "pickle", "platform",
    "plistlib", "poplib", "pprint", "queue", "random", "re", "sched", "secrets", "selectors",
    "shlex", "shutil", "smtplib", "socket", "sqlite3", "statistics", "string", "struct",
    "subprocess", "tarfile", "tempfile", "textwrap", "threading", "timeit", "tokenize",
    "traceback", "typing", "unittest", "urllib.parse", "urllib.request", "uuid", "warnings",
    "wave", "weakref", "xml.dom.minidom", "zipfile", "zlib",
)  # fmt: skip


def first_sentences() -> list[str]:
    """Return the first sentence of every public docstring of MODULES, in a fixed order."""
    seen: set[str] = set()
    out: list[str] = []
    for module_name in MODULES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        members: list[tuple[str, Any]] = [(module_name, module)]
        members += sorted(
            (n, o) for n, o in vars(module).items() if not n.startswith("_") and callable(o)
        )
        for _, obj in members:
            doc = inspect.getdoc(obj)
            if not doc:
                continue
            text = " ".join(doc.split())
            sentence = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
            if len(sentence.split()) >= 4 and sentence not in seen:
                seen.add(sentence)
                out.append(sentence)
    return out


def build_docs(n: int) -> list[str]:
    """Join consecutive first sentences into n documents of 15-20 words (~30 tokens)."""
    sentences = first_sentences()
    docs: list[str] = []
    words: list[str] = []
    i = 0
    while len(docs) < n:
        words += sentences[i % len(sentences)].split()
        i += 1
        if len(words) >= 15:
            docs.append(" ".join(words[:20]) + ("" if i <= len(sentences) else f" ({i})"))
            words = []
    return docs


def main() -> None:
    """Run the benchmark and print the results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    from chromadb.api.types import DefaultEmbeddingFunction

    from flux_chroma.embedding import FastDefaultEmbedding, ensure_model_available

    docs = build_docs(args.docs)
    chroma = DefaultEmbeddingFunction()
    fast = FastDefaultEmbedding(batch_size=args.batch_size)
    ensure_model_available(chroma)
    counts = fast.token_counts(docs)
    print(
        f"{len(docs)} docs, tokens/doc mean {statistics.mean(counts):.1f} "
        f"(min {min(counts)}, max {max(counts)}), {len(set(docs))} distinct; "
        f"cpus={os.cpu_count()}, load avg {os.getloadavg()[0]:.2f}"
    )

    fast(docs[:64])  # warm: load the session and tokenizer once
    chroma(docs[:64])  # warm: file cache (chroma reloads its session on every call anyway)

    times: dict[str, list[float]] = {"fast": [], "chroma": []}
    vectors: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for label, ef in (("fast", fast), ("chroma", chroma)):
            start = time.perf_counter()
            out = ef(docs)
            times[label].append(time.perf_counter() - start)
            vectors[label] = np.asarray(out, dtype=np.float32)

    best = {label: min(t) for label, t in times.items()}
    for label, name in (("fast", "FastDefaultEmbedding"), ("chroma", "DefaultEmbeddingFunction")):
        runs = ", ".join(f"{len(docs) / t:.1f}" for t in times[label])
        print(f"{name:26s} best {len(docs) / best[label]:8.1f} docs/s   (runs: {runs})")
    ratio = best["chroma"] / best["fast"]
    diff = float(np.abs(vectors["fast"] - vectors["chroma"]).max())
    print(f"speed-up fast/chroma: {ratio:.1f}x (goal >= 10x)  {'OK' if ratio >= 10 else 'BELOW'}")
    print(
        f"max abs vector difference: {diff:.3g} (goal <= 1e-5)  {'OK' if diff <= 1e-5 else 'FAIL'}"
    )


if __name__ == "__main__":
    main()
