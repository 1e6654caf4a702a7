"""Multi-tenant fan-out, and re-embedding migration with an alias switch, through real executions."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import toy_embeddings  # noqa: F401 - registers the "toy" embedding function with chromadb
from flux._task_context import _CURRENT_TASK
from workflows import query_wf

from flux_chroma.chroma.aliases import get_alias, resolve_alias
from flux_chroma.chroma.collections import Target
from flux_chroma.chroma.naming import Namespace, validate_collection_name
from flux_chroma.chroma.pinning import Pin
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.embedding import FastDefaultEmbedding
from flux_chroma.errors import EmbeddingMismatchError, InvalidNameError
from flux_chroma.ingest import register_loader, run_ingest, run_ingest_tenants, run_migration

_arrived: dict[str, threading.Event] = {}
_lock = threading.Lock()


def _gate(name: str) -> threading.Event:
    with _lock:
        return _arrived.setdefault(name, threading.Event())


@register_loader("rendezvous")
def rendezvous(params: dict[str, Any]) -> list[dict[str, Any]]:
    """Records of one tenant; inside a plan task it waits until the other tenant's plan runs too."""
    task = _CURRENT_TASK.get()
    if task is not None and task[1].startswith("plan_ingest") and not params.get("passed"):
        _gate(params["me"]).set()
        if not _gate(params["other"]).wait(120):
            raise RuntimeError(f"{params['me']}: the other tenant's job never ran concurrently")
    return [{"id": f"{params['me']}-{i}", "text": f"note {i} of tenant {params['me']}: {'lorem ipsum ' * (i % 5)}"} for i in range(20)]


def test_fan_out_ingests_two_tenants_concurrently_each_with_its_own_pin(tenant: str, raw_client: Any) -> None:
    a, b = tenant, f"{tenant}-b"
    jobs = [
        {"tenant": a, "collection": "kb1", "batch_size": 8, "sources": [{"kind": "rendezvous", "id": "src", "me": a, "other": b}]},
        {
            "tenant": b,
            "collection": "kb1",
            "batch_size": 8,
            "embedding_function": {"name": "toy", "config": {"dim": 8}},
            "sources": [{"kind": "rendezvous", "id": "src", "me": b, "other": a}],
        },
    ]
    run = run_ingest_tenants(jobs, max_concurrent=2)  # with max_concurrent=1 the rendezvous would fail
    assert run.has_succeeded, run.output
    reports = run.output["jobs"]
    assert set(reports) == {f"{a}/kb1", f"{b}/kb1"}
    assert all(r["added"] == 20 and r["batches"] == 3 and r["failed"] == 0 for r in reports.values())
    pins = {}
    for t in (a, b):
        coll = raw_client.get_collection(f"{t}__kb1")
        assert coll.count() == 20
        assert all(i.startswith(f"{t}-") for i in coll.get(include=[])["ids"])  # only this tenant's data
        pins[t] = Pin.from_metadata(coll.metadata)
    assert (pins[a].name, pins[a].dimension) == ("default", 384)
    assert (pins[b].name, pins[b].dimension) == ("toy", 8)


def test_migration_rebuilds_with_a_new_model_then_switches_the_alias(tmp_path: Path, tenant: str, url: str, raw_client: Any) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in {"chroma": "Chroma is an embedding database.", "flux": "Flux persists every state transition.", "sse": "Workers claim executions over SSE."}.items():
        (docs / f"{name}.md").write_text(text)
    ingested = run_ingest({"tenant": tenant, "collection": "handbook", "sources": [{"kind": "files", "path": str(docs)}]})
    assert ingested.has_succeeded
    source_id = ingested.output["sources"][0]["id"]  # default: the folder's name plus a digest of its path
    before = query_wf.run({"tenant": tenant, "collection": "handbook", "question": "what is chroma?", "k": 1})
    assert before.has_succeeded and before.output[0]["id"].startswith(f"{source_id}/chroma.md#")

    target = Target(ConnectionSettings.resolve(url), Namespace(tenant), "handbook")
    seen_during: list[str] = []

    def during(value: dict[str, Any]) -> None:
        if value.get("phase") == "migrate":
            seen_during.append(resolve_alias(target).name)  # readers still use the old collection

    spec = {"tenant": tenant, "collection": "handbook", "embedding_function": {"name": "toy", "config": {"dim": 8}}, "batch_size": 2}
    run = run_migration(spec, on_progress=during)
    assert run.has_succeeded, run.output
    report = run.output
    new = report["target"]
    assert report["source"] == "handbook" and new.startswith("handbook-") and report["pages"] == 2
    assert report["reconcile"] == {"count": 3, "copied": 0, "deleted": 0, "verified": True}
    assert report["switch"] == {"alias": "handbook", "target": new, "previous": "handbook"}
    assert seen_during == ["handbook", "handbook"]
    assert get_alias(target.settings, target.namespace, "handbook") == new

    old_c, new_c = raw_client.get_collection(f"{tenant}__handbook"), raw_client.get_collection(f"{tenant}__{new}")
    old_rows = old_c.get(include=["documents", "metadatas"])
    new_rows = new_c.get(include=["documents", "metadatas"])
    assert sorted(zip(old_rows["ids"], old_rows["documents"])) == sorted(zip(new_rows["ids"], new_rows["documents"]))
    # Every metadata value is copied; the content hash is recomputed over the user metadata
    # (the chunk's fc_* citation keys are not part of the copy's hash).
    def meta(rows: Any) -> dict[str, Any]:
        return {i: {k: v for k, v in m.items() if k != "fc_hash"} for i, m in zip(rows["ids"], rows["metadatas"])}

    assert meta(old_rows) == meta(new_rows)
    assert Pin.from_metadata(old_c.metadata).name == "default"  # the old collection is untouched
    assert (Pin.from_metadata(new_c.metadata).name, Pin.from_metadata(new_c.metadata).dimension) == ("toy", 8)

    after = query_wf.run({"tenant": tenant, "collection": "handbook", "question": "what is chroma?", "k": 3})
    assert after.has_succeeded, after.output  # answered by the new collection with the toy model
    assert sorted(h["id"] for h in after.output) == sorted(new_rows["ids"])
    mixed = query_wf.run({"tenant": tenant, "collection": "handbook", "question": "x", "options": {"embedding_function": FastDefaultEmbedding()}})
    assert mixed.has_failed and isinstance(mixed.output, EmbeddingMismatchError)  # never the old model on new vectors
    assert new in str(mixed.output)

    again = run_migration(spec)  # the name already serves the new model: nothing to do
    assert again.has_succeeded and again.output["noop"] is True


def test_alias_registry_name_is_reserved() -> None:
    with pytest.raises(InvalidNameError, match="reserved"):
        validate_collection_name("fc.aliases")
