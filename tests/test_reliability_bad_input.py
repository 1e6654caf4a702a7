"""The bad-input catalogue: hostile or malformed arguments to every public task, through Flux.

Each case runs one task in a real Flux execution against the session server and must fail
with the exact typed error, name the culprit in its message, and leave the server exactly as
it was (every collection of the tenants involved keeps its ids: nothing partial is written).
Document cases put a valid new document FIRST, so a partial write would show.

Not repeated here (see tests/test_errors.py): collection "kb" and "hand book", docs ``[]`` and
a plain string, missing id/text, int text, "   " text, adjacent duplicate ids, nested-dict /
NaN / "$k" metadata, unknown document field, query k=0, where with two keys, "  " question,
query of a missing collection, missing tenant. Hostile tenant names on ingest:
tests/test_tenancy.py.
"""

from __future__ import annotations

import itertools
import math
import os
from collections.abc import Iterator
from typing import Any

import chromadb
import fault_tools as ft
import numpy as np
import pytest
from chromadb.config import Settings

from flux_chroma import ChromaServer
from flux_chroma import errors as E

COLL = "catalog"
SEED = [
    {"id": "seed-1", "text": "Flux records every task."},
    {"id": "seed-2", "text": "Chroma stores vectors."},
]
FRESH = {"id": "fresh-1", "text": "a valid new document that must not be written"}
_ids = itertools.count(1)


