"""SIGKILL a real ingestion process mid-job, twice, and resume it by execution id each time.

Process 1 is killed while embedding batch 2 (before its upsert); process 2 resumes, redoes
batch 2, writes batches 3 and 4, and is killed after batch 4 was written and verified but
before Flux checkpointed it; process 3 resumes and finishes. Every embedded text is logged
by the child's embedding function, so the test proves which process embedded what.
Batches are embedded and written in order, so "killed while embedding batch 2" means after
batch 1 committed.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from ingest_workflows import assert_stored_exactly, embedded_texts

from flux_chroma.ingest import IngestJob, build_plan, ingest_execution_id, read_batch

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent
WORDS = ["river", "stone", "cloud", "ember", "lantern", "harbor", "meadow", "signal", "copper", "willow", "orbit", "canyon", "thistle", "quartz"]


def write_corpus(root: Path, files: int, words: int, seed: int = 7) -> None:
    rng = random.Random(seed)
    root.mkdir(parents=True, exist_ok=True)
    for i in range(files):
        (root / f"note-{i:02d}.md").write_text(" ".join(rng.choice(WORDS) + str(rng.randint(0, 99)) for _ in range(words)))


def _start(spec: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(HERE / "ingest_workflows.py"), str(spec)],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _kill_when_marked(proc: subprocess.Popen[str], marker: Path) -> None:
    deadline = time.monotonic() + 240  # a guard against a hung child, not a timing assertion
    while not marker.exists():
        if proc.poll() is not None:
            out, err = proc.communicate()
            pytest.fail(f"child exited ({proc.returncode}) before reaching the kill point:\n{out}\n{err[-3000:]}")
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail("child never reached the kill point")
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL


def _batch_events(eid: str) -> dict[str, list[Any]]:
    from flux.context_managers import ContextManager
    from flux.domain.events import ExecutionEventType

    ctx = ContextManager.create().get(eid)
    done: dict[str, list[Any]] = {}
    for event in ctx.events:
        if event.type == ExecutionEventType.TASK_COMPLETED and event.name.startswith("ingest_batch"):
            done.setdefault(event.source_id, []).append(event.value.metadata["value"])
    return done


def test_sigkill_mid_job_then_resume_by_execution_id_in_new_processes(tmp_path: Path, tenant: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    write_corpus(tmp_path / "docs", files=16, words=260)
    job = IngestJob.from_dict(
        {
            "tenant": tenant,
            "collection": "handbook",
            "sources": [{"kind": "files", "path": str(tmp_path / "docs")}],
            "chunking": {"size": 160, "overlap": 30, "unit": "chars"},
            "batch_size": 40,
            "cleanup": "full",
            "embedding_function": {"name": "counting-default"},
        }
    )
    spec = tmp_path / "job.json"
    spec.write_text(json.dumps(job.to_dict()))
    plan = build_plan(job)
    batches = [read_batch(job, ref) for ref in plan["batches"]]
    assert len(batches) >= 7, "the corpus must make a multi-batch job"
    text_batch = {c.text: b for b, chunks in enumerate(batches) for c in chunks}
    eid = ingest_execution_id(job)
    log, marker = tmp_path / "embedded.jsonl", tmp_path / "marker"
    common = {"FC_EMBED_LOG": str(log), "FC_MARKER": str(marker)}

    # Process 1: killed inside batch 2's embedding (its 3rd embedding call).
    first = _start(spec, {**common, "FC_BLOCK_EMBED_CALL": "3"})
    _kill_when_marked(first, marker)
    marker.unlink()
    # Process 2: resumes; killed after batch 4 was upserted and verified, before its checkpoint.
    second = _start(spec, {**common, "FC_BLOCK_AFTER_BATCH": "4"})
    _kill_when_marked(second, marker)
    assert raw_client.get_collection(f"{tenant}__handbook").count() == sum(len(b) for b in batches[:5])
    # Process 3: resumes and finishes.
    third = _start(spec, common)
    out, err = third.communicate(timeout=300)
    assert third.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["execution_id"] == eid and result["succeeded"]

    # Exact final contents.
    expected = {c.id: c for chunks in batches for c in chunks}
    assert_stored_exactly(raw_client, f"{tenant}__handbook", expected, job.sources[0])

    # Flux's log: one completion per batch, written by the process that finished it.
    done = _batch_events(eid)
    assert len(done) == len(batches) and all(len(v) == 1 for v in done.values())
    writer_pid = {r[0]["batch"]: r[0]["pid"] for r in done.values()}
    pids = [first.pid, second.pid, third.pid]
    assert writer_pid == {b: pids[0] if b < 2 else pids[1] if b < 4 else pids[2] for b in range(len(batches))}

    # Who embedded what: no finished batch was embedded again.
    by_pid: dict[int, set[int]] = {}
    for pid, text in embedded_texts(log):
        by_pid.setdefault(pid, set()).add(text_batch[text])
    assert by_pid[first.pid] == {0, 1, 2}  # batch 2 was embedded, then the process died
    assert sum(1 for pid, _ in embedded_texts(log) if pid == first.pid) == sum(len(b) for b in batches[:3])
    assert by_pid[second.pid] == {2, 3, 4}  # process 2 redid batch 2; 0 and 1 replayed
    assert by_pid[third.pid] == set(range(5, len(batches)))  # batch 4 was already stored: skipped
    assert set(by_pid) == set(pids)

    report = result["output"]
    skipped = len(batches[4])
    assert report["chunks"] == len(expected) and report["failed"] == 0 and report["deleted"] == 0
    assert report["skipped"] == skipped  # the interrupted batch 4 redone idempotently
    assert report["added"] == len(expected) - skipped and report["verified"] == len(expected)
