"""Spans and metrics through Flux's observability, read with OpenTelemetry's real SDK.

Each scenario runs in a child process (``tests/telemetry_scenario.py``): OpenTelemetry's
global providers can be set once per process, and the rest of the suite runs with
observability off, as Flux does by default.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from telemetry_scenario import SENTINEL

from flux_chroma import ChromaServer

HERE = Path(__file__).parent


def _child(*args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(HERE / "telemetry_scenario.py"), *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        env=dict(os.environ),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _points(metrics: dict[str, Any], scope: str = "flux_chroma") -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for resource in metrics["resource_metrics"]:
        for scoped in resource["scope_metrics"]:
            if scoped["scope"]["name"] == scope:
                for metric in scoped["metrics"]:
                    out.setdefault(metric["name"], []).extend(metric["data"]["data_points"])
    return out


def _total(points: dict[str, list[dict[str, Any]]], name: str, collection: str) -> int:
    return sum(
        p.get("value", p.get("count", 0)) for p in points.get(name, []) if p["attributes"]["collection"] == collection
    )


@pytest.fixture(scope="module")
def inmemory(chroma_server: ChromaServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One child run: writes, a query, an ingestion job and a failing write, exported in memory."""
    return _child("inmemory", chroma_server.url, str(tmp_path_factory.mktemp("telemetry")))


def test_spans_and_metrics_of_writes_a_query_and_an_ingest_carry_no_content(inmemory: dict[str, Any]) -> None:
    result = inmemory
    assert result["asked"]["ok"], result["asked"]
    assert result["ingested"]["ok"], result["ingested"]
    tenant, report = result["tenant"], result["ingested"]["output"]
    spans = result["spans"]

    names = Counter(s["name"] for s in spans)
    assert names["flux_chroma.ingest.batch"] == report["batches"] > 1
    by_id = {s["context"]["span_id"]: s for s in spans}
    for span in spans:  # ours nest under Flux's: flux.task.execute > flux_chroma.task > ingest.batch
        parent = by_id.get(span["parent_id"] or "")
        if span["name"] == "flux_chroma.task":
            assert parent is not None and parent["name"] == "flux.task.execute"
            assert span["context"]["trace_id"] == parent["context"]["trace_id"]
        if span["name"] == "flux_chroma.ingest.batch":
            assert parent is not None and parent["attributes"]["flux_chroma.task"] == "ingest_batch"
    tasks = Counter(s["attributes"]["flux_chroma.task"] for s in spans if s["name"] == "flux_chroma.task")
    assert tasks["embed_and_add"] == 3 and tasks["query"] == 1 and tasks["plan_ingest"] == 1
    assert tasks["ingest_batch"] == report["batches"]
    for span in spans:
        if span["name"].startswith("flux_chroma."):
            assert span["attributes"]["flux_chroma.tenant"] == tenant
            assert span["events"] == []

    points = _points(result["metrics"])
    for name, found in points.items():
        for point in found:
            assert set(point["attributes"]) == {"tenant", "collection"}, name
            assert point["attributes"]["tenant"] == tenant
    receipt, copied = result["asked"]["output"]["receipt"], result["asked"]["output"]["copied"]
    assert _total(points, "flux_chroma_chunks_written_total", "notes") == report["added"] + report["updated"]
    assert _total(points, "flux_chroma_documents_embedded_total", "notes") == report["embedded"]
    assert _total(points, "flux_chroma_batch_duration_seconds", "notes") == report["batches"]
    assert _total(points, "flux_chroma_chunks_written_total", "facts") == receipt["upserted"] == 5
    assert _total(points, "flux_chroma_chunks_skipped_total", "facts") == 5  # the unchanged second write
    assert _total(points, "flux_chroma_cache_hits_total", "copy") == copied["cache_hits"] == 5
    assert _total(points, "flux_chroma_query_duration_seconds", "facts") == 1

    exported = json.dumps(spans) + json.dumps(result["metrics"])
    assert result["asked"]["output"]["hits"] == 2  # the filter on the sentinel metadata matched
    assert SENTINEL not in exported, [s["name"] for s in spans if SENTINEL in json.dumps(s)]


def test_a_failed_task_is_counted_by_error_class_without_its_message(inmemory: dict[str, Any]) -> None:
    result = inmemory
    failed = result["failed"]
    assert not failed["ok"] and failed["error"] == "DuplicateIdError" and SENTINEL in failed["message"]
    ours = [s for s in result["bad_spans"] if s["name"].startswith("flux_chroma.")]
    assert ours and all(s["status"]["status_code"] == "ERROR" for s in ours)
    assert {s["status"]["description"] for s in ours} == {"DuplicateIdError"}
    assert SENTINEL not in json.dumps(ours) + json.dumps(result["bad_metrics"])
    errors = _points(result["bad_metrics"])["flux_chroma_errors_total"]
    assert [(p["attributes"]["error_type"], p["value"]) for p in errors] == [("DuplicateIdError", 1)]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port  # closed again: nothing listens there


def test_an_otlp_endpoint_that_is_down_leaves_ingestion_unaffected(url: str, tmp_path: Path) -> None:
    result = _child("otlp-down", url, str(tmp_path), str(_closed_port()))
    assert result["ok"], result["output"]
    report = result["output"]
    assert report["added"] == report["chunks"] == report["verified"] > 0 and report["failed"] == 0
    assert {"flux.task.execute", "flux_chroma.task", "flux_chroma.ingest.batch"} <= set(result["span_names"])


def test_the_grafana_dashboard_charts_every_metric_and_only_real_ones() -> None:
    import re

    from flux_chroma.telemetry import METRICS

    dashboard = json.loads((HERE.parent / "examples" / "grafana" / "flux-chroma-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    named = {re.sub(r"_bucket$", "", m) for e in exprs for m in re.findall(r"flux_chroma_[a-z_]+", e)}
    assert named == set(METRICS)
    labels = {lbl for e in exprs for lbl in re.findall(r"by \(([^)]*)\)", e) for lbl in lbl.replace(" ", "").split(",")}
    assert labels <= {"tenant", "collection", "error_type", "le"}