def bad(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """A valid new document followed by the bad one (id ``bad`` unless given)."""
    return [FRESH, {"id": "bad", "text": "text", **doc}]


def meta(**values: Any) -> list[dict[str, Any]]:
    """A valid new document followed by one with the given metadata."""
    return bad({"metadata": values})


D = E.InvalidDocumentError
Q = E.InvalidQueryError
# fmt: off
ADD_CASES = [
    # texts
    pytest.param(bad({"text": ""}), D, ["'bad'", "empty"], id="text-empty-string"),
    pytest.param(bad({"text": "\t\n \r"}), D, ["'bad'", "whitespace"], id="text-tabs-newlines"),
    pytest.param(bad({"text": "\u00a0\u2003"}), D, ["'bad'", "whitespace"], id="text-unicode-spaces" ),
    pytest.param(bad({"text": None}), D, ["'bad'", "NoneType"], id="text-none"),
    pytest.param(bad({"text": b"hello"}), D, ["'bad'", "bytes"], id="text-bytes"),
    pytest.param(bad({"text": bytearray(b"hi")}), D, ["'bad'", "bytes"], id="text-bytearray"),
    pytest.param(bad({"text": ["a", "b"]}), D, ["'bad'", "list"], id="text-list"),
    pytest.param(bad({"text": 1.5}), D, ["'bad'", "float"], id="text-float"),
    # ids and document shapes
    pytest.param(bad({"id": None}), D, ["#1", "'id'"], id="id-none"),
    pytest.param(bad({"id": 7}), D, ["#1", "'id'"], id="id-int"),
    pytest.param(bad({"id": ""}), D, ["#1", "'id'"], id="id-empty"),
    pytest.param(bad({"id": " \t"}), D, ["#1", "'id'"], id="id-whitespace"),
    pytest.param(bad({"id": "x" * 1025}), D, ["#1", "1025"], id="id-too-long"),
    pytest.param([FRESH, None], D, ["#1", "NoneType"], id="doc-none"),
    pytest.param([FRESH, "just text"], D, ["#1", "str"], id="doc-string"),
    pytest.param(None, D, ["NoneType"], id="docs-none"),
    pytest.param({"id": "a", "text": "b"}, D, ["dict"], id="docs-single-dict"),
    pytest.param([FRESH, {"id": "x", "text": "y"}, {**FRESH, "text": "other"}], E.DuplicateIdError, ["'fresh-1'", "#0", "#2"], id="duplicate-ids-apart-different-text"),
    # metadata
    pytest.param(bad({"metadata": "topic=db"}), D, ["'bad'", "str"], id="metadata-not-a-dict"),
    pytest.param(meta(tags=[{"a": 1}]), D, ["'bad'", "'tags'"], id="metadata-list-of-dicts"),
    pytest.param(meta(tags=[]), D, ["'bad'", "'tags'", "empty list"], id="metadata-empty-list"),
    pytest.param(meta(tags=[1, "a"]), D, ["'bad'", "'tags'"], id="metadata-mixed-list"),
    pytest.param(meta(scores=[1.0, math.nan]), D, ["'bad'", "'scores'"], id="metadata-nan-in-list"),
    pytest.param(meta(score=math.inf), D, ["'bad'", "'score'", "inf"], id="metadata-inf"),
    pytest.param(meta(score=-math.inf), D, ["'bad'", "'score'", "-inf"], id="metadata-minus-inf"),
    pytest.param(meta(big=2**63), D, ["'bad'", "'big'", "64 bits"], id="metadata-int-2-pow-63"),
    pytest.param(meta(small=-(2**63) - 1), D, ["'bad'", "'small'", "64 bits"], id="metadata-int-below-int64" ),
    pytest.param(meta(n=np.int64(3)), D, ["'bad'", "'n'", "numpy"], id="metadata-numpy-int64"),
    pytest.param(meta(x=np.float32(0.5)), D, ["'bad'", "'x'", "numpy"], id="metadata-numpy-float32" ),
    pytest.param(meta(b=b"raw"), D, ["'bad'", "'b'", "bytes"], id="metadata-bytes"),
    pytest.param(meta(k=None), D, ["'bad'", "'k'", "None"], id="metadata-none-value"),
    pytest.param(meta(s={1, 2}), D, ["'bad'", "'s'", "set"], id="metadata-set"),
    pytest.param(bad({"metadata": {"#k": 1}}), D, ["'bad'", "'#k'"], id="metadata-hash-key"),
    pytest.param(bad({"metadata": {"fc_hash": "x"}}), D, ["'bad'", "'fc_hash'", "reserved"], id="metadata-reserved-key"),
    pytest.param(bad({"metadata": {"": 1}}), D, ["'bad'", "non-empty"], id="metadata-empty-key"),
]
# fmt: on


@pytest.fixture(scope="module")
def world(chroma_server: ChromaServer) -> Iterator[dict[str, Any]]:
    """Two tenants on the session server: ``mine`` with a seeded collection, ``other`` with a private one."""
    mine, other = f"rbad{os.getpid()}-a", f"rbad{os.getpid()}-b"
    for tenant, name in ((mine, COLL), (other, "private")):
        seeded = ft.steps_wf.run({"tenant": tenant, "steps": ft.ingest_steps(name, [SEED])})
        assert seeded.has_succeeded, seeded.output
    client = chromadb.HttpClient(
        host="127.0.0.1", port=chroma_server.port, settings=Settings(anonymized_telemetry=False)
    )
    yield {"tenant": mine, "other": other, "client": client}


def server_state(world: dict[str, Any]) -> dict[str, list[str]]:
    """Every collection of both tenants with its sorted ids."""
    prefixes = (f"{world['tenant']}__", f"{world['other']}__")
    state = {}
    for coll in world["client"].list_collections():
        if coll.name.startswith(prefixes):
            state[coll.name] = sorted(coll.get(include=[])["ids"])
    return state


def run_step(
    world: dict[str, Any],
    task: str,
    args: list[Any],
    kwargs: dict[str, Any] | None = None,
    options: dict[str, Any] | None = None,
    tenant: Any = "mine",
) -> Any:
    """Run one task in a Flux execution; return its context."""
    payload: dict[str, Any] = {
        "steps": [{"task": task, "args": args, "kwargs": kwargs or {}}],
        "options": {"retry_max_attempts": 2, "retry_delay": 5, **(options or {})},
    }
    if tenant is not None:
        payload["tenant"] = world["tenant"] if tenant == "mine" else tenant
    return ft.steps_wf.run(payload)


def assert_rejected(world: dict[str, Any], ctx: Any, error: type, culprits: list[str]) -> None:
    """Failed at once with exactly ``error``, naming every culprit, never retried."""
    assert ctx.has_failed, ctx.output
    assert type(ctx.output) is error, repr(ctx.output)
    for culprit in culprits:
        assert culprit in str(ctx.output), (culprit, str(ctx.output))
    assert ft.retry_failures(ctx.events) == 0  # permanent: no retry, no 5 s wait


@pytest.mark.parametrize(("docs", "error", "culprits"), ADD_CASES)
def test_embed_and_add_rejects(
    world: dict[str, Any], docs: Any, error: type, culprits: list[str]
) -> None:
    before = server_state(world)
    assert before[f"{world['tenant']}__{COLL}"] == ["seed-1", "seed-2"]
    assert_rejected(world, run_step(world, "embed_and_add", [COLL, docs]), error, culprits)
    assert server_state(world) == before


# fmt: off
TASK_CASES = [
    # embed_and_add: collection names and options
    pytest.param("embed_and_add", ["bad..name", [FRESH]], {}, {}, E.InvalidNameError, ["bad..name"], id="add-collection-dotdot"),
    pytest.param("embed_and_add", ["../etc", [FRESH]], {}, {}, E.InvalidNameError, ["../etc"], id="add-collection-path"),
    pytest.param("embed_and_add", [None, [FRESH]], {}, {}, E.InvalidNameError, ["None"], id="add-collection-none"),
    pytest.param("embed_and_add", [COLL, [FRESH]], {}, {"space": "manhattan"}, E.ConfigurationError, ["manhattan"], id="add-option-space"),
    pytest.param("embed_and_add", [COLL, [FRESH]], {}, {"cache": "yes"}, E.ConfigurationError, ["cache="], id="add-option-cache-not-bool"),
    pytest.param("embed_and_add", [COLL, [FRESH]], {}, {"embedding_function": "default"}, E.ConfigurationError, ["embedding_function="], id="add-option-ef-is-a-string"),
    pytest.param("embed_and_add", [COLL, [FRESH]], {}, {"read_timeout": -1}, E.ConfigurationError, ["read_timeout="], id="add-option-negative-timeout"),
    # query
    pytest.param("query", [COLL, "q"], {"k": -3}, {}, Q, ["k=-3"], id="query-k-negative"),
    pytest.param("query", [COLL, "q"], {"k": 2.5}, {}, Q, ["k", "float"], id="query-k-float"),
    pytest.param("query", [COLL, "q"], {"k": "5"}, {}, Q, ["k", "str"], id="query-k-string"),
    pytest.param("query", [COLL, "q"], {"k": True}, {}, Q, ["k", "bool"], id="query-k-bool"),
    pytest.param("query", [COLL, "q"], {"k": 10_001}, {}, Q, ["k=10001"], id="query-k-too-large"),
    pytest.param("query", [COLL, None], {}, {}, Q, ["NoneType"], id="query-question-none"),
    pytest.param("query", [COLL, b"what"], {}, {}, Q, ["bytes"], id="query-question-bytes"),
    pytest.param("query", [COLL, []], {}, {}, Q, ["empty"], id="query-question-empty-list"),
    pytest.param("query", [COLL, ["ok", 3]], {}, {}, Q, ["#1", "int"], id="query-question-list-with-int" ),
    pytest.param("query", [COLL, ""], {}, {}, Q, ["#0", "empty"], id="query-question-empty-string"),
    pytest.param("query", [COLL, "q"], {"where": {}}, {}, Q, ["exactly one key"], id="query-where-empty" ),
    pytest.param("query", [COLL, "q"], {"where": "topic = db"}, {}, Q, ["str"], id="query-where-not-a-dict" ),
    pytest.param("query", [COLL, "q"], {"where": {"topic": {"$like": "x"}}}, {}, Q, ["$like"], id="query-where-unknown-operator"),
    pytest.param("query", [COLL, "q"], {"where": {"$and": [{"a": 1}]}}, {}, Q, ["$and"], id="query-where-and-of-one"),
    pytest.param("query", [COLL, "q"], {"where": {"a": {"$in": []}}}, {}, Q, ["$in"], id="query-where-in-empty"),
    pytest.param("query", [COLL, "q"], {"where": {"a": {"$gt": "x"}}}, {}, Q, ["$gt"], id="query-where-gt-string"),
    pytest.param("query", [COLL, "q"], {"where": {"a": math.nan}}, {}, Q, ["'a'", "nan"], id="query-where-nan"),
    pytest.param("query", [COLL, "q"], {"where": {"a": np.int64(1)}}, {}, Q, ["where['a']", "numpy"], id="query-where-numpy"),
    pytest.param("query", [COLL, "q"], {"where_document": {"$contains": ""}}, {}, Q, ["$contains"], id="query-where-document-empty"),
    pytest.param("query", [COLL, "q"], {"where_document": {"$match": "x"}}, {}, Q, ["$match"], id="query-where-document-unknown-op"),
    pytest.param("query", ["private", "q"], {}, {}, E.CollectionNotFoundError, ["'private'"], id="query-other-tenants-collection"),
    pytest.param("query", ["x", "q"], {}, {}, E.InvalidNameError, ["'x'"], id="query-collection-name-too-short"),
    # delete_documents
    pytest.param("delete_documents", [COLL], {}, {}, Q, ["ids= or where="], id="delete-docs-nothing-selected" ),
    pytest.param("delete_documents", [COLL], {"ids": []}, {}, Q, ["ids="], id="delete-docs-ids-empty-list" ),
    pytest.param("delete_documents", [COLL], {"ids": "seed-1"}, {}, Q, ["ids="], id="delete-docs-ids-a-string"),
    pytest.param("delete_documents", [COLL], {"ids": ["seed-1", 5]}, {}, Q, ["ids="], id="delete-docs-ids-with-int"),
    pytest.param("delete_documents", [COLL], {"where": {"a": 1, "b": 2}}, {}, Q, ["exactly one key"], id="delete-docs-where-two-keys"),
    pytest.param("delete_documents", ["never-made"], {"ids": ["seed-1"]}, {}, E.CollectionNotFoundError, ["'never-made'"], id="delete-docs-missing-collection"),
    # delete_collection and list_collections
    pytest.param("delete_collection", ["x y"], {}, {}, E.InvalidNameError, ["'x y'"], id="delete-collection-bad-name"),
    pytest.param("list_collections", [], {}, {"tenancy": "schema"}, E.ConfigurationError, ["schema"], id="list-invalid-tenancy"),
]
# fmt: on


@pytest.mark.parametrize(("task", "args", "kwargs", "options", "error", "culprits"), TASK_CASES)
def test_task_rejects(
    world: dict[str, Any],
    task: str,
    args: list[Any],
    kwargs: dict[str, Any],
    options: dict[str, Any],
    error: type,
    culprits: list[str],
) -> None:
    before = server_state(world)
    assert_rejected(world, run_step(world, task, args, kwargs, options), error, culprits)
    assert server_state(world) == before


# fmt: off
TENANT_CASES = [
    pytest.param("query", [COLL, "q"], "Acme", E.TenantError, ["'Acme'"], id="query-tenant-uppercase" ),
    pytest.param("delete_documents", [COLL], "a", E.TenantError, ["'a'"], id="delete-docs-tenant-too-short" ),
    pytest.param("delete_collection", [COLL], None, E.TenantError, ["tenant="], id="delete-collection-no-tenant"),
    pytest.param("list_collections", [], "acme__x", E.TenantError, ["'acme__x'"], id="list-tenant-with-separator"),
    pytest.param("query", [COLL, "q"], "rbad-nobody-here", E.CollectionNotFoundError, ["'rbad-nobody-here'", f"'{COLL}'"], id="query-unknown-tenant"),
]
# fmt: on


@pytest.mark.parametrize(("task", "args", "tenant", "error", "culprits"), TENANT_CASES)
def test_tenants_are_checked_by_every_task(
    world: dict[str, Any], task: str, args: list[Any], tenant: Any, error: type, culprits: list[str]
) -> None:
    before = server_state(world)
    kwargs = {"ids": ["seed-1"]} if task == "delete_documents" else {}
    assert_rejected(world, run_step(world, task, args, kwargs, tenant=tenant), error, culprits)
    assert server_state(world) == before


def test_unknown_tenant_lists_nothing_and_deleting_a_missing_collection_is_a_no_op(
    world: dict[str, Any],
) -> None:
    before = server_state(world)
    listed = run_step(world, "list_collections", [], tenant="rbad-nobody-here")
    assert listed.has_succeeded and listed.output == [[]]
    gone = run_step(world, "delete_collection", ["never-made"])
    assert gone.has_succeeded and gone.output == [{"collection": "never-made", "deleted": False}]
    assert server_state(world) == before


def test_texts_past_the_token_limit_are_truncated_explicitly(tenant: str, raw_client: Any) -> None:
    head = "alpha beta gamma " * 100  # 300 words: past the model's 256-token window
    docs = [
        {"id": "long-a", "text": head + "ending one"},
        {"id": "long-b", "text": head + "another ending"},
        {"id": "short", "text": "a short text"},
    ]
    run = ft.steps_wf.run({"tenant": tenant, "steps": ft.ingest_steps("long-texts", [docs])})
    assert run.has_succeeded, run.output
    assert run.output[0]["truncated"] == 2 and run.output[0]["upserted"] == 3
    got = raw_client.get_collection(f"{tenant}__long-texts").get(
        ids=["long-a", "long-b"], include=["documents", "embeddings"]
    )
    assert got["documents"] == [
        docs[0]["text"],
        docs[1]["text"],
    ]  # stored in full; only the vector is truncated
    np.testing.assert_allclose(
        got["embeddings"][0], got["embeddings"][1], atol=1e-6
    )  # the tails were cut off


def test_int64_boundaries_are_stored_exactly(tenant: str, raw_client: Any) -> None:
    edge = [{"id": "edge", "text": "edges", "metadata": {"max": 2**63 - 1, "min": -(2**63)}}]
    run = ft.steps_wf.run({"tenant": tenant, "steps": ft.ingest_steps("edges", [edge])})
    assert run.has_succeeded, run.output
    stored = raw_client.get_collection(f"{tenant}__edges").get(include=["metadatas"])["metadatas"][
        0
    ]
    assert (stored["max"], stored["min"]) == (2**63 - 1, -(2**63))
    assert type(stored["max"]) is int


def test_more_docs_than_the_server_batch_limit_are_split_not_rejected(
    tenant: str, raw_client: Any
) -> None:
    many = [{"id": f"big-{i}", "text": f"doc {i}"} for i in range(5_600)]
    run = ft.steps_wf.run(
        {"tenant": tenant, "hash_dim": 8, "steps": ft.ingest_steps("oversized", [many])}
    )
    assert run.has_succeeded, run.output
    receipt = run.output[0]
    assert raw_client.get_max_batch_size() == 5461
    assert receipt["batches"] == 2 and receipt["upserted"] == 5_600
    assert raw_client.get_collection(f"{tenant}__oversized").count() == 5_600
