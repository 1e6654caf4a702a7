"""Embedding-function pinning: every mismatch kind is caught before anything is embedded or
written; pins are rebuilt, adopted and re-verified as documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from flux import ExecutionContext, workflow
from recording_proxy import RecordingProxy
from toy_embeddings import EFS
from workflows import ingest_wf, query_wf

from flux_chroma import FastDefaultEmbedding, embed_and_add
from flux_chroma import errors as E
from flux_chroma.chroma.collections import SEARCH_EF
from flux_chroma.chroma.pinning import Pin

DOCS = [{"id": f"d{i}", "text": f"pinned document number {i}"} for i in range(5)]
NEW_DOCS = [{"id": "n1", "text": "a brand new document that must never be written"}]


def _ingest(tenant: str, ef: str | None, docs: list[dict[str, Any]] = DOCS, **opts: Any):  # type: ignore[no-untyped-def]
    options = dict(opts)
    if ef is not None:
        options["embedding_function"] = ef
    return ingest_wf.run({"tenant": tenant, "collection": "pinned", "docs": docs, "options": options})


@pytest.mark.parametrize(
    ("configured", "extra", "fragment"),
    [
        ("other8", {}, "model 'toy' != 'other-toy'"),
        ("toy16", {}, "dimension 8 != 16"),
        ("toy8-other-weights", {}, "fingerprint"),
        ("toy8", {"space": "cosine"}, "space 'l2' != 'cosine'"),
    ],
    ids=["different-model", "same-name-other-config-and-dimension", "same-name-same-config-other-vectors", "other-space"],
)
def test_mismatch_is_caught_before_embedding_and_writes_nothing(
    tenant: str, raw_client, configured: str, extra: dict[str, Any], fragment: str  # type: ignore[no-untyped-def]
) -> None:
    assert _ingest(tenant, "toy8").has_succeeded
    run = _ingest(tenant, configured, NEW_DOCS, **extra)
    assert run.has_failed and isinstance(run.output, E.EmbeddingMismatchError), run.output
    message = str(run.output)
    assert fragment in message and "migrate" in message and "pinned" in message
    assert raw_client.get_collection(f"{tenant}__pinned").count() == len(DOCS)
    assert NEW_DOCS[0]["text"] not in EFS[configured].texts_seen()  # type: ignore[attr-defined]

    asked = query_wf.run(
        {"tenant": tenant, "collection": "pinned", "question": "a unique question text", "options": {"embedding_function": configured, **extra}}
    )
    assert asked.has_failed and isinstance(asked.output, E.EmbeddingMismatchError)
    assert "a unique question text" not in EFS[configured].texts_seen()  # type: ignore[attr-defined]


def test_a_new_collection_explores_search_ef_candidates_per_query(tenant: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    """Chroma's default (100) missed the nearest record for 4 of 200 Rust-book titles (docs/retrieval.md)."""
    assert _ingest(tenant, "toy8").has_succeeded
    hnsw = raw_client.get_collection(f"{tenant}__pinned", embedding_function=None).configuration["hnsw"]
    assert (hnsw["ef_search"], hnsw["space"]) == (SEARCH_EF, "l2") and SEARCH_EF > 100


def test_no_option_uses_the_pinned_function(tenant: str) -> None:
    assert _ingest(tenant, "toy8").has_succeeded
    more = _ingest(tenant, None, [{"id": "x", "text": "written with the rebuilt pinned function"}])
    assert more.has_succeeded, more.output
    assert more.output["embedding"]["name"] == "toy" and more.output["embedding"]["dimension"] == 8
    found = query_wf.run({"tenant": tenant, "collection": "pinned", "question": "pinned document number 3", "k": 1})
    assert found.has_succeeded and found.output[0]["id"] == "d3"


def test_pinned_function_missing_in_another_worker(tenant: str) -> None:
    assert _ingest(tenant, "unregistered8").has_succeeded
    # A fresh worker process that never imported the class cannot rebuild it from the pin.
    script = (
        "from workflows import query_wf\n"  # tests/workflows.py: `python -c` imports from its cwd
        f"run = query_wf.run({{'tenant': {tenant!r}, 'collection': 'pinned', 'question': 'anything'}})\n"
        "print(type(run.output).__name__); print(run.output)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], cwd=Path(__file__).parent, capture_output=True, text=True, timeout=120, check=True
    )
    kind, message = out.stdout.strip().split("\n", 1)
    assert kind == "EmbeddingMismatchError", out.stdout + out.stderr
    assert "toy-unregistered" in message and "not registered" in message


_missing_model = FastDefaultEmbedding(model_dir="/nonexistent/flux-chroma-model")


