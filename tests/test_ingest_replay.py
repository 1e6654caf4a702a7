"""A job that FAILED (retries exhausted while Chroma was unreachable) is re-run and replays.

The job talks to the real server through a recording proxy. After batch 1 commits, the
proxy's upstream is pointed at a closed port: every request now fails like a dead server,
Flux's retries run out, and the execution FAILS. Re-submitting the job starts run 2, which
replays batches 0 and 1 from run 1's log (no embedding, no write; one ids-only request asks
the server whether it still holds them) and writes the rest.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from ingest_workflows import embedded_texts, files_job, write_docs
from recording_proxy import RecordingProxy

from flux_chroma.errors import ChromaUnavailableError
from flux_chroma.ingest import IngestJob, build_plan, ingest_execution_id, read_batch, run_ingest
from flux_chroma.ingest.jobs import JobBusyError, _job_lock, execution_base


def test_failed_job_rerun_replays_its_committed_batches(
    tmp_path: Path, tenant: str, url: str, raw_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "embedded.jsonl"
    monkeypatch.setenv("FC_EMBED_LOG", str(log))
    docs = tmp_path / "docs"
    write_docs(docs, ["one", "two", "three", "four"])
    job = files_job(tenant, docs, cleanup="full", options={"retry_max_attempts": 1, "retry_delay": 0})
    spec = IngestJob.from_dict(job)
    batches = [read_batch(spec, ref) for ref in build_plan(spec)["batches"]]
    assert len(batches) >= 4

    with RecordingProxy(url) as proxy:
        monkeypatch.setenv("FLUX_CHROMA_URL", proxy.url)

        def outage_after_batch_1(value: dict[str, Any]) -> None:
            if value.get("phase") == "batch" and value.get("status") == "done" and value["batch"] == 1:
                proxy.upstream = "http://127.0.0.1:9"  # nothing listens there: requests now fail

        first = run_ingest(job, on_progress=outage_after_batch_1)
        assert first.has_failed
        assert isinstance(first.output, ChromaUnavailableError), first.output
        assert "stopped after 2 of" in str(first.output) and "(batch 3 of" in str(first.output) and "2 attempts" in str(first.output)
        assert raw_client.get_collection(f"{tenant}__notes").count() == len(batches[0]) + len(batches[1])

        proxy.upstream = url  # the server is back
        mark, embedded_mark = len(proxy.seen()), len(embedded_texts(log))
        second = run_ingest(job)
        requests = proxy.seen()[mark:]

    assert second.has_succeeded, second.output
    assert (first.execution_id, second.execution_id) == (ingest_execution_id(job, 1), ingest_execution_id(job, 2))
    writers = {t["batch"]: t["execution_id"] for t in second.output["batch_timings"]}
    assert writers == {b: first.execution_id if b < 2 else second.execution_id for b in range(len(batches))}
    replayed_ids = [c.id for chunks in batches[:2] for c in chunks]
    writes = b"".join(r.body for r in requests if not r.path.endswith("/get"))
    assert not any(json.dumps(i).encode() in writes for i in replayed_ids)  # never re-sent
    checks = [r for r in requests if r.path.endswith("/get") and json.dumps(replayed_ids[0]).encode() in r.body]
    assert len(checks) == 1 and b'"include":[]' in checks[0].body.replace(b" ", b"")  # one ids-only existence check
    rerun_texts = {t for _, t in embedded_texts(log)[embedded_mark:]}
    assert rerun_texts == {c.text for chunks in batches[2:] for c in chunks}  # nothing of batches 0-1 re-embedded
    stored = raw_client.get_collection(f"{tenant}__notes").get(include=[])
    assert sorted(stored["ids"]) == sorted(c.id for chunks in batches for c in chunks)
    assert second.output["added"] == sum(len(b) for b in batches) and second.output["failed"] == 0


def test_a_job_running_in_another_live_process_is_not_started_twice(tenant: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write_docs(docs, ["solo"])
    job = IngestJob.from_dict(files_job(tenant, docs))
    base = execution_base("ingest", job.tenant, job.collection, job.job_key)
    with _job_lock(base), pytest.raises(JobBusyError, match="already running in process"):
        run_ingest(job)
