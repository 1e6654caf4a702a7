"""examples/scheduled_sync.py on a real Flux server: the interval schedule the server creates
at registration runs the ingestion job again and again (the second run skips every chunk),
and a failed run fires the hook that reports it."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cluster_stack import Fleet
from ingest_workflows import write_docs
from scheduled_sync import register_for

from bench.fleet import LIVENESS
from flux_chroma import ChromaServer
from flux_chroma.local_fleet import flux_cli as flux

pytestmark = pytest.mark.slow

HANG_GUARD = 300.0  # seconds; only stops a broken test from hanging


@pytest.fixture(scope="module")
def fleet(chroma_server: ChromaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("schedule-fleet")
    # The scheduler looks for due schedules every FLUX_SCHEDULING__POLL_INTERVAL seconds (30 by default).
    # One worker: Flux's default dispatch mode (poll). In event mode (the fleet's) flux-core 0.87's
    # scheduler and hooks do not wake the dispatcher, so each scheduled run and each hook's run
    # waited for its 15 s fallback tick.
    server = {**LIVENESS, "FLUX_SCHEDULING__POLL_INTERVAL": "1", "FLUX_DISPATCH__MODE": "poll"}
    stack = Fleet(work, chroma_server.url, work / "embedded.jsonl", liveness=server)
    try:
        yield stack.start(1, register=False)
    finally:
        # The schedule keeps starting runs: SIGKILL the worker (its process group, the run in
        # flight too) rather than let a SIGTERM drain wait out that run.
        if "worker-1" in stack.processes.pids():
            stack.kill("worker-1")
        stack.stop()


def _runs(fleet: Fleet, namespace: str) -> list[dict[str, Any]]:
    response = httpx.get(f"{fleet.url}/workflows/{namespace}/sync/executions", params={"limit": 100}, timeout=10)
    response.raise_for_status()
    return [fleet.execution(e["execution_id"]) for e in response.json()["executions"]]


def test_the_schedule_runs_the_sync_twice_the_second_skips_everything_and_a_failure_is_reported(
    fleet: Fleet, tenant: str, tmp_path: Path
) -> None:
    docs, failures = tmp_path / "docs", tmp_path / "failures.jsonl"
    write_docs(docs, ["alpha", "bravo", "charlie"])
    for copy in register_for(tenant, str(docs), 3, str(failures), tmp_path / "kb"):  # report.py, then sync.py
        flux(["workflow", "register", str(copy), "--server-url", fleet.url], fleet.server_env)
    namespace = f"kb-{tenant}"
    schedules = json.loads(flux(["schedule", "list", "--format", "json", "--server-url", fleet.url], fleet.server_env))
    assert any(s.get("name") == "sync_auto" for s in schedules), schedules

    deadline = time.monotonic() + HANG_GUARD
    while len(done := [r for r in _runs(fleet, namespace) if r["state"] == "COMPLETED"]) < 2:
        assert time.monotonic() < deadline, _runs(fleet, namespace)
        time.sleep(1)
    reports = sorted((r["output"] for r in done), key=lambda o: -o["added"])
    first, second = reports[0], reports[-1]
    # Embedded now or found in the host's embedding cache (other tests may have embedded these texts).
    assert first["added"] == first["chunks"] > 0 and first["embedded"] + first["cache_hits"] == first["chunks"]
    assert second["chunks"] == first["chunks"] and second["skipped"] == second["chunks"]
    assert (second["added"], second["updated"], second["deleted"], second["embedded"]) == (0, 0, 0, 0)

    shutil.rmtree(docs)  # the next runs fail: the folder is gone
    while not failures.exists():
        assert time.monotonic() < deadline, [r["state"] for r in _runs(fleet, namespace)]
        time.sleep(1)
    line = json.loads(failures.read_text().splitlines()[0])
    failed = fleet.execution(line["execution_id"])
    assert failed["state"] == "FAILED" and failed["workflow_name"] == "sync"
    assert line["tenant"] == tenant and line["workflow"] == f"{namespace}/sync" and line["state"] == "failed"