@workflow
async def ingest_missing_model(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Ingest with a default-model function whose files are absent on this worker."""
    add = embed_and_add.with_options(tenant=ctx.input["tenant"], embedding_function=_missing_model, retry_max_attempts=3, retry_delay=30)
    return await add("pinned", ctx.input["docs"])


def test_missing_model_is_a_permanent_clear_error(tenant: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    assert _ingest(tenant, None).has_succeeded  # pinned to the default model
    run = ingest_missing_model.run({"tenant": tenant, "docs": NEW_DOCS})
    assert run.has_failed and isinstance(run.output, E.ModelNotAvailableError), run.output
    assert "/nonexistent/flux-chroma-model" in str(run.output)
    assert not [e for e in run.events if e.type.name.startswith("TASK_RETRY")]  # never retried
    assert raw_client.get_collection(f"{tenant}__pinned").count() == len(DOCS)


def test_unpinned_collection_needs_adopt(tenant: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    legacy = raw_client.create_collection(f"{tenant}__pinned", embedding_function=None)
    legacy.add(ids=["old"], embeddings=[[0.1] * 8], documents=["made by plain chromadb"])
    refused = _ingest(tenant, "toy8")
    assert refused.has_failed and isinstance(refused.output, E.UnpinnedCollectionError)
    assert "adopt=True" in str(refused.output)
    adopted = _ingest(tenant, "toy8", adopt=True)
    assert adopted.has_succeeded, adopted.output
    pin = Pin.from_metadata(raw_client.get_collection(f"{tenant}__pinned").metadata)
    assert pin is not None and pin.name == "toy" and pin.dimension == 8


def test_adopt_refuses_a_dimension_mismatch(tenant: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    legacy = raw_client.create_collection(f"{tenant}__pinned", embedding_function=None)
    legacy.add(ids=["old"], embeddings=[[0.1] * 3], documents=["three dims"])
    run = _ingest(tenant, "toy8", adopt=True)
    assert run.has_failed and isinstance(run.output, E.EmbeddingMismatchError)
    assert "3-dimensional" in str(run.output)


def test_pin_is_cached_then_reverified_after_drop_and_recreate(tenant: str, url: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    with RecordingProxy(url) as proxy:
        opts = {"url": proxy.url, "embedding_function": "toy8"}
        assert ingest_wf.run({"tenant": tenant, "collection": "pinned", "docs": DOCS, "options": opts}).has_succeeded
        q = {"tenant": tenant, "collection": "pinned", "question": "pinned document number 1", "options": opts}
        assert query_wf.run(q).has_succeeded
        before = len(proxy.seen())
        assert query_wf.run(q).has_succeeded
        new = proxy.seen()[before:]
        # One alias lookup (aliases switch readers on their next query), then the query's own
        # requests only (hybrid's one full-text get, the dense query, the ranking of the
        # matches): no re-resolution, no pin fetch.
        paths = [r.path.rsplit("/", 1)[-1] for r in new]
        assert paths[0] == f"{tenant}__fc.aliases" and "query" in paths and set(paths[1:]) <= {"get", "query"}, paths

        # Someone drops the collection and rebuilds it with another model under the same name.
        raw_client.delete_collection(f"{tenant}__pinned")
        rebuilt = _ingest(tenant, "other8")
        assert rebuilt.has_succeeded
        stale = query_wf.run(q)
        assert stale.has_failed and isinstance(stale.output, E.EmbeddingMismatchError), stale.output
        written = ingest_wf.run({"tenant": tenant, "collection": "pinned", "docs": NEW_DOCS, "options": opts})
        assert written.has_failed and isinstance(written.output, E.EmbeddingMismatchError)


def test_resolution_cache_is_keyed_by_identity_not_object(tenant: str, url: str) -> None:
    from toy_embeddings import ToyEmbedding, ToyEmbeddingOtherWeights

    from flux_chroma.chroma import collections as coll
    from flux_chroma.chroma.naming import Namespace
    from flux_chroma.chroma.settings import ConnectionSettings

    assert _ingest(tenant, "toy8").has_succeeded
    target = coll.Target(ConnectionSettings(url), Namespace(tenant), "pinned")
    for _ in range(20):  # a workflow that builds its embedding function on every run
        coll.open_collection(target, ef=ToyEmbedding(8), create=False)
    keys = [k for k in coll._cache if k[2] == target.physical]
    assert len(keys) == 1
    # A new object with the same name and config but other vectors never hits that entry.
    with pytest.raises(E.EmbeddingMismatchError, match="fingerprint"):
        coll.open_collection(target, ef=ToyEmbeddingOtherWeights(8), create=False)
