"""``parallel``: validation, units of consecutive batches, and inline concurrency.

Inline (``run_ingest``), a ``parallel=4`` job runs up to four units at once in the process.
The embedding function here is a stand-in remote API with a fixed latency per call
(``toy-latency``); the test compares exact contents with a ``parallel=1`` run, never times.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import toy_embeddings  # noqa: F401 - registers the toy embedding functions
from ingest_workflows import files_job, write_docs

from flux_chroma.errors import ConfigurationError
from flux_chroma.ingest import IngestJob, build_plan, ingest_execution_id, run_ingest
from flux_chroma.ingest.jobs import execution_base, latest_run
from flux_chroma.ingest.spec import embedding_from_spec
from flux_chroma.ingest.units import MAX_UNIT_BATCHES, shard, unit_size

HANG_GUARD = 120  # seconds; only stops a broken CLI call from hanging
LATENCY = {"name": "toy-latency", "config": {"dim": 8, "delay": 0.03}}


def _job(tenant: str, root: Path, **extra: Any) -> dict[str, Any]:
    return files_job(tenant, root, batch_size=6, embedding_function=LATENCY, cleanup="full", **extra)


def _contents(raw_client: Any, tenant: str) -> dict[str, tuple[str, dict[str, Any], list[float]]]:
    got = raw_client.get_collection(f"{tenant}__notes").get(include=["documents", "metadatas", "embeddings"])
    return {
        rid: (doc, meta, [round(float(x), 6) for x in emb])
        for rid, doc, meta, emb in zip(got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True)
    }


@pytest.mark.parametrize(
    "value",
    [0, -1, 257, 2.0, "4", True, None],
    ids=["zero", "negative", "above-256", "float", "string", "bool", "none"],
)
def test_bad_parallel_is_a_configuration_error_before_anything_exists(value: Any, tenant: str, raw_client: Any, tmp_path: Path) -> None:
    write_docs(tmp_path / "docs", ["alpha"])
    job = _job(tenant, tmp_path / "docs", parallel=value)
    with pytest.raises(ConfigurationError, match=r"parallel must be an integer from 1 to 256") as caught:
        run_ingest(job)
    assert repr(value) in str(caught.value)
    assert [c.name for c in raw_client.list_collections()] == [] or all(not c.name.startswith(tenant) for c in raw_client.list_collections())
    base = execution_base("ingest", tenant, "notes", IngestJob.from_dict(_job(tenant, tmp_path / "docs")).job_key)
    assert latest_run(base) == (0, None)


def test_parallel_is_not_part_of_the_job_key(tmp_path: Path) -> None:
    write_docs(tmp_path / "docs", ["alpha"])
    one = IngestJob.from_dict(_job("acme", tmp_path / "docs"))
    four = IngestJob.from_dict(_job("acme", tmp_path / "docs", parallel=4))
    assert four.to_dict()["parallel"] == 4 and "parallel" not in one.to_dict()
    assert four.work_dict() == one.to_dict()  # what the tasks hash: the same batches replay
    assert ingest_execution_id(one) == ingest_execution_id(four)
    assert IngestJob.from_dict(four.to_dict()) == four


@pytest.mark.parametrize(("batches", "parallel"), [(1, 4), (7, 1), (7, 3), (40, 4), (1000, 2), (5, 256)])
def test_units_are_consecutive_batches_covering_the_plan(batches: int, parallel: int) -> None:
    refs = [{"batch": b} for b in range(batches)]
    units = shard(refs, parallel)
    assert [r for u in units for r in u["batches"]] == refs
    assert [u["unit"] for u in units] == list(range(len(units))) and {u["of"] for u in units} == {len(units)}
    size = unit_size(batches, parallel)
    assert all(len(u["batches"]) <= size for u in units)
    if parallel > 1:
        assert size <= MAX_UNIT_BATCHES and (len(units) >= parallel or len(units) == batches)
    else:
        assert len(units) == 1


def test_parallel_4_inline_gives_exactly_what_parallel_1_gives(tmp_path: Path, tenant: str, raw_client: Any) -> None:
    write_docs(tmp_path / "docs", [f"doc{i:02d}" for i in range(24)], words=60)
    plan = build_plan(IngestJob.from_dict(_job(tenant, tmp_path / "docs")))
    assert len(plan["batches"]) >= 16, "the corpus must make many batches"
    ef = embedding_from_spec(LATENCY)  # the process-wide instance the tasks use
    ef.max_in_flight = 0

    sequential = run_ingest(_job(f"{tenant}s", tmp_path / "docs"))
    assert sequential.has_succeeded, sequential.output
    assert ef.max_in_flight == 1

    parallel = run_ingest(_job(tenant, tmp_path / "docs", parallel=4))
    assert parallel.has_succeeded, parallel.output
    assert ef.max_in_flight >= 2  # units really overlapped (their calls were in flight together)

    assert _contents(raw_client, tenant) == _contents(raw_client, f"{tenant}s")
    one, four = sequential.output, parallel.output
    for key in ("docs", "chunks", "batches", "added", "embedded", "verified", "failed", "deleted"):
        assert one[key] == four[key], key
    assert four["added"] == plan["chunks"] and four["failed"] == 0
    assert [t["batch"] for t in four["batch_timings"]] == list(range(len(plan["batches"])))
    assert all(t["worker"] is None and t["pid"] == os.getpid() for t in four["batch_timings"])
    assert {t["execution_id"] for t in four["batch_timings"]} == {parallel.execution_id}

    again = run_ingest(_job(tenant, tmp_path / "docs", parallel=4))  # an incremental sync: all skipped
    assert again.has_succeeded and (again.output["added"], again.output["skipped"]) == (0, plan["chunks"])


def test_cli_parallel_option(url: str, tenant: str, tmp_path: Path) -> None:
    write_docs(tmp_path / "docs", ["alpha", "bravo", "charlie"], words=40)
    env = {**os.environ}
    base = [sys.executable, "-m", "flux_chroma.cli", "ingest", str(tmp_path / "docs"), "-c", "notes", "--url", url, "--tenant", tenant]
    bad = subprocess.run([*base, "--parallel", "0"], capture_output=True, text=True, env=env, timeout=HANG_GUARD, check=False)
    assert bad.returncode == 2 and "--parallel 0" in bad.stderr and "Traceback" not in bad.stderr
    good = subprocess.run(
        [*base, "--parallel", "3", "--batch-size", "2", "--chunk-size", "200", "--chunk-overlap", "20", "--json"],
        capture_output=True, text=True, env=env, timeout=HANG_GUARD, check=False,
    )  # fmt: skip
    assert good.returncode == 0, good.stderr
    report = json.loads(good.stdout)
    assert report["failed"] == 0 and report["added"] == report["chunks"] > 2


def test_stall_clock_trusts_only_the_event_log_and_polls_at_growing_intervals() -> None:
    """The parent's wait for a child (cluster): what counts as progress, when a stall is declared.

    Times are given explicitly (the clock's ``now``), so nothing here depends on the machine.
    """
    from flux_chroma.ingest.dispatch import POLL_FIRST, POLL_MAX, _poll_delays, _StallClock

    running = {"state": "RUNNING", "current_worker": "w1"}
    clock = _StallClock(unit_timeout=10.0, now=0.0)
    assert not clock.saw(running, False, 1.0)  # first sight: progress
    assert not clock.wants_detail(2.0) and clock.wants_detail(2.5)  # events read every timeout/4
    assert not clock.saw({**running, "events": [1, 2]}, True, 2.5)  # first event count: progress
    assert not clock.saw(running, False, 12.0)  # silence, but a cheap status never declares a stall
    assert clock.wants_detail(12.6)
    assert not clock.saw({**running, "events": [1, 2, 3]}, True, 12.6)  # a new event: progress
    assert not clock.saw({**running, "events": [1, 2, 3]}, True, 22.0)  # 9.4 s: not yet
    assert clock.saw({**running, "events": [1, 2, 3]}, True, 22.7)  # 10.1 s without an event
    moved = _StallClock(unit_timeout=10.0, now=0.0)
    moved.saw({**running, "events": [1]}, True, 0.0)
    assert not moved.saw({"state": "RUNNING", "current_worker": "w2", "events": [1]}, True, 11.0)  # new worker
    delays = list(itertools.islice(_poll_delays(), 40))
    assert delays[0] == POLL_FIRST and delays[-1] == POLL_MAX
    assert all(a <= b <= POLL_MAX for a, b in itertools.pairwise(delays))
