"""Incremental sync, cleanup modes, duplicates and changed sources, through real executions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from flux.utils import FluxEncoder
from ingest_workflows import embedded_texts, files_job, stored, write_docs
from recording_proxy import RecordingProxy

from flux_chroma.errors import DuplicateIdError, SourceChangedError
from flux_chroma.ingest import (
    IngestJob,
    build_plan,
    ingest_execution_id,
    ingest_job,
    read_batch,
    run_ingest,
)
from flux_chroma.ingest.plan import iter_chunks


def test_unchanged_corpus_writes_nothing_then_only_the_edit_is_rewritten(
    tmp_path: Path, tenant: str, url: str, raw_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "embedded.jsonl"
    monkeypatch.setenv("FC_EMBED_LOG", str(log))
    docs = tmp_path / "docs"
    write_docs(docs, ["alpha", "bravo", "charlie", "delta"])
    job = files_job(tenant, docs, cleanup="full")
    total = build_plan(IngestJob.from_dict(job))["chunks"]

    first = run_ingest(job)
    assert first.has_succeeded, first.output
    assert first.execution_id == ingest_execution_id(job, 1)
    assert first.output["added"] == total == first.output["embedded"] and first.output["batches"] >= 3
    embedded_before = len(embedded_texts(log))

    with RecordingProxy(url) as proxy:  # the second run goes through a proxy that records requests
        monkeypatch.setenv("FLUX_CHROMA_URL", proxy.url)
        second = run_ingest(job)
        monkeypatch.setenv("FLUX_CHROMA_URL", url)
    assert second.has_succeeded, second.output
    assert second.execution_id == ingest_execution_id(job, 2)  # a completed job runs again as an incremental sync
    report = second.output
    assert (report["added"], report["updated"], report["deleted"], report["embedded"]) == (0, 0, 0, 0)
    assert report["skipped"] == total == report["verified"]
    assert len(embedded_texts(log)) == embedded_before  # no embeddings computed
    writes = [r.path for r in proxy.seen() if r.path.rsplit("/", 1)[-1] in ("add", "upsert", "update", "delete")]
    assert writes == []

    before = stored(raw_client, tenant)
    (docs / "bravo.md").write_text((docs / "bravo.md").read_text() + "\nA closing remark that changes the last chunk.\n")
    (docs / "delta.md").unlink()
    third = run_ingest(job)
    assert third.has_succeeded, third.output
    after = stored(raw_client, tenant)
    live = {c.id: c for _, c in iter_chunks(IngestJob.from_dict(job))}
    assert set(after) == set(live)
    new_ids = set(after) - set(before)
    assert new_ids and all(rid.startswith("notes/bravo.md#") for rid in new_ids)
    gone = set(before) - set(after)
    assert any(r.startswith("notes/delta.md#") for r in gone) and all(r.startswith(("notes/delta.md#", "notes/bravo.md#")) for r in gone)
    assert third.output["added"] == len(new_ids) and third.output["deleted"] == len(gone)
    run3_texts = {t for _, t in embedded_texts(log)[embedded_before:]}
    assert run3_texts == {live[r].text for r in new_ids}  # only the edited file's new chunks were embedded


def test_incremental_cleanup_keeps_chunks_of_vanished_documents(tmp_path: Path, tenant: str, raw_client: Any) -> None:
    docs = tmp_path / "docs"
    write_docs(docs, ["one", "two", "three"])
    job = files_job(tenant, docs, cleanup="incremental")
    assert run_ingest(job).has_succeeded
    before = stored(raw_client, tenant)
    (docs / "one.md").write_text("# one\n\nCompletely rewritten, short now.\n")
    (docs / "three.md").unlink()
    run = run_ingest(job)
    assert run.has_succeeded, run.output
    after = stored(raw_client, tenant)
    assert {r for r in after if r.startswith("notes/one.md#")} == {
        c.id for _, c in iter_chunks(IngestJob.from_dict(job)) if c.doc_key == "notes/one.md"
    }
    assert {r for r in before if r.startswith("notes/three.md#")} <= set(after)  # incremental: kept
    assert run.output["cleanup"]["mode"] == "incremental"


def test_jsonl_metadata_key_removed_really_disappears(tmp_path: Path, tenant: str, raw_client: Any) -> None:
    data = tmp_path / "faq.jsonl"
    rows = [
        {"id": "q1", "text": "How do I resume a job?", "metadata": {"topic": "ops", "draft": True}},
        {"id": "q2", "text": "Which model is pinned?", "metadata": {"topic": "models"}},
    ]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    job = {"tenant": tenant, "collection": "faq", "sources": [{"kind": "jsonl", "path": str(data)}], "cleanup": "full"}
    assert run_ingest(job).has_succeeded
    rows[0]["metadata"] = {"topic": "ops"}
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    run = run_ingest(job)
    assert run.has_succeeded, run.output
    assert run.output["updated"] == 1 and run.output["skipped"] == 1
    ((_doc, meta),) = [v for rid, v in stored(raw_client, tenant, "faq").items() if rid.startswith("q1#")]
    assert meta["topic"] == "ops" and "draft" not in meta
    assert (meta["fc_source"], meta["fc_loc"]) == (run.output["sources"][0]["id"], str(data))  # faq-<digest of the path>


def test_source_changed_under_a_running_job_fails_clearly_then_reruns(tmp_path: Path, tenant: str, raw_client: Any) -> None:
    docs = tmp_path / "docs"
    write_docs(docs, ["aa", "bb", "cc", "dd"])
    job = files_job(tenant, docs, cleanup="full")
    spec = IngestJob.from_dict(job)
    plan = build_plan(spec)
    victim = docs / "dd.md"
    last = next(ref for ref in plan["batches"] if any(c.metadata["path"] == "dd.md" for c in read_batch(spec, ref)))
    assert last["batch"] > 0

    def edit_after_first_batch(value: dict[str, Any]) -> None:
        if value.get("phase") == "batch" and value.get("status") == "done" and value["batch"] == 0:
            victim.write_text(victim.read_text().replace("dd-word3", "CHANGED"))

    first = run_ingest(job, on_progress=edit_after_first_batch)
    assert first.has_failed
    err = first.output
    assert isinstance(err, SourceChangedError)
    assert "'notes' changed" in str(err) and f"(batch {last['batch'] + 1} of" in str(err)
    assert f"batch {last['batch'] + 1} of" in json.dumps(err, cls=FluxEncoder)  # readable across a JSON hop
    unwritten = sum(ref["count"] for ref in plan["batches"][last["batch"] :])
    assert err.report["failed"] == unwritten and err.report["deleted"] == 0  # type: ignore[attr-defined]
    partial = stored(raw_client, tenant)
    assert not any(meta["path"] == "dd.md" and "CHANGED" in doc for doc, meta in partial.values())

    rerun = run_ingest(job)  # the failed run is followed by run 2, which re-plans from current content
    assert rerun.has_succeeded, rerun.output
    assert set(stored(raw_client, tenant)) == {c.id for _, c in iter_chunks(spec)}
    replayed = [t for t in rerun.output["batch_timings"] if t["execution_id"] == first.execution_id]
    assert replayed, "batches whose content did not change replay from the failed run"


def _jsonl(path: Path, rows: list[tuple[str, str]]) -> str:
    path.write_text("".join(json.dumps({"id": i, "text": t}) + "\n" for i, t in rows))
    return str(path)


def test_duplicate_ids_error_before_any_write_and_last_wins(tmp_path: Path, tenant: str, raw_client: Any) -> None:
    a = _jsonl(tmp_path / "a.jsonl", [("r1", "first source one"), ("r2", "first source two")])
    b = _jsonl(tmp_path / "b.jsonl", [("r2", "second source two"), ("r3", "second source three")])
    job = {"tenant": tenant, "collection": "dupes", "sources": [{"kind": "jsonl", "path": a}, {"kind": "jsonl", "path": b}]}
    sa, sb = (src["id"] for src in IngestJob.from_dict(job).sources)  # default ids: a-<digest>, b-<digest>

    with pytest.raises(DuplicateIdError, match=rf"'r2' in {sa}:a\.jsonl byte \d+, {sb}:b\.jsonl byte 0"):
        run_ingest(job)  # refused at submission
    run = ingest_job.run(job)  # the workflow refuses it too, in its plan task, before any write
    assert run.has_failed and isinstance(run.output, DuplicateIdError) and "last_wins" in str(run.output)
    assert f"{tenant}__dupes" not in [c.name for c in raw_client.list_collections()]

    ok = run_ingest({**job, "duplicates": "last_wins"})
    assert ok.has_succeeded, ok.output
    second_line = len(json.dumps({"id": "r1", "text": "first source one"})) + 1
    assert ok.output["duplicates"] == [
        {"id": "r2", "sources": [f"{sa}:a.jsonl byte {second_line}", f"{sb}:b.jsonl byte 0"], "kept": f"{sb}:b.jsonl byte 0"}
    ]
    docs = {rid.split("#")[0]: doc for rid, (doc, _m) in stored(raw_client, tenant, "dupes").items()}
    assert docs == {"r1": "first source one", "r2": "second source two", "r3": "second source three"}


def test_a_job_reads_its_sources_once_before_its_batches(tmp_path: Path, tenant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``run_ingest`` plans to compute the corpus digest; the job's plan task takes that plan."""
    from flux_chroma.ingest import batch

    def again(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("the plan task read the sources a second time")

    monkeypatch.setattr(batch, "build_plan", again)
    docs = tmp_path / "docs"
    write_docs(docs, ["aa", "bb"])
    run = run_ingest(files_job(tenant, docs))
    assert run.has_succeeded, run.output
    assert run.output["added"] == run.output["chunks"] > 0
