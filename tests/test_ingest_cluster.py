"""One ingestion job across a Flux fleet: PostgreSQL-backed Flux server, 3 workers, real processes.

The job (``flux-chroma/ingest_job`` with ``parallel=3``) runs on one worker and starts its
units as ``flux-chroma/ingest_unit`` child executions, which the server places on any
worker. Workers are SIGKILLed (their whole process group) mid-job: the job still converges
to exactly the planned contents (Flux reclaims a dead worker's executions), and no chunk
already stored is embedded again. A unit that makes no progress for ``unit_timeout`` fails the
job with an error naming it; re-submitted, the job completes. The
embedding function is the toy model with a log (``counting-toy``): the model is not the
point here, the placement and the faults are.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_stack import Fleet
from ingest_workflows import assert_stored_exactly, embedded_texts, write_docs

from flux_chroma import ChromaServer
from flux_chroma.errors import ConfigurationError, FluxChromaError
from flux_chroma.ingest import IngestJob, build_plan, read_batch

pytestmark = pytest.mark.slow

HANG_GUARD = 240.0  # seconds; only stops a broken test from hanging
SLOW = {"name": "counting-toy", "config": {"delay": 0.4}}  # units last long enough to be killed mid-way


@pytest.fixture(scope="module")
def fleet(chroma_server: ChromaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("fleet")
    stack = Fleet(work, chroma_server.url, work / "embedded.jsonl")
    try:
        yield stack.start(3, register=False)
    finally:
        stack.stop()


@pytest.fixture
def registered(fleet: Fleet) -> Fleet:
    fleet.register()
    return fleet


def _job(tenant: str, root: Path, url: str, **extra: Any) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "collection": "notes",
        "sources": [{"kind": "files", "path": str(root), "id": "notes"}],
        "chunking": {"size": 120, "overlap": 20, "unit": "chars"},
        "embedding_function": {"name": "counting-toy"},
        "cleanup": "full",
        "parallel": 3,
        "options": {"url": url},
        **extra,
    }


def _expected(job: dict[str, Any]) -> dict[str, Any]:
    spec = IngestJob.from_dict(job)
    return {c.id: c for ref in build_plan(spec)["batches"] for c in read_batch(spec, ref)}


def _assert_exact(raw_client: Any, tenant: str, job: dict[str, Any]) -> dict[str, Any]:
    expected = _expected(job)
    assert_stored_exactly(raw_client, f"{tenant}__notes", expected, IngestJob.from_dict(job).sources[0])
    return expected


def _stored_texts(raw_client: Any, tenant: str) -> set[str]:
    try:
        got = raw_client.get_collection(f"{tenant}__notes").get(include=["documents"])
    except Exception:  # noqa: BLE001 - not created yet
        return set()
    return set(got["documents"])


def _texts_since(fleet: Fleet, mark: int) -> list[str]:
    return [text for _, text in embedded_texts(fleet.embed_log)[mark:]]


def _wait(what: str, probe: Any, guard: float = HANG_GUARD) -> Any:
    deadline = time.monotonic() + guard
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def test_unregistered_unit_workflow_is_named_in_the_error(fleet: Fleet) -> None:
    from flux.config import Configuration

    from flux_chroma.ingest.dispatch import _check_dispatch

    Configuration.get().override(workers={"server_url": fleet.url})
    try:
        with pytest.raises(ConfigurationError, match=r"flux-chroma/ingest_unit is not registered") as caught:
            asyncio.run(_check_dispatch())
    finally:
        Configuration.get().reset()
    assert "flux workflow register" in str(caught.value)


def test_parallel_job_is_written_by_several_workers_exactly(registered: Fleet, tmp_path: Path, tenant: str, raw_client: Any) -> None:
    fleet = registered
    write_docs(tmp_path / "docs", [f"d{i:03d}" for i in range(115)], words=120)
    job = _job(tenant, tmp_path / "docs", fleet.chroma_url, batch_size=60)
    before = len(embedded_texts(fleet.embed_log))
    execution = fleet.wait_terminal(fleet.submit("flux-chroma/ingest_job", job), HANG_GUARD)
    assert execution["state"] == "COMPLETED", execution.get("output")
    report = execution["output"]
    expected = _assert_exact(raw_client, tenant, job)
    assert report["chunks"] == len(expected) >= 2000 and report["added"] == len(expected) and report["failed"] == 0
    timings = report["batch_timings"]
    assert [t["batch"] for t in timings] == list(range(report["batches"]))
    assert len({t["worker"] for t in timings}) >= 2  # the fleet wrote it, not one worker
    assert all(t["execution_id"] != execution["execution_id"] and t["pid"] > 0 for t in timings)
    children = fleet.children(tenant)
    assert {c["execution_id"] for c in children} == {t["execution_id"] for t in timings}
    assert all(c["state"] == "COMPLETED" for c in children)
    assert report["cleanup"] == {"mode": "full", "scanned": len(expected), "deleted": 0}
    texts = [text for _, text in embedded_texts(fleet.embed_log)[before:]]
    assert sorted(texts) == sorted(c.text for c in expected.values())  # each chunk embedded once


def _unit_victim(fleet: Fleet, parent: str, tenant: str) -> dict[str, Any] | None:
    """A running unit on a worker other than the job's, with batches done AND >= 2 to do."""
    owner = fleet.execution(parent).get("current_worker")
    for child in fleet.children(tenant):
        if child["state"] == "RUNNING" and child["current_worker"] not in ("", owner):
            detail = fleet.execution(child["execution_id"], detailed=True)
            done = sum(1 for e in detail["events"] if e["type"] == "TASK_COMPLETED")
            if 1 <= done <= len(detail["input"]["unit"]["batches"]) - 2:
                return child
    return None


