"""Erasing a tenant on a real Chroma server, in both tenancy modes, next to a tenant whose id
starts with the erased one's (``T`` and ``T-eu``): nothing of ``T`` is left in Chroma or in
the embedding cache, and ``T-eu`` is byte-identical before and after."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import chromadb
import pytest
from cli_inproc import run_cli
from erasure_workflows import erase, fill_tenant
from ingest_workflows import write_docs

from flux_chroma import ChromaServer
from flux_chroma.chroma.aliases import set_alias
from flux_chroma.chroma.naming import Namespace
from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.embedding.cache import default_cache_dir
from flux_chroma.erasure import TenantBusyError

HERE = Path(__file__).parent
SHARED = "a text both tenants store"


def _docs(tenant: str, n: int) -> list[dict[str, Any]]:
    docs = [{"id": f"d{i}", "text": f"{tenant} private text number {i}", "metadata": {"i": i}} for i in range(n)]
    return [*docs, {"id": "shared", "text": SHARED}]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _cache_hashes() -> set[str]:
    import diskcache

    with diskcache.Cache(str(default_cache_dir())) as cache:
        return {str(k).rsplit(":", 1)[-1] for k in cache.iterkeys()}


def _snapshot(port: int, tenant: str, tenancy: str) -> str:
    """Every collection of ``tenant`` with its metadata and every record, as canonical JSON."""
    database = tenant if tenancy == "database" else "default_database"
    client = chromadb.HttpClient(host="127.0.0.1", port=port, database=database)
    out = {}
    for collection in client.list_collections():
        if tenancy == "prefix" and not collection.name.startswith(f"{tenant}__"):
            continue
        got = collection.get(include=["documents", "metadatas", "embeddings"])
        rows = sorted(
            zip(got["ids"], got["documents"], got["metadatas"], [list(map(float, e)) for e in got["embeddings"]], strict=True)
        )
        out[collection.name] = {"metadata": collection.metadata, "rows": rows}
    return json.dumps(out, sort_keys=True)


def _left(port: int, tenant: str, tenancy: str) -> list[str]:
    admin = chromadb.AdminClient(chromadb.Settings(chroma_server_host="127.0.0.1", chroma_server_http_port=port, chroma_api_impl="chromadb.api.fastapi.FastAPI"))
    if tenancy == "database":
        return [d["name"] for d in admin.list_databases() if d["name"] == tenant]
    client = chromadb.HttpClient(host="127.0.0.1", port=port)
    return [c.name for c in client.list_collections() if c.name.startswith(f"{tenant}__")]


@pytest.mark.parametrize("tenancy", ["prefix", "database"])
def test_erasing_a_tenant_leaves_nothing_of_it_and_its_prefix_neighbour_byte_identical(
    chroma_server: ChromaServer, tenant: str, tenancy: str
) -> None:
    neighbour = f"{tenant}-eu"  # the erased tenant's id is a prefix of this one's
    for who, n in ((tenant, 4), (neighbour, 3)):
        for collection in ("notes", "archive"):
            run = fill_tenant.run({"tenant": who, "tenancy": tenancy, "collection": collection, "docs": _docs(who, n)})
            assert run.has_succeeded, run.output
    settings = ConnectionSettings.resolve(chroma_server.url)
    set_alias(settings, Namespace(tenant, tenancy), "current", "notes")  # type: ignore[arg-type]
    before = _snapshot(chroma_server.port, neighbour, tenancy)
    private = {_sha(d["text"]) for d in _docs(tenant, 4) if d["id"] != "shared"}
    assert private <= _cache_hashes() and _sha(SHARED) in _cache_hashes()

    dry = erase.run({"tenant": tenant, "tenancy": tenancy, "confirm": False})
    assert dry.has_succeeded, dry.output
    assert dry.output["dry_run"] and dry.output["records"] == 11 and dry.output["aliases"] == 1  # 10 docs + the alias
    assert dry.output["cache_entries_to_delete"] == 4 and dry.output["cache_entries_kept_shared"] == 1
    assert len(_left(chroma_server.port, tenant, tenancy)) >= 1 and private <= _cache_hashes()  # nothing erased

    done = erase.run({"tenant": tenant, "tenancy": tenancy, "confirm": True})
    assert done.has_succeeded, done.output
    receipt = done.output
    # notes, archive and the alias registry; 2 x 5 documents and the alias
    assert receipt["collections_deleted"] == 3 and receipt["records_deleted"] == 11
    assert receipt["cache_entries_deleted"] == 4 and receipt["cache_entries_kept_shared"] == 1
    assert receipt["database_deleted"] is (tenancy == "database")
    assert _left(chroma_server.port, tenant, tenancy) == []
    assert not private & _cache_hashes()
    assert _sha(SHARED) in _cache_hashes()  # the neighbour stores it too: kept
    assert _snapshot(chroma_server.port, neighbour, tenancy) == before

    replayed = erase.run(execution_id=done.execution_id)  # replay: the receipt, nothing run again
    assert replayed.output == receipt
    again = erase.run({"tenant": tenant, "tenancy": tenancy, "confirm": True})  # idempotent
    assert again.has_succeeded, again.output
    assert (again.output["collections_deleted"], again.output["records_deleted"], again.output["cache_entries_deleted"]) == (0, 0, 0)
    assert _snapshot(chroma_server.port, neighbour, tenancy) == before


def test_erasing_while_an_ingestion_job_of_the_tenant_runs_fails_before_deleting_anything(
    chroma_server: ChromaServer, tenant: str, tmp_path: Path
) -> None:
    docs = tmp_path / "docs"
    write_docs(docs, [f"n{i}" for i in range(8)])
    job = {
        "tenant": tenant,
        "collection": "notes",
        "sources": [{"kind": "files", "path": str(docs), "id": "notes"}],
        "chunking": {"size": 120, "overlap": 20},
        "batch_size": 8,
        "embedding_function": {"name": "counting-toy"},
    }
    spec, marker = tmp_path / "job.json", tmp_path / "marker"
    spec.write_text(json.dumps(job))
    child = subprocess.Popen(  # an ingestion job that stops (alive, holding its job lock) after batch 1
        [sys.executable, str(HERE / "ingest_workflows.py"), str(spec)],
        env={**os.environ, "FC_BLOCK_AFTER_BATCH": "1", "FC_MARKER": str(marker)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240  # a guard against a hung child only
        while not marker.exists():
            assert child.poll() is None, child.communicate()[1][-3000:]
            assert time.monotonic() < deadline
            time.sleep(0.05)
        before = _snapshot(chroma_server.port, tenant, "prefix")
        busy = erase.run({"tenant": tenant, "tenancy": "prefix", "confirm": True})
        assert not busy.has_succeeded
        assert isinstance(busy.output, TenantBusyError), repr(busy.output)
        assert "running ingestion job" in str(busy.output) and "nothing was erased" in str(busy.output)
        assert _snapshot(chroma_server.port, tenant, "prefix") == before != "{}"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    done = erase.run({"tenant": tenant, "tenancy": "prefix", "confirm": True})  # the job is gone: erasable
    assert done.has_succeeded, done.output
    assert _left(chroma_server.port, tenant, "prefix") == []


def test_the_cli_lists_without_yes_and_erases_with_it(chroma_server: ChromaServer, tenant: str) -> None:
    run = fill_tenant.run({"tenant": tenant, "tenancy": "prefix", "collection": "notes", "docs": _docs(tenant, 2)})
    assert run.has_succeeded, run.output

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return run_cli("tenant", "erase", tenant, "--url", chroma_server.url, *args)

    dry = cli()
    assert dry.returncode == 0, dry.stderr
    assert f"tenant {tenant} (prefix): would erase" in dry.stdout and f"{tenant}__notes" in dry.stdout
    assert "dry run: nothing was erased" in dry.stdout
    assert _left(chroma_server.port, tenant, "prefix") == [f"{tenant}__notes"]
    done = cli("--yes", "--json")
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert receipt["collections_deleted"] == 1 and receipt["records_deleted"] == 3 and not receipt["dry_run"]
    assert _left(chroma_server.port, tenant, "prefix") == []
    bad = run_cli("tenant", "erase", "Acme_EU")
    assert bad.returncode == 2 and "may only contain lowercase" in bad.stderr
