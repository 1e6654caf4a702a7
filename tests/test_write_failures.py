"""A write that fails at batch k leaves exactly the batches before k written, and converges.

Real ``chroma run`` server, real Flux executions. An embedding backend raising at batch k
(``embed_and_add`` server batches, and an ingestion job's batch tasks) leaves exactly the
batches before k stored, with a typed error naming the cause; a re-run writes the rest.
The removed ``overlap`` option is refused with a message saying why. Nothing is timed.
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

MAX_BATCH = 5461  # the server's max batch size


def _docs(count: int, boom_at: int | None = None) -> list[dict[str, Any]]:
    docs = ft.docs("rec", count)
    if boom_at is not None:
        docs[boom_at]["text"] = "boom " + docs[boom_at]["text"]
    return docs


def _add(tenant: str, collection: str, docs: list[dict[str, Any]]) -> Any:
    step = {"task": "embed_and_add", "args": [collection, docs]}
    return ft.steps_wf.run(
        {"tenant": tenant, "hash_dim": 16, "options": {"retry_max_attempts": 0}, "steps": [step]}
    )


def test_embed_and_add_failing_mid_call_writes_exactly_the_batches_before(
    tenant: str, raw_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = _docs(2 * MAX_BATCH + 37, boom_at=MAX_BATCH + 5)  # the backend fails on batch 2 of 3
    monkeypatch.setenv(ft.FAIL_TEXT_ENV, "boom")
    run = _add(tenant, "fail", docs)
    assert run.has_failed and isinstance(run.output, EmbeddingFunctionError), repr(run.output)
    assert "embedding backend down" in str(run.output)
    stored = raw_client.get_collection(f"{tenant}__fail").get(include=[])["ids"]
    assert sorted(stored) == sorted(d["id"] for d in docs[:MAX_BATCH])  # batch 1 only
    monkeypatch.delenv(ft.FAIL_TEXT_ENV)
    again = _add(tenant, "fail", docs)
    assert again.has_succeeded, again.output
    receipt = again.output[0]
    assert (receipt["skipped"], receipt["added"]) == (MAX_BATCH, len(docs) - MAX_BATCH)
    assert raw_client.get_collection(f"{tenant}__fail").count() == len(docs)


def _write_records(path: Path, count: int, boom_at: int | None = None) -> None:
    lines = []
    for i in range(count):
        text = f"Record {i}: a durable workflow writes embeddings of paragraph {i * 7} into Chroma. " * 4
        if i == boom_at:
            text = "boom " + text
        lines.append(json.dumps({"id": f"r{i:03d}", "text": text, "metadata": {"n": i % 5}}))
    path.write_text("\n".join(lines) + "\n")


def test_ingestion_failing_at_batch_k_commits_exactly_the_batches_before_and_converges(
    tenant: str, raw_client: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "records.jsonl"
    _write_records(path, 40, boom_at=27)  # batch 3 of 0-4 holds the failing text
    job = {
        "tenant": tenant,
        "collection": "failing",
        "sources": [{"kind": "jsonl", "path": str(path), "id": "records"}],
        "batch_size": 8,
        "cleanup": "full",
        "options": {"retry_max_attempts": 0},
        "embedding_function": {"name": ft.HashEmbedding.name(), "config": {"dim": 16}},
    }
    spec = IngestJob.from_dict(job)
    batches = [read_batch(spec, ref) for ref in build_plan(spec)["batches"]]
    assert len(batches) == 5 and any(c.text.startswith("boom") for c in batches[3])

    monkeypatch.setenv(ft.FAIL_TEXT_ENV, "boom")
    first = run_ingest(job)
    assert first.has_failed and isinstance(first.output, EmbeddingFunctionError), repr(first.output)
    message = str(first.output)
    assert "stopped after 3 of 5 batches committed (batch 4 of 5 failed" in message and "embedding backend down" in message
    stored = raw_client.get_collection(f"{tenant}__failing").get(include=[])["ids"]
    assert sorted(stored) == sorted(c.id for chunks in batches[:3] for c in chunks)  # nothing of batch 3 or 4

    monkeypatch.delenv(ft.FAIL_TEXT_ENV)
    second = run_ingest(job)
    assert second.has_succeeded, second.output
    writers = {t["batch"]: t["execution_id"] for t in second.output["batch_timings"]}
    assert writers == {b: first.execution_id if b < 3 else second.execution_id for b in range(5)}  # 0-2 replayed
    assert second.output["added"] == 40 and second.output["failed"] == 0 and second.output["verified"] == 40
    got = raw_client.get_collection(f"{tenant}__failing").get(include=["documents"])
    assert dict(zip(got["ids"], got["documents"], strict=True)) == {c.id: c.text for chunks in batches for c in chunks}


def test_the_removed_overlap_option_is_refused_as_unknown(tmp_path: Path) -> None:
    from flux_chroma import chroma_task, embed_and_add

    job = {"tenant": "acme", "collection": "notes", "sources": [{"kind": "jsonl", "path": str(tmp_path / "x.jsonl")}]}
    with pytest.raises(ConfigurationError, match=r"^job has unknown field\(s\) \['overlap'\]"):
        IngestJob.from_dict({**job, "overlap": True})
    with pytest.raises(ConfigurationError, match=r"got unknown option\(s\) \['overlap'\]"):
        embed_and_add.with_options(tenant="acme", overlap=True)
    with pytest.raises(ConfigurationError, match=r"^@chroma_task\(\) got unknown option\(s\) \['overlap'\]"):
        chroma_task(overlap=True)
    IngestJob.from_dict({**job, "chunking": {"size": 200, "overlap": 20}})  # the chunks' overlap stays
