"""Fixed cost of a fresh process: ``flux-chroma query`` against a bare ``import chromadb``.

Issue 25, item 6. One ``chroma run`` server is started here and a small real corpus (every
``--every``-th plain text file of /usr/share/doc, the selection of ``bench/chunking.py``) is
ingested once with ``flux-chroma ingest``. Then, alternating in the same invocation, each
``--reps`` times, in fresh processes:

* ``python -c 'import chromadb'``: the floor any chromadb client pays;
* ``flux-chroma query QUESTION -c NAME`` (hybrid, the default; answer included): what a
  user waits for;
* ``flux-chroma query ... --mode dense``.

It prints the medians and their ratios, and, with ``--stages``, where one query process's
time goes (imports, the model, the chromadb client, the answer), measured in-process.

    .venv/bin/python -m bench.cli_cost --every 40 --reps 7 --stages
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

QUESTION = "how do I report a bug"

_STAGES = """
import time, asyncio, sys
t = time.perf_counter()
out = {}
def mark(name):
    global t
    now = time.perf_counter(); out[name] = round(now - t, 3); t = now
import typer; mark("typer")
import chromadb; mark("import chromadb")
import flux_chroma.cli.app; mark("flux_chroma.cli.app (flux, typer app)")
from flux_chroma.cli.support import run_read
from flux_chroma.tasks.builtin import query
from flux_chroma.embedding import FastDefaultEmbedding
FastDefaultEmbedding()(["warm"]); mark("onnxruntime + model session + first run")
target = {"tenant": sys.argv[1], "url": sys.argv[2]}
run_read(query, target, sys.argv[3], sys.argv[4], k=5); mark("first query (chromadb client, pins, hybrid)")
run_read(query, target, sys.argv[3], sys.argv[4], k=5); mark("second query, same process")
print(__import__("json").dumps(out))
"""


def _timed(argv: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    """Run the comparison and print a Markdown table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=int, default=40, help="every N-th text file of /usr/share/doc")
    parser.add_argument("--reps", type=int, default=7, help="fresh processes per side")
    parser.add_argument("--stages", action="store_true", help="also break one query process down")
    args = parser.parse_args(argv)

    from bench.cold_memory import copy_corpus
    from flux_chroma import ChromaServer

    bindir = Path(sys.executable).parent
    cli = str(bindir / "flux-chroma")
    work = Path(tempfile.mkdtemp(prefix="fc-cli-cost-"))
    env = {**os.environ, "FLUX_HOME": str(work / "flux"), "FLUX_DATABASE_URL": f"sqlite:///{work / 'flux' / 'flux.db'}"}
    (work / "flux").mkdir()
    tenant, name = "bench", "docs"
    try:
        files = copy_corpus(work / "corpus", args.every)
        with ChromaServer(work / "chroma") as server:
            url = server.url
            subprocess.run([cli, "ingest", str(work / "corpus"), "-c", name, "--tenant", tenant, "--url", url, "--json"],
                           check=True, env=env, stdout=subprocess.DEVNULL, cwd=work)
            ask = [cli, "query", QUESTION, "-c", name, "--tenant", tenant, "--url", url]
            sides: dict[str, list[float]] = {"import chromadb": [], "flux-chroma query (hybrid)": [], "flux-chroma query --mode dense": []}
            for _ in range(args.reps):
                sides["import chromadb"].append(_timed([sys.executable, "-c", "import chromadb"], env))
                sides["flux-chroma query (hybrid)"].append(_timed(ask, env))
                sides["flux-chroma query --mode dense"].append(_timed([*ask, "--mode", "dense"], env))
            floor = statistics.median(sides["import chromadb"])
            print(f"corpus: {files} files of /usr/share/doc (every {args.every}th), {args.reps} fresh processes per side, alternating\n")
            print("| process | median wall | / import chromadb |\n|---|---|---|")
            for label, times in sides.items():
                median = statistics.median(times)
                print(f"| {label} | {median:.2f} s | {median / floor:.2f}x |")
            if args.stages:
                found = subprocess.run([sys.executable, "-c", _STAGES, tenant, url, name, QUESTION],
                                       check=True, env=env, capture_output=True, text=True, cwd=work)
                stages = json.loads(found.stdout.strip().splitlines()[-1])
                print("\n| stage of one query process | seconds |\n|---|---|")
                for label, seconds in stages.items():
                    print(f"| {label} | {seconds:.3f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
