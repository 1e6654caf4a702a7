"""Server state replaced under a live worker process.

One long-lived worker OS process runs workflow after workflow (one for the module). Between its runs the test
drops and recreates its collection with a raw client, or replaces the whole server with one
restored from an older snapshot (same directory, same port). The worker's next write AND its
next query (both orders) must see the server's current state: no cached collection handle,
pin, database or client may serve old state or fail with an obscure error.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fault_tools as ft
import pytest

DIM = 16
EF = ft.HashEmbedding(DIM)


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ft.WorkerProcess]:
    """A long-lived worker process (one Python process for every workflow of the module)."""
    proc = ft.WorkerProcess(tmp_path_factory.mktemp("worker"))
    try:
        assert proc.read() == {"ready": proc.proc.pid}
        yield proc
    finally:
        proc.close()


@pytest.fixture(scope="module")
def snap_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ft.OwnServer, Path]]:
    """A dedicated server and its snapshot S0, taken before anything existed on it.

    The snapshot tests share it, each in its own tenant: S0 holds no collection and no
    database of any of them.
    """
    folder = tmp_path_factory.mktemp("snap")
    server = ft.OwnServer(folder / "server")
    try:
        server.snapshot(folder / "empty")
        yield server, folder / "empty"
    finally:
        server.stop()


class Live:
    """Drive the worker: ``add``/``ask``/``drop`` are workflow runs inside the worker process."""

    def __init__(
        self, worker: ft.WorkerProcess, tenant: str, url: str, tenancy: str = "prefix"
    ) -> None:
        self.worker, self.tenant = worker, tenant
        self.options = {"url": url, "tenancy": tenancy, "retry_max_attempts": 0}

    def _run(self, steps: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        return self.worker.run(
            {"tenant": self.tenant, "options": self.options, "steps": steps, **extra}
        )

    def add(self, collection: str, *ids: str, new: bool = False) -> dict[str, Any]:
        """Upsert documents with these ids.

        Only a ``new`` collection gets ``embedding_function=HashEmbedding``; other calls (and
        every query) resolve the pinned function, so the worker keeps ONE cached resolution
        per collection across runs: the state that could go stale.
        """
        docs = [{"id": i, "text": f"text of {i}", "metadata": {"key": i}} for i in ids]
        return self._run(ft.ingest_steps(collection, [docs]), **({"hash_dim": DIM} if new else {}))

    def ask(self, collection: str) -> dict[str, Any]:
        """Query with k=50; ``output`` becomes the sorted ids found."""
        result = self._run(
            [{"task": "query", "args": [collection, "text of"], "kwargs": {"k": 50}}]
        )
        if result["ok"]:
            result["output"] = sorted(h["id"] for h in result["output"][0])
        return result

    def delete(self, collection: str, *ids: str) -> dict[str, Any]:
        """delete_documents by ids."""
        return self._run(
            [{"task": "delete_documents", "args": [collection], "kwargs": {"ids": list(ids)}}]
        )


def ids_of(client: Any, physical: str) -> list[str]:
    """The ids the server holds in a collection."""
    return sorted(client.get_collection(physical, embedding_function=None).get(include=[])["ids"])


def recreate(client: Any, physical: str, *ids: str, pinned: bool = True) -> None:
    """Drop ``physical`` and create it again (new id) with ``ids``, as another tool would."""
    metadata = client.get_collection(physical, embedding_function=None).metadata if pinned else None
    client.delete_collection(physical)
    coll = client.create_collection(physical, metadata=metadata, embedding_function=None)
    if ids:
        texts = [f"text of {i}" for i in ids]
        coll.add(
            ids=list(ids),
            documents=texts,
            embeddings=[EF.vector(t) for t in texts],
            metadatas=[{"key": i} for i in ids],
        )


def expect_ok(result: dict[str, Any]) -> Any:
    assert result["ok"], result
    return result["output"]


def expect_error(result: dict[str, Any], error: str, *culprits: str) -> None:
    assert not result["ok"] and result["error_type"] == error, result
    for culprit in culprits:
        assert culprit in result["error"], result["error"]


def test_collection_dropped_and_recreated_under_a_live_worker(
    worker: ft.WorkerProcess, tenant: str, url: str, raw_client: Any
) -> None:
    live, phys = Live(worker, tenant, url), f"{tenant}__live"
    expect_ok(live.add("live", "a-0", "a-1", new=True))
    assert expect_ok(live.ask("live")) == ["a-0", "a-1"]  # handle and pin now cached

    recreate(raw_client, phys, "b-0")  # query first, then write
    assert expect_ok(live.ask("live")) == ["b-0"]
    assert expect_ok(live.add("live", "c-0"))[0]["added"] == 1
    assert ids_of(raw_client, phys) == ["b-0", "c-0"]

    recreate(raw_client, phys, "d-0")  # write first, then query
    assert expect_ok(live.add("live", "e-0"))[0]["added"] == 1
    assert ids_of(raw_client, phys) == ["d-0", "e-0"]
    assert expect_ok(live.ask("live")) == ["d-0", "e-0"]

    assert expect_ok(live.delete("live", "e-0"))[0]["deleted"] == 1  # housekeeping path
    recreate(raw_client, phys, "f-0", "f-1")
    assert expect_ok(live.delete("live", "f-0"))[0]["deleted"] == 1
    assert ids_of(raw_client, phys) == ["f-1"]

    raw_client.delete_collection(phys)  # dropped for good: a clear error, then a fresh start
    expect_error(live.ask("live"), "CollectionNotFoundError", "'live'", tenant)
    assert expect_ok(live.add("live", "g-0", new=True))[0]["added"] == 1
    assert ids_of(raw_client, phys) == ["g-0"]
    assert "fc_pin" in raw_client.get_collection(phys).metadata

    recreate(raw_client, phys, "h-0", pinned=False)  # replaced by a foreign, unpinned collection
    expect_error(live.add("live", "i-0"), "UnpinnedCollectionError", "'" + tenant + "/live'")
    expect_error(live.ask("live"), "UnpinnedCollectionError", "'" + tenant + "/live'")
    assert ids_of(raw_client, phys) == ["h-0"]


@pytest.mark.parametrize("tenancy", ["prefix", "database"])
@pytest.mark.slow
def test_server_restored_from_older_snapshots_under_a_live_worker(
    worker: ft.WorkerProcess,
    snap_server: tuple[ft.OwnServer, Path],
    tenant: str,
    tmp_path: Path,
    tenancy: str,
) -> None:
    server, empty = snap_server  # S0, `empty`: before anything existed
    try:
        live = Live(worker, tenant, server.url, tenancy)
        expect_ok(live.add("snap", "a-0", "a-1", new=True))
        assert expect_ok(live.ask("snap")) == ["a-0", "a-1"]
        server.snapshot(tmp_path / "with-a")  # S1: a-0, a-1
        expect_ok(live.add("snap", "b-0"))
        expect_ok(live._run([{"task": "delete_collection", "args": ["snap"]}]))
        expect_ok(live.add("snap", "c-0", new=True))  # a new collection id, cached by the worker
        assert expect_ok(live.ask("snap")) == ["c-0"]

        server.restore(tmp_path / "with-a")  # back to S1, while the worker lives on
        assert expect_ok(live.ask("snap")) == ["a-0", "a-1"]
        assert expect_ok(live.add("snap", "d-0", new=True))[0]["added"] == 1  # a fresh EF object
        assert expect_ok(live.ask("snap")) == ["a-0", "a-1", "d-0"]

        server.restore(empty)  # back to S0: no collection (and no database); write first
        assert expect_ok(live.add("snap", "e-0", new=True))[0]["added"] == 1
        assert expect_ok(live.ask("snap")) == ["e-0"]
        assert expect_ok(live.delete("snap", "e-0"))[0]["deleted"] == 1
        expect_error(live.ask("gone"), "CollectionNotFoundError", "'gone'", tenant)
    finally:
        if server.server.pid is None:  # a failed restore left it down: up for the next test
            server.restart()
