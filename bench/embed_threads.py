"""Embedding throughput of N processes on this host, by threads per process (the model alone).

For each process count N (``--procs``) and each thread count (every core, the default;
``max(1, cores // N)``; 1), N child processes embed their share of the same bench corpus chunks
(row 7's corpus, 30-120 tokens each) at once, each with ``FLUX_CHROMA_EMBED_THREADS`` set:
they load the model, then start together; docs/s = chunks / (last finish - start). No writes,
no Flux, no embedding cache. The best of ``--repeats`` runs per cell, configurations
interleaved. It prints the table of docs/deployment.md's "Embedding threads".

Usage::

    .venv/bin/python -m bench.embed_threads [--procs 1,2,4] [--docs 600] [--repeats 2]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CHILD = """
import json, sys, time
from flux_chroma.embedding import FastDefaultEmbedding
texts = json.loads(open(sys.argv[1]).read())[int(sys.argv[2]):int(sys.argv[3])]
ef = FastDefaultEmbedding()
ef.embed(texts[:16])  # load the model, start the thread pool
print("ready", flush=True)
sys.stdin.readline()
for start in range(0, len(texts), 256):  # one call per ingestion batch
    ef.embed(texts[start : start + 256])
print(time.time(), flush=True)
"""


def _run(corpus: Path, n: int, procs: int, threads: int) -> float:
    """Docs/s of ``procs`` processes with ``threads`` threads each, embedding ``n`` texts at once."""
    env = {**os.environ, "FLUX_CHROMA_EMBED_THREADS": str(threads)}
    cuts = [round(i * n / procs) for i in range(procs + 1)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(corpus), str(a), str(b)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env,
        )
        for a, b in itertools.pairwise(cuts)
    ]  # fmt: skip
    try:
        for child in children:
            assert child.stdout is not None
            if child.stdout.readline().strip() != "ready":
                raise RuntimeError(f"child {child.pid} exited before it was ready")
        start = time.time()
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        ends = [float(child.communicate(timeout=600)[0]) for child in children]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()
    return n / (max(ends) - start)


def main() -> None:
    """Measure every cell and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default="1,2,4", help="process counts, comma-separated")
    parser.add_argument("--docs", type=int, default=600, help="chunks per run (split over N)")
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()

    from bench.corpus import build_corpus
    from flux_chroma.embedding.onnx_session import cpu_count

    cores = cpu_count()
    procs = [int(p) for p in args.procs.split(",")]
    columns = sorted({cores, 1, *(max(1, cores // p) for p in procs)}, reverse=True)
    cells = [(p, t) for p in procs for t in columns]
    best: dict[tuple[int, int], float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        corpus = Path(tmp) / "texts.json"
        corpus.write_text(json.dumps([c.text for c in build_corpus(args.docs)]))
        for _ in range(args.repeats):
            for cell in cells:
                best[cell] = max(best.get(cell, 0.0), _run(corpus, args.docs, *cell))

    base = best[(procs[0], cores)]
    print(
        f"{args.docs} corpus chunks, {cores} cores (CPU affinity), best of {args.repeats}; "
        f"docs/s of all processes together (x = vs {procs[0]} process, {cores} threads)\n"
    )
    print("| processes | " + " | ".join(f"{t} thread{'s' * (t > 1)} each" for t in columns) + " |")
    print("|---|" + "---|" * len(columns))
    for p in procs:
        row = []
        for t in columns:
            mark = "**" if t == max(1, cores // p) else ""
            row.append(f"{mark}{best[(p, t)]:.0f} ({best[(p, t)] / base:.2f}x){mark}")
        print(f"| {p} | " + " | ".join(row) + " |")
    print("\nBold: max(1, cores // processes).")


if __name__ == "__main__":
    main()