def test_sigkill_of_a_unit_worker_mid_job_converges(registered: Fleet, tmp_path: Path, tenant: str, raw_client: Any) -> None:
    fleet = registered
    write_docs(tmp_path / "docs", [f"d{i:03d}" for i in range(60)], words=120)
    # unit_timeout above the fleet's reclaim time (heartbeat_timeout 8 s + eviction_grace_period 4 s)
    job = _job(tenant, tmp_path / "docs", fleet.chroma_url, batch_size=20, options={"url": fleet.chroma_url, "unit_timeout": 60})
    job["embedding_function"] = SLOW
    parent = fleet.submit("flux-chroma/ingest_job", job)
    lost = _wait("a unit running on a worker other than the parent's", lambda: _unit_victim(fleet, parent, tenant))
    fleet.kill(lost["current_worker"])
    stored = _stored_texts(raw_client, tenant)  # committed so far...
    mark = len(embedded_texts(fleet.embed_log))  # ...and what was embedded up to now
    fleet.start_worker("worker-4")  # keep three workers for the next tests (it starts while Flux reclaims)
    execution = fleet.wait_terminal(parent, HANG_GUARD)
    assert execution["state"] == "COMPLETED", execution.get("output")
    expected = _assert_exact(raw_client, tenant, job)
    assert execution["output"]["failed"] == 0 and execution["output"]["chunks"] == len(expected)
    # Flux reclaimed the dead worker's execution: the SAME child ran again on a live worker,
    # replaying the batches it had finished; the job started no second child for the unit.
    after = fleet.execution(lost["execution_id"])
    children = fleet.children(tenant)
    print(f"lost unit {after['input']['unit']['unit']}: {after['state']} on {after['current_worker']}; children {children}")
    assert after["state"] == "COMPLETED" and after["current_worker"] not in ("", lost["current_worker"])
    units = [fleet.execution(c["execution_id"])["input"]["unit"]["unit"] for c in children]
    assert sorted(units) == sorted(set(units))  # one child per unit
    writers = [t["worker"] for t in execution["output"]["batch_timings"] if t["execution_id"] == lost["execution_id"]]
    assert writers[0] == lost["current_worker"] and writers[-1] == after["current_worker"]
    assert set(_texts_since(fleet, mark)) & stored == set()  # nothing committed before the kill embedded again
    fleet.wait_online(["worker-4"])


