"""Nothing half-written: text that cannot be sent as UTF-8 is refused before the first request,
and a failing embedding function is named as the culprit (issue #15, item 7).

Python strings can hold lone surrogates (``"\\ud800"``, e.g. from ``json.loads`` of a broken
escape). chromadb fails on them deep inside a request: 5,600 documents whose LAST text held one
used to leave 5,461 records written (the first batch) and blame the server.
"""

from __future__ import annotations

import os
from typing import Any

import fault_tools as ft
import pytest

from flux_chroma import errors as E

SURROGATE = "\ud800"


def _run(tenant: str, steps: list[dict[str, Any]]) -> Any:
    return ft.steps_wf.run({"tenant": tenant, "hash_dim": 16, "steps": steps})


def _count(raw_client: Any, tenant: str, name: str) -> int:
    try:
        return int(raw_client.get_collection(f"{tenant}__{name}").count())
    except Exception:  # noqa: BLE001 - chromadb's NotFoundError: nothing was created
        return 0


def test_surrogate_in_the_last_of_5600_documents_writes_nothing(tenant: str, raw_client: Any) -> None:
    docs = ft.docs("big", 5600)
    docs[-1]["text"] = "broken " + SURROGATE + " text"
    run = _run(tenant, ft.ingest_steps("big", [docs]))
    assert not run.has_succeeded
    assert isinstance(run.output, E.InvalidDocumentError), repr(run.output)
    message = str(run.output)
    assert "#5599" in message and "'big-5599'" in message and "'text'" in message, message
    assert "UTF-8" in message and "Chroma rejected" not in message, message
    assert _count(raw_client, tenant, "big") == 0  # before the fix: 5,461


BAD_DOCS = [
    pytest.param({"id": "bad" + SURROGATE}, ["#1", "'id'"], id="surrogate-in-id"),
    pytest.param({"metadata": {"k": "v" + SURROGATE}}, ["'bad'", "metadata['k']"], id="surrogate-in-metadata-value"),
    pytest.param({"metadata": {"k" + SURROGATE: "v"}}, ["'bad'", "metadata key"], id="surrogate-in-metadata-key"),
    pytest.param({"metadata": {"k": ["ok", SURROGATE]}}, ["'bad'", "metadata['k'][1]"], id="surrogate-in-metadata-list"),
]


@pytest.mark.parametrize(("override", "names"), BAD_DOCS)
def test_surrogates_anywhere_in_a_document_are_refused_by_name(
    tenant: str, raw_client: Any, override: dict[str, Any], names: list[str]
) -> None:
    docs = [{"id": "fresh", "text": "a valid new document"}, {"id": "bad", "text": "text", **override}]
    run = _run(tenant, ft.ingest_steps("surr", [docs]))
    assert isinstance(run.output, E.InvalidDocumentError), repr(run.output)
    assert all(n in str(run.output) for n in names), str(run.output)
    assert _count(raw_client, tenant, "surr") == 0


def test_surrogates_in_questions_and_delete_ids_are_refused_by_name(tenant: str) -> None:
    assert _run(tenant, ft.ingest_steps("qss", [ft.docs("q", 3)])).has_succeeded
    asked = _run(tenant, [{"task": "query", "args": ["qss", ["fine", "bad " + SURROGATE]]}])
    assert isinstance(asked.output, E.InvalidQueryError), repr(asked.output)
    assert "question #1" in str(asked.output) and "UTF-8" in str(asked.output)
    dropped = _run(tenant, [{"task": "delete_documents", "args": ["qss"], "kwargs": {"ids": ["q-0", SURROGATE]}}])
    assert isinstance(dropped.output, E.InvalidQueryError), repr(dropped.output)
    assert "ids[1]" in str(dropped.output)


def test_a_raising_embedding_function_is_named_not_blamed_on_chroma(
    tenant: str, raw_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(ft.FAIL_TEXT_ENV, "boom")
    docs = [{"id": "a", "text": "boom goes the backend"}]
    run = _run(tenant, [*ft.ingest_steps("efail", [docs])])
    assert isinstance(run.output, E.EmbeddingFunctionError), repr(run.output)
    message = str(run.output)
    assert "HashEmbedding" in message and "embedding backend down" in message, message
    assert "Chroma rejected" not in message and "not called" in message, message
    assert ft.retry_failures(run.events) <= 1  # permanent: not retried
    assert _count(raw_client, tenant, "efail") == 0
    assert os.environ[ft.FAIL_TEXT_ENV] == "boom"
