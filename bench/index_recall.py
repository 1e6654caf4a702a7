"""How often the server's approximate vector index misses the exact nearest records, per ``ef_search``.

Copies the vectors of an ingested collection into scratch collections on the same server that
differ only in ``hnsw.ef_search`` (same vectors, same order, Chroma's other defaults), asks
each the questions of a labelled set (embedded by the collection's pinned model), and compares
its top ``k`` with the exact top ``k`` (every stored vector against the question, computed
here). Per ``ef_search``: recall@k of the index against the exact answer, how many questions'
nearest record it missed, and the query p50 (server only, no model)::

    .venv/bin/python -m bench.index_recall -c book --tenant demo LABELS.jsonl --ef 100,400

The server comes from ``--url`` / ``FLUX_CHROMA_URL``. The scratch collections are deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

_BATCH = 1000
_SAME = 1e-4  # distances this close are the same record's (or an identical copy's)


def _scratch(client: Any, name: str, ef_search: int, ids: list[str], vectors: Any) -> Any:
    try:
        client.delete_collection(name)
    except Exception:  # noqa: BLE001, S110 - absent is fine
        pass
    scratch = client.create_collection(name, configuration={"hnsw": {"space": "l2", "ef_search": ef_search}}, embedding_function=None)
    for start in range(0, len(ids), _BATCH):
        scratch.add(ids=ids[start : start + _BATCH], embeddings=vectors[start : start + _BATCH])
    return scratch


def measure(url: str, tenant: str, collection: str, questions: list[str], efs: list[int], k: int) -> list[dict[str, Any]]:
    """One row per ``ef_search`` in ``efs``: recall@k against exact search, nearest missed, p50 ms."""
    import numpy as np

    from flux_chroma import ChromaOptions
    from flux_chroma.chroma.collections import open_collection
    from flux_chroma.chroma.connection import get_client

    target = ChromaOptions(tenant=tenant, url=url).target(collection)
    resolved = open_collection(target, create=False)
    stored = resolved.collection.get(include=["embeddings"], limit=10_000_000)
    vectors = np.asarray(stored["embeddings"], dtype=np.float32)
    asked = np.asarray(resolved.ef(questions), dtype=np.float32)
    exact = [np.sort(((vectors - q) ** 2).sum(axis=1))[:k] for q in asked]
    client = get_client(target.settings)  # the scratch collections: same server, Chroma's default database
    rows = []
    for ef_search in efs:
        name = f"fc-index-recall-ef{ef_search}"
        scratch = _scratch(client, name, ef_search, stored["ids"], vectors)
        found, missed, seconds = 0.0, 0, []
        for q, best in zip(asked, exact, strict=True):
            start = time.perf_counter()
            got = np.asarray(scratch.query(query_embeddings=[q.tolist()], n_results=k, include=["distances"])["distances"][0])
            seconds.append(time.perf_counter() - start)
            found += float(np.mean([np.any(np.abs(got - d) < _SAME) for d in best]))
            missed += int(abs(got[0] - best[0]) >= _SAME)
        client.delete_collection(name)
        rows.append({
            "ef_search": ef_search, "records": len(vectors), "questions": len(asked), f"recall@{k}": round(found / len(asked), 4),
            "nearest_missed": missed, "p50_ms": round(1000 * statistics.median(seconds), 2),
        })  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> None:
    """Entry point."""
    p = argparse.ArgumentParser(prog="index_recall", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("labels", type=Path, help="JSON lines with a 'question' each (flux-chroma eval's labelled sets)")
    p.add_argument("-c", "--collection", required=True)
    p.add_argument("--tenant", required=True)
    p.add_argument("--url", default=os.environ.get("FLUX_CHROMA_URL", "http://localhost:8000"))
    p.add_argument("--ef", default="100,400", help="ef_search values, comma-separated (default 100,400)")
    p.add_argument("-k", type=int, default=10)
    args = p.parse_args(argv)
    questions = [json.loads(line)["question"] for line in args.labels.read_text(encoding="utf-8").splitlines() if line.strip()]
    for row in measure(args.url, args.tenant, args.collection, questions, [int(x) for x in args.ef.split(",")], args.k):
        print(json.dumps(row))


if __name__ == "__main__":
    main()
