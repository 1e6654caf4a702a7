"""Ingestion-job inputs shared by rows 6, 10 and 11: corpus prefixes as JSONL files, job specs."""

from __future__ import annotations

from typing import Any

from bench.context import TENANT, Bench

__all__ = ["corpus_file", "jsonl_job", "check_written"]


def corpus_file(b: Bench, size: int, source: str | None = None) -> str:
    """A JSONL file holding exactly the first ``size`` chunks (an ingestion job reads all of it).

    Args:
        b: The run.
        size: Chunks.
        source: A larger JSONL corpus to take them from (default: the run's corpus).
    """
    source = source or str(b.corpus)
    path = b.ws.work / f"corpus-{size}.jsonl"
    if not path.exists():
        with open(source, encoding="utf-8") as src, open(path, "w", encoding="utf-8") as out:
            for count, line in enumerate(src):
                if count >= size:
                    break
                out.write(line)
    return str(path)


def jsonl_job(
    b: Bench, name: str, path: str, batch: int, parallel: int, ef: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The spec of an ingestion job over one JSONL file, without embedding cache.

    Args:
        b: The run (its server URL).
        name: Collection.
        path: The JSONL source.
        batch: Chunks per batch.
        parallel: Units in flight (``parallel`` is left out for 1).
        ef: The ``embedding_function`` entry (default: the default model).
    """
    job: dict[str, Any] = {
        "tenant": TENANT,
        "collection": name,
        "sources": [{"kind": "jsonl", "path": path, "id": "corpus"}],
        "batch_size": batch,
        "options": {"url": b.url, "cache": False},
    }
    if parallel > 1:
        job["parallel"] = parallel
    if ef is not None:
        job["embedding_function"] = ef
    return job


def check_written(row: int, records: int, report: dict[str, Any]) -> None:
    """Raise unless a job over ``records`` corpus records added and embedded every chunk.

    A record longer than the chunk size is split, so there are at least as many chunks as records.
    """
    chunks = report["chunks"]
    if chunks < records or report["added"] != chunks or report["embedded"] != chunks:
        raise RuntimeError(
            f"row {row}: expected every chunk of {records} records added and embedded, got {report}"
        )