def test_a_stalled_unit_fails_the_job_readably_and_resubmit_completes(
    registered: Fleet, tmp_path: Path, tenant: str, raw_client: Any
) -> None:
    """A unit worker frozen (SIGSTOP) for longer than unit_timeout: the job cancels the unit
    and fails naming it; re-submitted, it completes exactly. The fleet would reclaim the frozen
    worker's executions after 12 s: unit_timeout (6 s) is shorter, so the stall rule acts first."""
    fleet = registered
    write_docs(tmp_path / "docs", [f"d{i:03d}" for i in range(60)], words=120)
    job = _job(tenant, tmp_path / "docs", fleet.chroma_url, batch_size=20, options={"url": fleet.chroma_url, "unit_timeout": 6})
    job["embedding_function"] = SLOW
    first = fleet.submit("flux-chroma/ingest_job", job)
    stuck = _wait("a unit running on a worker other than the parent's", lambda: _unit_victim(fleet, first, tenant))
    frozen = next(proc for name, proc, _ in fleet.stack.procs if name == stuck["current_worker"])
    os.killpg(frozen.pid, signal.SIGSTOP)
    try:
        failed = fleet.wait_terminal(first, HANG_GUARD)
    finally:
        fleet.kill(stuck["current_worker"])  # SIGKILL ends a stopped process too
    assert failed["state"] == "FAILED", failed.get("output")
    message = json.dumps(failed["output"])
    print(message)
    # The frozen worker's unit, or (on a loaded machine) another unit that also went silent;
    # frozen right after claiming a unit, the worker leaves it CLAIMED rather than RUNNING.
    assert re.search(r"unit \d+ \(execution \w+, (RUNNING|CLAIMED) on worker-\d\) made no progress", message), message
    assert "for more than 6 s (unit_timeout), so it was cancelled" in message and "submit the job again" in message
    assert fleet.execution(stuck["execution_id"])["state"] in ("CANCELLING", "CANCELLED")
    fleet.start_worker("worker-5")  # keep three workers for the next tests (it starts meanwhile)
    stored, mark = _stored_texts(raw_client, tenant), len(embedded_texts(fleet.embed_log))

    second = fleet.wait_terminal(fleet.submit("flux-chroma/ingest_job", job), HANG_GUARD)
    assert second["state"] == "COMPLETED", json.dumps(second.get("output"))[:2000]
    expected = _assert_exact(raw_client, tenant, job)
    assert stored and len(stored) < len(expected)  # the stall really was mid-job
    assert set(_texts_since(fleet, mark)) & stored == set()  # nothing committed was embedded again
    assert second["output"]["skipped"] >= len(stored)
    fleet.wait_online(["worker-5"])


def test_sigkill_of_the_parents_worker_then_resubmit_resumes(registered: Fleet, tmp_path: Path, tenant: str, raw_client: Any) -> None:
    fleet = registered
    # 22 batches in 11 units of 2: the kill comes after the first committed unit, with most to do
    write_docs(tmp_path / "docs", [f"d{i:03d}" for i in range(24)], words=120)
    job = {**_job(tenant, tmp_path / "docs", fleet.chroma_url, batch_size=20), "embedding_function": SLOW}
    first = fleet.submit("flux-chroma/ingest_job", job)
    _wait("a committed unit", lambda: any(c["state"] == "COMPLETED" for c in fleet.children(tenant)))
    owner = fleet.execution(first)["current_worker"]
    stored = _stored_texts(raw_client, tenant)  # committed before the kill...
    mark = len(embedded_texts(fleet.embed_log))  # ...and what was embedded up to now
    fleet.kill(owner)

    second = fleet.wait_terminal(fleet.submit("flux-chroma/ingest_job", job), HANG_GUARD)
    assert second["state"] == "COMPLETED", json.dumps(second.get("output"))[:2000]
    expected = _assert_exact(raw_client, tenant, job)
    assert second["output"]["failed"] == 0 and second["output"]["chunks"] == len(expected)
    assert stored and len(stored) < len(expected)  # the kill really was mid-job
    again = {text for _, text in embedded_texts(fleet.embed_log)[mark:]} & stored
    assert again == set()  # nothing committed before the kill was embedded again
    assert second["output"]["skipped"] >= len(stored)


