"""``parallel``: validation, units of consecutive batches, and inline concurrency.

Inline (``run_ingest``), a ``parallel=4`` job runs up to four units at once in the process.
The embedding function here is a stand-in remote API with a fixed latency per call
(``toy-latency``); the test compares exact contents with a ``parallel=1`` run, never times.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import toy_embeddings  # noqa: F401 - registers the toy embedding functions
from cli_inproc import run_cli
from flux import ExecutionContext, workflow
from ingest_workflows import files_job, write_docs

from flux_chroma.errors import ConfigurationError
from flux_chroma.ingest import IngestJob, build_plan, ingest_execution_id, run_ingest
from flux_chroma.ingest.jobs import execution_base, latest_run
from flux_chroma.ingest.spec import embedding_from_spec
from flux_chroma.ingest.units import MAX_UNIT_BATCHES, shard, unit_size

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
    base = ["ingest", str(tmp_path / "docs"), "-c", "notes", "--url", url, "--tenant", tenant]
    bad = run_cli(*base, "--parallel", "0")
    assert bad.returncode == 2 and "--parallel 0" in bad.stderr and "Traceback" not in bad.stderr
    good = run_cli(*base, "--parallel", "3", "--batch-size", "2", "--chunk-size", "200", "--chunk-overlap", "20", "--json")
    assert good.returncode == 0, good.stderr
    report = json.loads(good.stdout)
    assert report["failed"] == 0 and report["added"] == report["chunks"] > 2


@workflow
async def start_one_unit(ctx: ExecutionContext[dict[str, Any]]) -> str:
    """Start a cluster unit the way a parallel job does (``dispatch._start``)."""
    from flux_chroma.ingest.dispatch import _start

    return await _start({"unit": {"unit": 7}}, float(ctx.input["unit_timeout"]))


def test_cluster_job_gives_up_on_a_silent_flux_server_readably(url: str) -> None:
    """A parallel job's calls to its Flux server (cluster), with no server at the URL.

    Waiting for a unit: a poll without an answer is only silence; after ``unit_timeout``
    seconds of it the wait fails naming the server. Starting a unit: Flux's own retry options
    retry the call, then the failure names the server and the last error. A server that
    answers (here Chroma's, with a 404) is not silent: that error is raised at once.
    """
    from flux.config import Configuration
    from flux.domain.events import ExecutionEventType

    from flux_chroma.errors import FluxChromaError
    from flux_chroma.ingest.dispatch import _await_unit

    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        refused = f"http://127.0.0.1:{sock.getsockname()[1]}"
    Configuration.get().override(workers={"server_url": refused})
    try:
        started = time.monotonic()
        with pytest.raises(FluxChromaError, match="did not answer for more than 1 s") as caught:
            asyncio.run(_await_unit("e1", 3, 1.0))
        assert time.monotonic() - started >= 1.0  # it waited out the whole unit_timeout
        assert refused in str(caught.value) and "unit 3" in str(caught.value) and "submit the job again" in str(caught.value)

        run = start_one_unit.run({"unit_timeout": 1})
        assert run.has_failed and isinstance(run.output, FluxChromaError), run.output
        text = str(run.output)
        assert f"the Flux server at {refused} did not start unit 7 in 2 attempts" in text
        assert "Could not connect" in text and "submit the job again" in text
        assert [e.value["current_attempt"] for e in run.events if e.type == ExecutionEventType.TASK_RETRY_FAILED] == [0, 1]  # first call, one retry

        Configuration.get().override(workers={"server_url": url})
        with pytest.raises(httpx.HTTPStatusError):  # an answer, not silence
            asyncio.run(_await_unit("e1", 3, 60.0))
    finally:
        Configuration.get().reset()
