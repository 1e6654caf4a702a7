"""Cold-ingest peak RSS: ``flux-chroma ingest`` in a fresh process, on real documents.

Corpus: every ``--every``-th plain UTF-8 text file of /usr/share/doc (the selection of
``bench/chunking.py``; documents this project did not write, copied to a temp folder, never
into the repository). Each run is ``flux-chroma ingest FOLDER -c NAME --batch-size B --json``
in a child process with a fresh Flux home and a fresh, empty embedding cache (cold: every
chunk is embedded by the default model), against a ``chroma run`` server started here. The
child's peak RSS is its own ``VmHWM`` read when the command returns.

Side by side, in the same invocation and alternating which runs first:

* new: today's code (ONNX runs cut to the attention budget,
  :data:`flux_chroma.embedding.onnx_session.ATTENTION_BUDGET`);
* old: the same code with the budget lifted (``ATTENTION_BUDGET`` set to 2**62 in the
  child), which is what the embedder did before: one ONNX run per 32 texts whatever their
  length.

``--model`` also times the model alone on the corpus's chunks (one ``embed`` call per 256
chunks, old and new alternating, ``--reps`` each): the throughput figure without the server,
Flux or the cache.

    .venv/bin/python -m bench.cold_memory --every 20 --batch-sizes 256,64 --model
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

__all__ = ["OLD_BUDGET", "cold_ingest", "copy_corpus", "main", "model_throughput"]

OLD_BUDGET = 2**62
"""The budget that reproduces the embedder before issue 23 (no run is ever cut)."""


def copy_corpus(dest: Path, every: int) -> int:
    """Copy every ``every``-th plain text file of /usr/share/doc under ``dest``; return the count."""
    from bench.chunking import corpus

    docs = corpus(every)
    for path, _ in docs:
        target = dest / Path(path).relative_to("/usr/share/doc")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    return len(docs)


def _child(argv: list[str]) -> int:
    """``--child OUT BUDGET -- CLI ARGS``: run the CLI in this process, write its peak RSS to OUT."""
    out, budget, cli = argv[0], argv[1], argv[3:]
    from flux_chroma.embedding import onnx_session

    if budget != "new":
        onnx_session.ATTENTION_BUDGET = int(budget)
    from flux_chroma.cli import main as cli_main

    sys.argv = ["flux-chroma", *cli]
    started = time.perf_counter()
    code = 0
    try:
        cli_main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    seconds = time.perf_counter() - started
    status = Path("/proc/self/status").read_text()
    hwm = int(status.split("VmHWM:")[1].split()[0]) / 1024
    Path(out).write_text(json.dumps({"code": code, "seconds": seconds, "peak_rss_mib": hwm}))
    return 0


def cold_ingest(
    folder: Path, work: Path, url: str, name: str, batch_size: int, side: str
) -> dict[str, Any]:
    """One cold ``flux-chroma ingest`` in a child process; its peak RSS, seconds and report."""
    home, cache, out = work / f"{name}-flux", work / f"{name}-cache", work / f"{name}.json"
    env = {**os.environ, "FLUX_HOME": str(home), "FLUX_CHROMA_CACHE_DIR": str(cache)}
    budget = "new" if side == "new" else str(OLD_BUDGET)
    cmd = [sys.executable, "-m", "bench.cold_memory", "--child", str(out), budget, "--"]
    cmd += ["ingest", str(folder), "-c", name, "--batch-size", str(batch_size), "--json"]
    cmd += ["--url", url, "-t", "bench", "--flux-home", str(home)]
    done = subprocess.run(
        cmd, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800
    )
    if done.returncode != 0 or not out.exists():
        raise SystemExit(f"{name}: child failed ({done.returncode}): {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(out.read_text())
    report = json.loads(done.stdout[done.stdout.index("{") :])
    result["chunks"] = int(report.get("chunks", 0))
    result["added"] = int(report.get("added", 0))
    result["cache_hits"] = int(report.get("cache_hits", 0))
    if result["code"] not in (0, 5):  # 5: completed, some files skipped (named in the report)
        raise SystemExit(
            f"{name}: flux-chroma ingest exited {result['code']}: {done.stdout[-2000:]}"
        )
    return result


def model_throughput(folder: Path, reps: int) -> dict[str, float]:
    """Chunks per second of the model alone, old and new budget alternating (best of ``reps``)."""
    from flux_chroma.embedding import FastDefaultEmbedding, onnx_session
    from flux_chroma.ingest import IngestJob
    from flux_chroma.ingest.plan import iter_chunks

    job = {
        "tenant": "bench",
        "collection": "throughput",
        "sources": [{"kind": "files", "path": str(folder)}],
    }
    texts = [chunk.text for _, chunk in iter_chunks(IngestJob.from_dict(job))]
    ef = FastDefaultEmbedding()
    ef.embed(texts[:8])
    budget = onnx_session.ATTENTION_BUDGET
    best = {"old": 0.0, "new": 0.0}
    for rep in range(reps):
        for side in ("old", "new") if rep % 2 == 0 else ("new", "old"):
            onnx_session.ATTENTION_BUDGET = OLD_BUDGET if side == "old" else budget
            started = time.perf_counter()
            for i in range(0, len(texts), 256):
                ef.embed(texts[i : i + 256])
            best[side] = max(best[side], len(texts) / (time.perf_counter() - started))
    return {"chunks": float(len(texts)), **best}


def main(argv: list[str] | None = None) -> int:
    """Run the cold ingests (and optionally the model-alone timing) and print a markdown table."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["--child"]:
        return _child(args_list[1:])
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--every", type=int, default=20, help="every N-th text file of /usr/share/doc")
    p.add_argument("--batch-sizes", default="256,64", help="ingest --batch-size values")
    p.add_argument("--sides", default="new,old", help="new, old or both")
    p.add_argument("--model", action="store_true", help="also time the model alone, old vs new")
    p.add_argument("--reps", type=int, default=3, help="model-alone repetitions per side")
    args = p.parse_args(args_list)
    from flux_chroma import ChromaServer

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="flux-chroma-cold-") as tmp:
        work = Path(tmp)
        files = copy_corpus(work / "corpus", args.every)
        print(f"corpus: {files} files of /usr/share/doc (every {args.every}th)", flush=True)
        server = ChromaServer(work / "chroma-data", port=0, log_path=work / "chroma.log")
        server.start()
        try:
            sides = [s for s in args.sides.split(",") if s]
            for k, size in enumerate(int(x) for x in args.batch_sizes.split(",") if x):
                for side in sides if k % 2 == 0 else list(reversed(sides)):
                    name = f"cold-{side}-{size}"
                    got = cold_ingest(work / "corpus", work, server.url, name, size, side)
                    got.update(side=side, batch_size=size)
                    rows.append(got)
                    print(
                        f"  {side} --batch-size {size}: {got['chunks']:,} chunks, peak RSS "
                        f"{got['peak_rss_mib']:.0f} MiB, {got['seconds']:.1f} s "
                        f"({got['chunks'] / got['seconds']:.1f} chunks/s), cache hits {got['cache_hits']}",
                        flush=True,
                    )
        finally:
            server.stop()
        print("\n| embedder | `--batch-size` | chunks | peak RSS | seconds | chunks/s |")
        print("|---|---:|---:|---:|---:|---:|")
        for r in rows:
            label = "new: attention budget" if r["side"] == "new" else "old: 32 texts a run"
            print(
                f"| {label} | {r['batch_size']} | {r['chunks']:,} | {r['peak_rss_mib']:.0f} MiB | "
                f"{r['seconds']:.1f} | {r['chunks'] / r['seconds']:.1f} |"
            )
        if args.model:
            t = model_throughput(work / "corpus", args.reps)
            print(
                f"\nmodel alone, {int(t['chunks']):,} chunks, best of {args.reps}: old {t['old']:.1f} "
                f"chunks/s, new {t['new']:.1f} chunks/s (new/old {t['new'] / t['old']:.3f}x)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
