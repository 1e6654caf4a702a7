"""Overlapped writes (embed batch N+1 while batch N is upserted) equal sequential ones exactly.

Real ``chroma run`` server, real Flux executions. Each test runs the same work twice, with
``overlap`` on and off (the default), into two collections, and compares the receipts (all
counts; timings and names aside) and the stored records: ids, documents, metadata and the
exact float32 embeddings. The embedding call log names the thread of every model call,
which shows the overlapped run really embedded ahead (in flux-chroma's background thread)
and the sequential one never did. Failures mid-pipeline (an embedding backend raising at
batch k) leave exactly the batches before k written, with the same typed error either way,
and a re-run converges to the clean result. Nothing is timed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fault_tools as ft
import pytest
from ingest_workflows import CountingEmbedding  # noqa: F401 - registers counting-default

from flux_chroma.errors import ConfigurationError, EmbeddingFunctionError
from flux_chroma.ingest import IngestJob, build_plan, read_batch, run_ingest

AHEAD_THREAD = "flux-chroma-ahead"  # prefix of the pipeline's background threads
MAX_BATCH = 5461  # the server's max batch size (checked below)
_TIMINGS = {
    "seconds",
    "embed_seconds",
    "collection",
    "requested_collection",
    "physical_name",
    "execution_id",
    "pid",
    "worker",
}


def _contents(raw_client: Any, physical: str) -> dict[str, tuple[str, dict[str, Any], bytes]]:
    got = raw_client.get_collection(physical).get(include=["documents", "metadatas", "embeddings"])
    return {
        rid: (doc, meta, emb.astype("float32").tobytes())
        for rid, doc, meta, emb in zip(
            got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
        )
    }


def _counts(receipt: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in receipt.items() if k not in _TIMINGS}


def _calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def _docs(count: int, boom_at: int | None = None) -> list[dict[str, Any]]:
    docs = ft.docs("rec", count)
    if boom_at is not None:
        docs[boom_at]["text"] = "boom " + docs[boom_at]["text"]
    return docs


def _add(tenant: str, collection: str, docs: list[dict[str, Any]], overlap: bool) -> Any:
    step = {"task": "embed_and_add", "args": [collection, docs], "options": {"overlap": overlap}}
    return ft.steps_wf.run(
        {"tenant": tenant, "hash_dim": 16, "options": {"retry_max_attempts": 0}, "steps": [step]}
    )


def test_embed_and_add_overlapped_equals_sequential(
    tenant: str, raw_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert raw_client.get_max_batch_size() == MAX_BATCH
    docs = _docs(2 * MAX_BATCH + 37)  # three server batches in one call
    receipts, calls = {}, {}
    for overlap in (True, False):
        log = tmp_path / f"calls-{overlap}.jsonl"
        monkeypatch.setenv(ft.CALL_LOG_ENV, str(log))
        run = _add(tenant, f"ovl-{overlap}".lower(), docs, overlap)
        assert run.has_succeeded, run.output
        receipts[overlap], calls[overlap] = run.output[0], _calls(log)
    assert receipts[True]["batches"] == 3 and receipts[True]["added"] == len(docs)
    assert _counts(receipts[True]) == _counts(receipts[False])
    assert _contents(raw_client, f"{tenant}__ovl-true") == _contents(
        raw_client, f"{tenant}__ovl-false"
    )
    # Batches 2 and 3 were embedded ahead, in the background, only when overlapping.
    embedded = [c for c in calls[True] if c["texts"] > 8]  # not the pin's canary calls
    assert [c["texts"] for c in embedded] == [MAX_BATCH, MAX_BATCH, 37]
    assert [c["thread"].startswith(AHEAD_THREAD) for c in embedded] == [False, True, True]
    assert not any(c["thread"].startswith(AHEAD_THREAD) for c in calls[False])


def test_embed_and_add_failing_mid_pipeline_writes_exactly_the_batches_before(
    tenant: str, raw_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = _docs(2 * MAX_BATCH + 37, boom_at=MAX_BATCH + 5)  # the backend fails on batch 2 of 3
    monkeypatch.setenv(ft.FAIL_TEXT_ENV, "boom")
    errors = {}
    for overlap in (True, False):
        run = _add(tenant, f"fail-{overlap}".lower(), docs, overlap)
        assert run.has_failed and isinstance(run.output, EmbeddingFunctionError), repr(run.output)
        errors[overlap] = str(run.output)
        stored = raw_client.get_collection(f"{tenant}__fail-{overlap}".lower()).get(include=[])[
            "ids"
        ]
        assert sorted(stored) == sorted(d["id"] for d in docs[:MAX_BATCH])  # batch 1 only
    assert errors[True] == errors[False] and "embedding backend down" in errors[True]
    monkeypatch.delenv(ft.FAIL_TEXT_ENV)
    again = {}
    for overlap in (True, False):
        run = _add(tenant, f"fail-{overlap}".lower(), docs, overlap)
        assert run.has_succeeded, run.output
        again[overlap] = run.output[0]
    assert _counts(again[True]) == _counts(again[False])
    assert (again[True]["skipped"], again[True]["added"]) == (MAX_BATCH, len(docs) - MAX_BATCH)
    assert _contents(raw_client, f"{tenant}__fail-true") == _contents(
        raw_client, f"{tenant}__fail-false"
    )


def _jsonl_job(
    tenant: str, path: Path, collection: str, overlap: bool, **extra: Any
) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "collection": collection,
        "sources": [{"kind": "jsonl", "path": str(path), "id": "records"}],
        "batch_size": 8,
        "cleanup": "full",
        "overlap": overlap,
        "options": {"retry_max_attempts": 0},
        **extra,
    }


def _write_records(path: Path, count: int, boom_at: int | None = None) -> None:
    lines = []
    for i in range(count):
        text = (
            f"Record {i}: a durable workflow writes embeddings of paragraph {i * 7} into Chroma. "
            * 4
        )
        if i == boom_at:
            text = "boom " + text
        lines.append(json.dumps({"id": f"r{i:03d}", "text": text, "metadata": {"n": i % 5}}))
    path.write_text("\n".join(lines) + "\n")


def test_ingestion_job_overlapped_equals_sequential_with_the_real_model(
    tenant: str, raw_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "records.jsonl"
    _write_records(path, 44)  # 6 batches of up to 8 chunks
    log = tmp_path / "embedded.jsonl"
    monkeypatch.setenv("FC_EMBED_LOG", str(log))
    reports, threads = {}, {}
    for overlap in (True, False):
        job = _jsonl_job(
            tenant,
            path,
            f"job-{overlap}".lower(),
            overlap,
            embedding_function={"name": "counting-default"},
        )
        mark = len(_calls(log))
        run = run_ingest(job)
        assert run.has_succeeded, run.output
        reports[overlap] = run.output
        threads[overlap] = [(c["thread"], len(c["texts"])) for c in _calls(log)[mark:]]
    report = reports[True]
    assert report["batches"] == 6 and report["added"] == 44 == report["embedded"]
    assert _counts(report).keys() - _counts(reports[False]).keys() == set()
    assert {k: v for k, v in _counts(report).items() if k != "batch_timings"} == {
        k: v for k, v in _counts(reports[False]).items() if k != "batch_timings"
    }
    assert [_counts(t) for t in report["batch_timings"]] == [
        _counts(t) for t in reports[False]["batch_timings"]
    ]
    assert _contents(raw_client, f"{tenant}__job-true") == _contents(
        raw_client, f"{tenant}__job-false"
    )
    # Every batch embedded exactly once; batches 1-5 ahead of their task, in the background.
    assert [n for _, n in threads[True]] == [8, 8, 8, 8, 8, 4] == [n for _, n in threads[False]]
    assert [t.startswith(AHEAD_THREAD) for t, _ in threads[True]] == [False] + [True] * 5
    assert not any(t.startswith(AHEAD_THREAD) for t, _ in threads[False])


@pytest.mark.parametrize("overlap", [True, False], ids=["overlapped", "sequential"])
def test_ingestion_failing_at_batch_k_commits_exactly_the_batches_before_and_converges(
    tenant: str, raw_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, overlap: bool
) -> None:
    path = tmp_path / "records.jsonl"
    _write_records(path, 40, boom_at=27)  # batch 3 of 0-4 holds the failing text
    job = _jsonl_job(
        tenant,
        path,
        "failing",
        overlap,
        embedding_function={"name": ft.HashEmbedding.name(), "config": {"dim": 16}},
    )
    spec = IngestJob.from_dict(job)
    batches = [read_batch(spec, ref) for ref in build_plan(spec)["batches"]]
    assert len(batches) == 5 and any(c.text.startswith("boom") for c in batches[3])

    monkeypatch.setenv(ft.FAIL_TEXT_ENV, "boom")
    first = run_ingest(job)
    assert first.has_failed and isinstance(first.output, EmbeddingFunctionError), repr(first.output)
    message = str(first.output)
    assert (
        "stopped after 3 of 5 batches committed (batch 4 of 5 failed" in message
        and "embedding backend down" in message
    )
    stored = raw_client.get_collection(f"{tenant}__failing").get(include=[])["ids"]
    assert sorted(stored) == sorted(
        c.id for chunks in batches[:3] for c in chunks
    )  # nothing of batch 3 or 4

    monkeypatch.delenv(ft.FAIL_TEXT_ENV)
    second = run_ingest(job)
    assert second.has_succeeded, second.output
    writers = {t["batch"]: t["execution_id"] for t in second.output["batch_timings"]}
    assert writers == {
        b: first.execution_id if b < 3 else second.execution_id for b in range(5)
    }  # 0-2 replayed
    assert (
        second.output["added"] == 40
        and second.output["failed"] == 0
        and second.output["verified"] == 40
    )
    got = raw_client.get_collection(f"{tenant}__failing").get(include=["documents"])
    assert dict(zip(got["ids"], got["documents"], strict=True)) == {
        c.id: c.text for chunks in batches for c in chunks
    }


def test_overlap_is_not_part_of_the_job_key_and_is_validated(tmp_path: Path) -> None:
    base = {
        "tenant": "acme",
        "collection": "notes",
        "sources": [{"kind": "jsonl", "path": str(tmp_path / "x.jsonl")}],
    }
    on, off = IngestJob.from_dict({**base, "overlap": True}), IngestJob.from_dict(base)
    assert on.overlap and not off.overlap  # off by default
    assert (
        on.job_key == off.job_key and on.work_dict() == off.work_dict()
    )  # same runs, same task ids
    assert on.to_dict()["overlap"] is True and "overlap" not in off.to_dict()
    assert on.task_options()["overlap"] is True and "overlap" not in off.task_options()
    with pytest.raises(ConfigurationError, match=r"chunking\.overlap"):
        IngestJob.from_dict({**base, "overlap": 100})
    from flux_chroma import embed_and_add

    with pytest.raises(ConfigurationError, match="overlap= must be True or False"):
        embed_and_add.with_options(tenant="acme", overlap="no")
