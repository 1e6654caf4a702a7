"""A task written by a user with ``@chroma_task`` inherits flux-chroma's guarantees.

``get_documents`` comes from ``examples/user_task.py`` unchanged. Against the real session
server (and loopback proxies in front of it) it keeps to its tenant, checks the pin, fails
permanent errors at once and retries transient ones, and never stores a credential.
"""

from __future__ import annotations

import pickle
import secrets
import uuid
from typing import Any

import fault_tools as ft
import pytest
from flux.domain.events import ExecutionEventType
from recording_proxy import RecordingProxy
from test_errors import _closed_port
from test_tenancy import _hostile_names
from user_task_workflows import get_documents, get_documents_wf

import flux_chroma
from flux_chroma import errors as E

DOCS = [
    {"id": "a", "text": "alpha text", "metadata": {"team": "x"}},
    {"id": "b", "text": "beta text"},
    {"id": "c", "text": "gamma text", "metadata": {"n": 3}},
]


def ingest(tenant: str, collection: str, *, url: str | None = None, dim: int = 16) -> None:
    steps = ft.ingest_steps(collection, [DOCS])
    options = {"url": url} if url else {}
    run = ft.steps_wf.run({"tenant": tenant, "hash_dim": dim, "options": options, "steps": steps})
    assert run.has_succeeded, run.output


def get(tenant: str, collection: object, ids: object, **spec: Any) -> Any:
    return get_documents_wf.run(
        {"tenant": tenant, "hash_dim": spec.pop("dim", 16), "collection": collection, "ids": ids, **spec}
    )


def test_the_example_task_is_a_decorated_chroma_task() -> None:
    assert isinstance(get_documents, flux_chroma.ChromaTask)
    assert get_documents.name == "get_documents" and get_documents.retry_max_attempts == 3
    assert "Fetch records by id" in (get_documents.__doc__ or "")
    configured = get_documents.with_options(tenant="acme", timeout=5)
    assert configured.name == "get_documents_acme" and configured.timeout == 5
    with pytest.raises(E.ConfigurationError, match="unknown option"):
        get_documents.with_options(tenant="acme", tenent="typo")


def test_reads_records_in_order_without_internal_keys(tenant: str) -> None:
    ingest(tenant, "notes")
    run = get(tenant, "notes", ["c", "missing", "a"])
    assert run.has_succeeded, run.output
    assert run.output == [
        {"id": "c", "document": "gamma text", "metadata": {"n": 3}},
        {"id": "a", "document": "alpha text", "metadata": {"team": "x"}},
    ]
    started = [e for e in run.events if e.type == ExecutionEventType.TASK_STARTED]
    assert [e.name for e in started] == [f"get_documents_{tenant}"]  # options are not arguments


def test_hostile_names_cannot_leave_the_tenant(url: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    base = f"user{uuid.uuid4().hex[:6]}"
    attacker, victim = base, f"{base}-2"  # the classic prefix collision
    ingest(victim, "secret")
    victim_coll = raw_client.get_collection(f"{victim}__secret")
    names = _hostile_names(victim, str(victim_coll.id))
    with RecordingProxy(url) as proxy:
        for label, name in names:
            run = get(attacker, name, ["a"], options={"url": proxy.url})
            assert run.has_failed, (label, run.output)
            assert type(run.output) in (E.InvalidNameError, E.CollectionNotFoundError), (label, run.output)
        seen = proxy.seen()
    assert seen, "the proxy saw no traffic: the test would prove nothing"
    for request in seen:
        segments = request.path.split("?")[0].split("/")
        assert not any(seg.startswith(f"{victim}__") for seg in segments), request.path
        assert str(victim_coll.id) not in segments, request.path
        assert f"{victim}__".encode() not in request.body, request.path
    assert victim_coll.count() == len(DOCS)


def test_pin_is_checked_against_the_task_embedding_function(tenant: str) -> None:
    ingest(tenant, "pinned", dim=16)
    run = get(tenant, "pinned", ["a"], dim=32, options={"retry_max_attempts": 5, "retry_delay": 30})
    assert run.has_failed and type(run.output) is E.EmbeddingMismatchError, repr(run.output)
    assert f"{tenant}/pinned" in str(run.output)
    assert ft.retry_failures(run.events) == 0  # permanent: never retried


@pytest.mark.parametrize(
    ("collection", "ids", "error", "culprit"),
    [
        ("notes", [], E.InvalidQueryError, "ids="),
        ("notes", ["a", ""], E.InvalidQueryError, "ids="),
        ("notes", "a", E.InvalidQueryError, "ids="),
        ("absent", ["a"], E.CollectionNotFoundError, "absent"),
        ("x", ["a"], E.InvalidNameError, "'x'"),
    ],
    ids=["empty-ids", "empty-id", "ids-not-a-list", "missing-collection", "name-too-short"],
)
def test_permanent_errors_fail_at_once(tenant: str, collection: str, ids: object, error: type, culprit: str) -> None:
    ingest(tenant, "notes")
    run = get(tenant, collection, ids, options={"retry_max_attempts": 5, "retry_delay": 30})
    assert run.has_failed and type(run.output) is error, repr(run.output)
    assert culprit in str(run.output)
    assert ft.retry_failures(run.events) == 0


def test_transient_errors_are_retried_then_stored_readable(tenant: str) -> None:
    dead = f"http://127.0.0.1:{_closed_port()}"
    opts = {"url": dead, "retry_max_attempts": 2, "retry_delay": 0, "connect_timeout": 1}
    run = get(tenant, "notes", ["a"], options=opts)
    assert run.has_failed and isinstance(run.output, E.ChromaUnavailableError), repr(run.output)
    assert "gave up after 3 attempts" in str(run.output) and dead in str(run.output)
    types = [e.type for e in run.events]
    assert types.count(ExecutionEventType.TASK_RETRY_STARTED) == 2
    reloaded = get_documents_wf.run(execution_id=run.execution_id)  # picklable, reloadable
    assert str(reloaded.output) == str(run.output)


def test_credentials_are_used_and_never_stored(tenant: str, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    token, wrong = (f"fc-{kind}-{secrets.token_hex(12)}" for kind in ("tok", "wrong"))
    monkeypatch.setenv("FC_USER_TOKEN", token)
    monkeypatch.setenv("FC_USER_WRONG", wrong)
    ingest(tenant, "notes")
    plain, echo = ft.AuthProxy(url, token), ft.AuthProxy(url, token, echo=True)
    try:
        ok = get(tenant, "notes", ["b"], token_env="FC_USER_TOKEN", options={"url": plain.url})
        assert ok.has_succeeded, ok.output
        assert ok.output == [{"id": "b", "document": "beta text", "metadata": {}}]
        assert plain.forwarded > 0

        # A hostile proxy quotes the Authorization header it received in its error body.
        refused = get(
            tenant, "notes", ["b"], token_env="FC_USER_WRONG",
            options={"url": echo.url, "retry_max_attempts": 2, "retry_delay": 1},
        )
        assert echo.rejected > 0
    finally:
        plain.close()
        echo.close()
    assert refused.has_failed and type(refused.output) is E.ChromaRequestError, repr(refused.output)
    assert ft.retry_failures(refused.events) == 0
    for run in (ok, refused):
        stored = [str(run.output), repr(run.output), pickle.dumps(run.output).decode("latin-1")]
        stored += [repr(e.value) for e in run.events]
        for needle in (token, wrong):
            assert not any(needle in text for text in stored), needle
