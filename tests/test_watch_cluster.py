"""``flux-chroma watch`` against real jobs on a PostgreSQL-backed Flux fleet (2 workers).

The command runs as its own OS process, reading the Flux server over HTTP while the job runs:
one job that completes, one that fails mid-way (its sources are edited after its first
batch was written), and an execution id the server does not know.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_stack import Fleet
from ingest_workflows import write_docs

from flux_chroma import ChromaServer

pytestmark = pytest.mark.slow

HANG_GUARD = 240.0  # seconds; only stops a broken test from hanging


@pytest.fixture(scope="module")
def fleet(chroma_server: ChromaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    work = tmp_path_factory.mktemp("watch-fleet")
    stack = Fleet(work, chroma_server.url, work / "embedded.jsonl")
    try:
        yield stack.start(2)
    finally:
        stack.stop()


def _job(tenant: str, root: Path, url: str, delay: float) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "collection": "notes",
        "sources": [{"kind": "files", "path": str(root), "id": "notes"}],
        "chunking": {"size": 120, "overlap": 20},
        "batch_size": 8,
        "embedding_function": {"name": "counting-toy", "config": {"delay": delay}},
        "parallel": 2,
        "options": {"url": url},
    }


def _watch(fleet: Fleet, execution_id: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "flux_chroma.cli", "watch", execution_id, "--flux", fleet.url, "--interval", "0.3"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _receipts(fleet: Fleet, tenant: str) -> int:
    done = 0
    for child in fleet.children(tenant):
        events = fleet.execution(child["execution_id"], detailed=True).get("events") or []
        done += sum(1 for e in events if e["type"] == "TASK_COMPLETED" and str(e["name"]).startswith("ingest_batch"))
    return done


def test_watch_follows_a_parallel_job_to_completion(fleet: Fleet, tenant: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write_docs(docs, [f"n{i}" for i in range(4)])  # 24 chunks: 3 batches, 3 units on 2 workers
    execution_id = fleet.submit("flux-chroma/ingest_job", _job(tenant, docs, fleet.chroma_url, 0.2))
    watcher = _watch(fleet, execution_id)
    out, err = watcher.communicate(timeout=HANG_GUARD)
    execution = fleet.execution(execution_id)
    assert execution["state"] == "COMPLETED", execution.get("output")
    assert watcher.returncode == 0, err
    chunks = execution["output"]["chunks"]
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert lines[0].startswith(f"flux-chroma/ingest_job {execution_id[:12]}  {tenant}/notes")
    assert any(f"chunks {chunks}/{chunks} (100%)" in line for line in lines), out
    assert any("COMPLETED" in line for line in lines), out
    units = {line.split()[1]: line for line in lines if line.lstrip().startswith("unit ") and "COMPLETED" in line}
    assert len(units) >= 2 and all("worker-" in line for line in units.values()), out


def test_watch_shows_the_error_of_a_job_that_fails_and_exits_1(fleet: Fleet, tenant: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    write_docs(docs, [f"n{i}" for i in range(12)])
    execution_id = fleet.submit("flux-chroma/ingest_job", _job(tenant, docs, fleet.chroma_url, 0.6))
    watcher = _watch(fleet, execution_id)
    deadline = time.monotonic() + HANG_GUARD
    while _receipts(fleet, tenant) < 1:  # the first batch is written: now the sources change
        assert time.monotonic() < deadline and watcher.poll() is None, "the job ended before its first batch"
        time.sleep(0.2)
    for path in docs.glob("*.md"):
        path.write_text(path.read_text() + "\nedited after planning\n")
    out, err = watcher.communicate(timeout=HANG_GUARD)
    execution = fleet.execution(execution_id)
    assert execution["state"] == "FAILED", execution.get("output")
    assert watcher.returncode == 1, (out, err)
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines), [line for line in lines if len(line) > 80]
    assert any("FAILED" in line for line in lines), out
    errors = [line for line in lines if line.strip().startswith("error:")]
    assert errors and "changed" in " ".join(lines[lines.index(errors[0]) :]), out
    assert f"job {execution_id} did not complete" in err


def test_watch_of_an_unknown_execution_id_is_a_readable_error(fleet: Fleet) -> None:
    watcher = _watch(fleet, "0123456789abcdef0123456789abcdef")
    out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 1
    assert "no execution '0123456789abcdef0123456789abcdef' on the Flux server" in err
    assert "Traceback" not in err + out