def _await_from_here(fleet: Fleet, child: dict[str, Any], unit_timeout: float) -> dict[str, Any]:
    """The job's wait for a unit (``_await_unit``), run in this process against the fleet."""
    from flux.config import Configuration

    from flux_chroma.ingest.dispatch import _await_unit

    Configuration.get().override(workers={"server_url": fleet.url})
    try:
        return asyncio.run(_await_unit(child["execution_id"], int(child["input"]["unit"]["unit"]), unit_timeout))
    finally:
        Configuration.get().reset()


def test_await_unit_returns_a_childs_receipts_and_gives_up_a_stalled_one(
    registered: Fleet, tmp_path: Path, tenant: str
) -> None:
    fleet = registered
    write_docs(tmp_path / "docs", [f"d{i:03d}" for i in range(60)], words=120)
    # Each embedding call sleeps 3 s with no event meanwhile: far longer than the 1 s
    # unit_timeout below, even when a loaded machine makes each status read slow.
    job = {
        **_job(tenant, tmp_path / "docs", fleet.chroma_url, batch_size=20),
        "embedding_function": {"name": "counting-toy", "config": {"delay": 3.0}},
    }
    parent = fleet.submit("flux-chroma/ingest_job", job)

    def two_running() -> list[dict[str, Any]] | None:  # units with >= 2 batches still to write
        running = []
        for child in fleet.children(tenant):
            if child["state"] == "RUNNING":
                detail = fleet.execution(child["execution_id"], detailed=True)
                done = sum(1 for e in detail["events"] if e["type"] == "TASK_COMPLETED")
                if done <= len(detail["input"]["unit"]["batches"]) - 2:
                    running.append(detail)
        return running[:2] if len(running) >= 2 else None

    stalled, watched = _wait("two units running", two_running)
    # A unit_timeout shorter than one batch: the wait, which only trusts the event log,
    # cancels the child and says so.
    with pytest.raises(FluxChromaError, match=r"made no progress \(no new event, state or worker\)") as caught:
        _await_from_here(fleet, stalled, 1.0)
    assert stalled["execution_id"] in str(caught.value) and "submit the job again" in str(caught.value)
    assert _wait(
        "the stalled child cancelled",
        lambda: fleet.execution(stalled["execution_id"])["state"] in ("CANCELLING", "CANCELLED"),
    )
    # Polled while it runs, to its end: the receipts the child returned (cheap status calls
    # carry the output).
    done = _await_from_here(fleet, watched, 120.0)
    final = fleet.execution(watched["execution_id"], detailed=True)
    assert final["state"] == "COMPLETED" and done == final["output"]
    assert len(done["receipts"]) == len(watched["input"]["unit"]["batches"])
    assert fleet.wait_terminal(parent, HANG_GUARD)["state"] == "FAILED"  # one of its units was cancelled


def test_worker_without_server_url_fails_readably(registered: Fleet, tmp_path: Path, tenant: str) -> None:
    fleet = registered
    for name in fleet.online():
        fleet.kill(name)
    fleet.start_worker("lonely", server_url=False)
    fleet.wait_online(["lonely"])
    write_docs(tmp_path / "docs", ["alpha", "bravo"], words=60)
    execution = fleet.wait_terminal(fleet.submit("flux-chroma/ingest_job", _job(tenant, tmp_path / "docs", fleet.chroma_url, batch_size=4)), HANG_GUARD)
    assert execution["state"] == "FAILED"
    message = json.dumps(execution["output"])
    assert "FLUX_WORKERS__SERVER_URL" in message and "no Flux server answers" in message
