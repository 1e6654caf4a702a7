"""cache=True reuses embeddings and never skips a write (the wipe scenario)."""

from __future__ import annotations

from pathlib import Path

import chromadb
from workflows import ingest_wf, query_wf

from flux_chroma import ChromaServer

DOCS = [{"id": f"w{i}", "text": f"wipe scenario document {i} about topic {i % 7}"} for i in range(60)]


def _count(server: ChromaServer, name: str) -> int:
    return chromadb.HttpClient(host="127.0.0.1", port=server.port).get_collection(name).count()


def test_wiped_server_gets_everything_back_from_cache_without_embedding(tmp_path: Path, tenant: str) -> None:
    payload = {"tenant": tenant, "collection": "wiped", "docs": DOCS}
    with ChromaServer(tmp_path / "first", port=0) as first:
        run = ingest_wf.run({**payload, "options": {"url": first.url, "cache": True}})
        assert run.has_succeeded, run.output
        assert run.output["embedded"] == len(DOCS) and run.output["cache_hits"] == 0

    # The data is gone (a new, empty server); Flux's own cache would now skip the write.
    with ChromaServer(tmp_path / "second", port=0) as empty:
        again = ingest_wf.run({**payload, "options": {"url": empty.url, "cache": True}})
        assert again.has_succeeded, again.output
        assert again.output["added"] == len(DOCS)
        assert again.output["embedded"] == 0 and again.output["cache_hits"] == len(DOCS)
        assert again.output["embed_seconds"] == 0.0
        assert _count(empty, f"{tenant}__wiped") == len(DOCS)

        # One changed document misses alone; the rest stay hits; the write is exact.
        edited = [dict(d) for d in DOCS]
        edited[5]["text"] = "a rewritten document"
        third = ingest_wf.run({**payload, "docs": edited, "options": {"url": empty.url, "cache": True}})
        assert third.output["updated"] == 1 and third.output["skipped"] == len(DOCS) - 1
        assert third.output["embedded"] == 1

        found = query_wf.run(
            {"tenant": tenant, "collection": "wiped", "question": "a rewritten document", "k": 1,
             "options": {"url": empty.url, "cache": True}}
        )
        assert found.has_succeeded and found.output[0]["id"] == "w5"
