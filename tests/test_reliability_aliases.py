"""Migrations and aliases never touch the wrong collection (issue #15, items 2 and 3).

* A migration into a non-empty target it did not create used to "reconcile" it by deleting
  its 5 unrelated records, then switch the alias.
* After a migration switched alias ``kbase``, ``delete_documents("kbase", ids=["k1"])``
  answered ``{"deleted": 1}`` but deleted from the OLD physical collection, and ``query``
  still returned ``k1`` at distance 0.0; ``embed_and_add("kbase", ...)`` wrote where readers
  never look. Every task now addresses the same collection for the same name.
"""

from __future__ import annotations

from typing import Any

import fault_tools as ft

from flux_chroma import errors as E
from flux_chroma.chroma.aliases import get_alias
from flux_chroma.chroma.naming import Namespace
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.ingest import run_migration

OLD, NEW = 16, 32  # HashEmbedding dimensions: the old and the new model
KB = [{"id": f"k{i}", "text": f"kbase record {i}"} for i in range(1, 4)]


def _steps(tenant: str, dim: int, steps: list[dict[str, Any]]) -> Any:
    return ft.steps_wf.run({"tenant": tenant, "hash_dim": dim, "steps": steps})


def _migrate(tenant: str, **extra: Any) -> Any:
    ef = {"name": ft.HashEmbedding.name(), "config": {"dim": NEW}}
    return run_migration({"tenant": tenant, "collection": "kbase", "embedding_function": ef, "batch_size": 2, **extra})


def test_migration_refuses_a_non_empty_target_it_did_not_create(tenant: str, url: str, raw_client: Any) -> None:
    assert _steps(tenant, OLD, ft.ingest_steps("kbase", [KB])).has_succeeded
    archive = [{"id": f"a{i}", "text": f"unrelated archive record {i}"} for i in range(5)]
    assert _steps(tenant, NEW, ft.ingest_steps("archive", [archive])).has_succeeded  # same new model

    run = _migrate(tenant, target="archive")
    assert run.has_failed
    assert isinstance(run.output, E.ConfigurationError), repr(run.output)
    message = str(run.output)
    assert f"{tenant}/archive" in message and "5 records" in message, message
    assert sorted(raw_client.get_collection(f"{tenant}__archive").get(include=[])["ids"]) == [f"a{i}" for i in range(5)]
    namespace = Namespace(tenant)
    assert get_alias(ConnectionSettings(url=url), namespace, "kbase") is None  # not switched


def test_every_task_addresses_the_collection_an_alias_points_at(tenant: str, raw_client: Any) -> None:
    assert _steps(tenant, OLD, ft.ingest_steps("kbase", [KB])).has_succeeded
    migrated = _migrate(tenant)
    assert migrated.has_succeeded, migrated.output
    new = migrated.output["target"]
    old_c, new_c = raw_client.get_collection(f"{tenant}__kbase"), raw_client.get_collection(f"{tenant}__{new}")

    deleted = _steps(tenant, NEW, [{"task": "delete_documents", "args": ["kbase"], "kwargs": {"ids": ["k1"]}}])
    assert deleted.has_succeeded, deleted.output
    assert deleted.output[0]["deleted"] == 1
    assert "k1" not in new_c.get(include=[])["ids"]  # gone where readers look
    asked = _steps(tenant, NEW, [{"task": "query", "args": ["kbase", "kbase record 1"], "kwargs": {"k": 3}}])
    assert "k1" not in [hit["id"] for hit in asked.output[0]]

    added = _steps(tenant, NEW, ft.ingest_steps("kbase", [[{"id": "k9", "text": "written through the alias"}]]))
    assert added.has_succeeded, added.output
    assert "k9" in new_c.get(include=[])["ids"] and "k9" not in old_c.get(include=[])["ids"]
    found = _steps(tenant, NEW, [{"task": "query", "args": ["kbase", "written through the alias"], "kwargs": {"k": 1}}])
    assert found.output[0][0]["id"] == "k9"

    dropped = _steps(tenant, NEW, [{"task": "delete_collection", "args": ["kbase"]}])
    assert isinstance(dropped.output, E.ConfigurationError), repr(dropped.output)
    assert f"{tenant}/{new}" in str(dropped.output) and "alias" in str(dropped.output)
    assert raw_client.get_collection(f"{tenant}__kbase").count() == 3  # nothing deleted
    assert raw_client.get_collection(f"{tenant}__{new}").count() == 3
