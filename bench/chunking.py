"""Chunking rows (issue 23): chunks over the model's limit and known-item findability.

Corpus: the plain UTF-8 text files shipped in /usr/share/doc (no .gz, no HTML/XML/JS, 200 B
to 200 KB), sorted by path; ``--every N`` keeps every N-th (default 10). Nothing of it is
copied into the repository.

* over the limit: chunks whose token count (special tokens included) is above the 256
  tokens all-MiniLM-L6-v2 reads, per chunker;
* findability: 200 sentences sampled from the corpus (seed 0, 60-240 characters) are asked
  back word for word; one is found when one of the 5 nearest chunks (exact cosine over the
  default model's vectors, what Chroma's HNSW index approximates) contains it.

Run: ``.venv/bin/python -m bench.chunking --every 40 --sizes 200`` (minutes: embedding dominates).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

SKIP = (".gz", ".html", ".htm", ".js", ".css", ".xml", ".svg", ".png", ".gif", ".jpg", ".pdf")
SENTENCE = re.compile(r"[A-Z][^.!?\n]{58,238}[.!?](?=\s)")


def corpus(every: int) -> list[tuple[str, str]]:
    """``(path, text)`` of every ``every``-th plain text file of /usr/share/doc."""
    out = []
    for path in sorted(Path("/usr/share/doc").rglob("*")):
        if path.is_symlink() or not path.is_file() or path.suffix in SKIP or not 200 <= path.stat().st_size <= 200_000:
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            out.append((str(path), data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return out[::every]


def norm(text: str) -> str:
    return " ".join(text.split())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=10, help="keep every N-th file (default 10)")
    parser.add_argument("--questions", type=int, default=200)
    parser.add_argument("--ratio", action="store_true", help="only print characters per token of the old chunks")
    parser.add_argument("--sizes", default="128,200,254", help="token sizes to compare with the old chunker")
    args = parser.parse_args()

    from flux_chroma.embedding import FastDefaultEmbedding
    from flux_chroma.ingest.chunking import DEFAULT_TOKENS, ChunkingOptions
    from flux_chroma.ingest.splitter import chunker_for

    sizes = [int(n) for n in args.sizes.split(",") if n]
    docs = corpus(args.every)
    if args.ratio:
        old = chunker_for(ChunkingOptions(unit="chars", size=1000, overlap=100), None)
        texts = [p.text for _, text in docs for p in old.pieces(text, markdown=False)]
        assert old.tokens is not None
        ratio = np.array([len(t) for t in texts]) / np.maximum(np.array(old.tokens.counts(texts)) - old.tokens.specials, 1)
        print(f"{len(texts)} chunks: characters per token median {np.median(ratio):.2f}, 1st percentile "
              f"{np.percentile(ratio, 1):.2f}, least {ratio.min():.2f}")
        return 0
    sentences = sorted({norm(m.group(0)) for _, text in docs for m in SENTENCE.finditer(text)})
    questions = random.Random(0).sample(sentences, min(args.questions, len(sentences)))
    print(f"corpus: {len(docs)} files, {sum(len(t) for _, t in docs):,} characters; {len(questions)} questions", flush=True)
    ef = FastDefaultEmbedding()
    qvec = ef.embed(questions)
    configs = [
        ("old: 1,000 chars, 100 overlap", ChunkingOptions(unit="chars", size=1000, overlap=100)),
        *((f"new: {n} tokens" + (" (default)" if n == DEFAULT_TOKENS else ""), ChunkingOptions(size=n)) for n in sizes),
    ]
    print("| chunker | chunks | over 256 tokens | longest (tokens) | found in top 5 | chunk s | embed s |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for label, options in configs:
        chunker = chunker_for(options, None)
        started = time.perf_counter()
        texts = [p.text for path, text in docs for p in chunker.pieces(text, markdown=path.endswith(".md"))]
        cut = time.perf_counter() - started
        assert chunker.tokens is not None
        counts = chunker.tokens.counts(texts)
        over = sum(1 for n in counts if n > chunker.tokens.max_tokens)
        started = time.perf_counter()
        vecs = np.concatenate([ef.embed(texts[i : i + 64]) for i in range(0, len(texts), 64)])
        embed = time.perf_counter() - started
        top = np.argsort(-(qvec @ vecs.T), axis=1)[:, :5]
        normed = [norm(t) for t in texts]
        found = sum(1 for q, row in zip(questions, top, strict=True) if any(q in normed[j] for j in row))
        print(
            f"| {label} | {len(texts):,} | {over:,} ({100 * over / len(texts):.0f}%) | {max(counts)} | "
            f"{found}/{len(questions)} ({100 * found / len(questions):.0f}%) | {cut:.1f} | {embed:.1f} |",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
