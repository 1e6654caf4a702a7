"""Retrieval quality rows: the shipped labelled set and a second real corpus, per query mode.

Corpus 1 is Python's own documentation topics (``pydoc_data``, in every CPython) with the
labelled sets shipped in ``examples/eval/``: 206 known-item questions (sentences and phrases
sampled by ``make_known_items.py``) and 140 hand-written natural questions
(``natural_questions.py``). Corpus 2 is the ``README*`` files under ``/usr/share/doc`` of
this machine (uncompressed, at most 20 kB, the first ``--usrdoc-files`` in path order),
with known-item questions sampled by the same script. Both are ingested with the ingestion
job's defaults into a throwaway server, then measured with ``flux_chroma.evaluate``::

    .venv/bin/python -m bench.quality            # prints the rows (markdown) and JSON

Every figure in docs/retrieval-quality.md and the quality rows of docs/benchmarks.md come
from this command.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "examples" / "eval"
_USRDOC = Path("/usr/share/doc")


def _usrdoc_files(folder: Path, limit: int) -> int:
    picked = 0
    for path in sorted(_USRDOC.glob("*/README*")):
        if picked >= limit:
            break
        if path.suffix in {".gz", ".Debian"} or not path.is_file() or path.stat().st_size > 20_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        (folder / f"{path.parent.name}__{path.name}.txt").write_text(text, encoding="utf-8")
        picked += 1
    return picked


def _ingest(url: str, folder: Path, collection: str, source_id: str) -> dict[str, Any]:
    from flux_chroma.ingest import run_ingest

    started = time.perf_counter()
    run = run_ingest({"tenant": "bench", "collection": collection, "sources": [{"kind": "files", "path": str(folder), "id": source_id}], "options": {"url": url}})
    if not run.has_succeeded:
        raise SystemExit(f"ingestion of {folder} failed: {run.output}")
    return {"seconds": round(time.perf_counter() - started, 1), "chunks": int(run.output.get("chunks", 0))}


def measure(usrdoc_files: int) -> dict[str, Any]:
    """Build both corpora, ingest them into a throwaway server, evaluate every labelled set."""
    sys.path.insert(0, str(EVAL))
    from export_pydoc_topics import export
    from make_known_items import known_items

    from flux_chroma import ChromaServer, evaluate

    work = Path(tempfile.mkdtemp(prefix="bench-quality-"))
    results: dict[str, Any] = {"python": sys.version.split()[0]}
    try:
        pydoc, usrdoc = work / "pydoc", work / "usrdoc"
        export(pydoc)
        usrdoc.mkdir()
        results["usrdoc_files"] = _usrdoc_files(usrdoc, usrdoc_files)
        usrdoc_labels = known_items(usrdoc, "usrdoc")
        with ChromaServer(work / "data", port=0) as server:
            results["ingest"] = {"pydoc": _ingest(server.url, pydoc, "pydoc", "pydoc"), "usrdoc": _ingest(server.url, usrdoc, "usrdoc", "usrdoc")}
            opts = {"url": server.url}
            results["pydoc-known-item"] = evaluate("pydoc", EVAL / "pydoc-known-items.jsonl", tenant="bench", options=opts)["modes"]
            results["pydoc-natural"] = evaluate("pydoc", EVAL / "pydoc-natural.jsonl", tenant="bench", options=opts)["modes"]
            results["usrdoc-known-item"] = evaluate("usrdoc", usrdoc_labels, tenant="bench", options=opts)["modes"]
            results["usrdoc_questions"] = len(usrdoc_labels)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return results


def rows(results: dict[str, Any]) -> list[str]:
    """Markdown rows in docs/benchmarks.md's format (row 24). ``found@5`` is ``hit@5``: the
    share of questions with a relevant document in the top 5 (a sampled passage that several
    identical files hold is found when one of them is)."""
    out = []
    sets = [
        ("pydoc-known-item", "known-item found@5", "hit@5", f"Python {results['python']} pydoc topics (79 docs), 206 known-item questions"),
        ("pydoc-natural", "natural-question recall@5", "recall@5", "pydoc topics, 140 hand-written questions"),
        ("pydoc-natural", "natural-question nDCG@10", "ndcg@10", "pydoc topics, 140 hand-written questions"),
        ("usrdoc-known-item", "known-item found@5", "hit@5", f"/usr/share/doc READMEs ({results['usrdoc_files']} files), {results['usrdoc_questions']} known-item questions"),
    ]
    for key, figure, metric, size in sets:
        for mode, figures in results[key].items():
            goal = ">= 0.97" if figure.startswith("known-item") and mode == "hybrid" else "-"
            status = "info" if goal == "-" else ("met" if figures[metric] >= 0.97 else "MISSED")
            side = f"recall@5 {figures['recall@5']}, found@1 {figures['hit@1']}, found@10 {figures['hit@10']}, MRR {figures['mrr']}, nDCG@10 {figures['ndcg@10']}"
            out.append(f"| 24 | {figure}, {mode} | {size} | {figures[metric]} | {goal} | {status} | {side} |")
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(prog="bench.quality", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--usrdoc-files", type=int, default=60, help="README files of /usr/share/doc to ingest (default 60)")
    args = parser.parse_args(argv)
    from flux_chroma.flux_state import quiet_flux_logs

    quiet_flux_logs()
    results = measure(args.usrdoc_files)
    print("\n".join(rows(results)))
    print(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
