"""A re-run after FAILED trusts the server, not the log (issue #15, item 1).

A job (6 JSONL records, batch_size 2) fails at batch 2 (its embedding function raises); the
collection is then dropped (an operator starting over, or a server restarted on a wiped
directory); the backend is fixed; ``run_ingest(job)`` again. Batches 0-1 used to be replayed
from run 1's copied events without asking the server: the run reported ``added: 6,
verified: 6`` while the collection held 2 records.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import fault_tools as ft
import pytest

from flux_chroma.errors import EmbeddingFunctionError
from flux_chroma.ingest import run_ingest


def _job(tenant: str, path: Path) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "collection": "replayed",
        "sources": [{"kind": "jsonl", "path": str(path), "id": "records"}],
        "batch_size": 2,
        "embedding_function": {"name": ft.HashEmbedding.name(), "config": {"dim": 16}},
        "options": {"retry_max_attempts": 0},
    }


def test_rerun_after_failure_rewrites_replayed_batches_the_server_lost(
    tmp_path: Path, tenant: str, raw_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "records.jsonl"
    texts = ["alpha", "bravo", "charlie", "delta", "boom echo", "foxtrot"]  # batch 2 holds "boom"
    path.write_text("".join(json.dumps({"id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    job = _job(tenant, path)
    physical = f"{tenant}__replayed"

    monkeypatch.setenv(ft.FAIL_TEXT_ENV, "boom")
    first = run_ingest(job)
    assert first.has_failed
    assert isinstance(first.output, EmbeddingFunctionError), repr(first.output)
    assert "2 of 3 batches committed" in str(first.output)
    assert raw_client.get_collection(physical).count() == 4

    raw_client.delete_collection(physical)  # starting over / a wiped server
    monkeypatch.delenv(ft.FAIL_TEXT_ENV)  # the backend is fixed
    second = run_ingest(job)

    assert second.has_succeeded, second.output
    assert raw_client.get_collection(physical).count() == 6  # before the fix: 2
    report = second.output
    assert report["failed"] == 0 and report["verified"] == 6
    writers = {t["batch"]: t["execution_id"] for t in report["batch_timings"]}
    assert set(writers.values()) == {second.execution_id}  # batches 0-1 were written again


def test_rerun_after_failure_still_replays_batches_the_server_holds(
    tmp_path: Path, tenant: str, raw_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "records.jsonl"
    texts = ["alpha", "bravo", "charlie", "delta", "boom echo", "foxtrot"]
    path.write_text("".join(json.dumps({"id": f"r{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    job = _job(tenant, path)
    monkeypatch.setenv(ft.FAIL_TEXT_ENV, "boom")
    first = run_ingest(job)
    assert first.has_failed
    monkeypatch.delenv(ft.FAIL_TEXT_ENV)
    second = run_ingest(job)
    assert second.has_succeeded, second.output
    writers = {t["batch"]: t["execution_id"] for t in second.output["batch_timings"]}
    assert writers == {0: first.execution_id, 1: first.execution_id, 2: second.execution_id}
    assert raw_client.get_collection(f"{tenant}__replayed").count() == 6
