"""Typed errors: bad input fails at once and writes nothing; transient failures retry;
exhausted retries leave a readable, reloadable execution."""

from __future__ import annotations

import json
import pickle
import socket

import numpy as np
import pytest
from flux.domain.events import ExecutionEventType
from flux.utils import FluxEncoder
from workflows import ingest_wf, query_wf

import flux_chroma
from flux_chroma import errors as E
from flux_chroma.chroma.settings import ConnectionSettings

GOOD = {"id": "a", "text": "hello"}

BAD_DOCS = [
    pytest.param("kb", [GOOD], E.InvalidNameError, "3-512", id="collection-too-short-for-chroma"),
    pytest.param("hand book", [GOOD], E.InvalidNameError, "hand book", id="collection-space"),
    pytest.param("handbook", [], E.InvalidDocumentError, "empty", id="empty-list"),
    pytest.param("handbook", "just a string", E.InvalidDocumentError, "list", id="docs-not-a-list"),
    pytest.param("handbook", [{"text": "no id"}], E.InvalidDocumentError, "#0", id="missing-id"),
    pytest.param("handbook", [{"id": "x"}], E.InvalidDocumentError, "'x'", id="missing-text"),
    pytest.param("handbook", [{"id": "x", "text": 42}], E.InvalidDocumentError, "int", id="non-str-text"),
    pytest.param("handbook", [{"id": "x", "text": "   "}], E.InvalidDocumentError, "whitespace", id="blank-text"),
    pytest.param("handbook", [GOOD, {"id": "a", "text": "again"}], E.DuplicateIdError, "'a'", id="duplicate-ids"),
    pytest.param("handbook", [{"id": "x", "text": "t", "metadata": {"d": {"nested": 1}}}], E.InvalidDocumentError, "'d'", id="metadata-dict"),
    pytest.param("handbook", [{"id": "x", "text": "t", "metadata": {"n": float("nan")}}], E.InvalidDocumentError, "NaN", id="metadata-nan"),
    pytest.param("handbook", [{"id": "x", "text": "t", "metadata": {"$k": 1}}], E.InvalidDocumentError, "$k", id="metadata-dollar-key"),
    pytest.param("handbook", [{"id": "x", "text": "t", "metadat": {}}], E.InvalidDocumentError, "metadat", id="typo-field"),
]


@pytest.mark.parametrize(("collection", "docs", "error", "culprit"), BAD_DOCS)
def test_bad_documents_fail_typed_and_write_nothing(tenant: str, raw_client, collection, docs, error, culprit) -> None:  # type: ignore[no-untyped-def]
    run = ingest_wf.run({"tenant": tenant, "collection": collection, "docs": docs})
    assert run.has_failed
    assert type(run.output) is error, repr(run.output)
    assert culprit in str(run.output)
    assert not any(c.name.startswith(tenant) for c in raw_client.list_collections())


def test_permanent_errors_are_not_retried(tenant: str) -> None:
    run = ingest_wf.run(
        {"tenant": tenant, "collection": "handbook", "docs": [], "options": {"retry_max_attempts": 5, "retry_delay": 30}}
    )
    assert run.has_failed and isinstance(run.output, E.InvalidDocumentError)
    retry_events = [e for e in run.events if e.type.name.startswith("TASK_RETRY")]
    assert retry_events == []


def test_bad_query_arguments(tenant: str) -> None:
    assert ingest_wf.run({"tenant": tenant, "collection": "qkb", "docs": [GOOD]}).has_succeeded
    cases = [({"k": 0}, "k=0"), ({"where": {"a": 1, "b": 2}}, "exactly one key"), ({"question": "  "}, "whitespace")]
    for extra, culprit in cases:
        payload = {"tenant": tenant, "collection": "qkb", "question": "hello", **extra}
        run = query_wf.run(payload)
        assert run.has_failed and isinstance(run.output, E.InvalidQueryError), (extra, run.output)
        assert culprit in str(run.output)


def test_query_of_missing_collection(tenant: str) -> None:
    run = query_wf.run({"tenant": tenant, "collection": "nothing-here", "question": "hello"})
    assert run.has_failed and isinstance(run.output, E.CollectionNotFoundError)
    assert "nothing-here" in str(run.output)


def test_missing_tenant_is_a_clear_error() -> None:
    run = ingest_wf.run({"collection": "handbook", "docs": [GOOD]})
    assert run.has_failed and isinstance(run.output, E.TenantError)
    assert "tenant= is required" in str(run.output)


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_exhausted_retries_are_readable_and_the_execution_reloads(tenant: str) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    opts = {"url": dead, "retry_max_attempts": 2, "retry_delay": 0, "connect_timeout": 1}
    run = ingest_wf.run({"tenant": tenant, "collection": "handbook", "docs": [GOOD], "options": opts})
    assert run.has_failed
    err = run.output
    assert isinstance(err, E.ChromaUnavailableError), repr(err)
    assert "unreachable" in str(err) and "gave up after 3 attempts" in str(err) and dead in str(err)
    types = [e.type for e in run.events]
    assert types.count(ExecutionEventType.TASK_RETRY_STARTED) == 2

    # flux-core 0.87 cannot unpickle RetryError; flux-chroma never stores one.
    reloaded = ingest_wf.run(execution_id=run.execution_id)
    assert reloaded.has_failed and isinstance(reloaded.output, E.ChromaUnavailableError)
    assert str(reloaded.output) == str(err)


def test_errors_survive_pickle_and_flux_json(tenant: str) -> None:
    for name in E.__all__:
        cls = getattr(E, name)
        if not isinstance(cls, type):
            continue
        err = cls(f"{name}: the culprit is 'doc-7'; do this")
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is cls and str(back) == str(err)
        payload = json.loads(json.dumps(err, cls=FluxEncoder))
        assert payload == {"type": name, "message": str(err)}


def test_urls_that_break_the_one_owner_rule_are_refused(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import chromadb

    for bad in (str(tmp_path), "./chroma-data", "file:///var/lib/chroma"):
        with pytest.raises(E.OneOwnerError, match="chroma run"):
            ConnectionSettings(bad)
    client = chromadb.PersistentClient(path=str(tmp_path / "local"))  # flux-chroma: allow-persistent-client
    with pytest.raises(E.OneOwnerError, match="PersistentClient"):
        flux_chroma.embed_and_add.with_options(tenant="acme", url=client)
    with pytest.raises(E.ConfigurationError, match="credentials"):
        ConnectionSettings("http://user:secret@127.0.0.1:8000")


def test_unknown_task_option_is_named() -> None:
    with pytest.raises(E.ConfigurationError, match="tennant"):
        flux_chroma.embed_and_add.with_options(tennant="acme")


def test_numpy_metadata_is_rejected_with_a_hint(tenant: str) -> None:
    from flux_chroma.tasks.validation import validate_documents

    with pytest.raises(E.InvalidDocumentError, match="numpy"):
        validate_documents([{"id": "x", "text": "t", "metadata": {"n": np.int64(3)}}])
