"""End to end through Flux: real server, real default model, real executions."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from workflows import housekeeping_wf, ingest_wf, query_wf

SAMPLE = [
    {"id": "flux", "text": "Flux persists every state transition."},
    {"id": "sse", "text": "Workers claim executions over SSE."},
    {"id": "chroma", "text": "ChromaDB is an embedding database.", "metadata": {"topic": "db", "stars": 5}},
]


def test_quickstart_question_ranks_chroma_first(tenant: str) -> None:
    run = ingest_wf.run({"tenant": tenant, "collection": "handbook", "docs": SAMPLE})
    assert run.has_succeeded, run.output
    receipt = run.output
    assert receipt["physical_name"] == f"{tenant}__handbook"
    assert receipt["upserted"] == 3 and receipt["embedded"] == 3
    assert receipt["embedding"]["name"] == "default" and receipt["embedding"]["dimension"] == 384
    json.dumps(receipt)  # plain JSON

    found = query_wf.run({"tenant": tenant, "collection": "handbook", "question": "what is chroma?", "k": 3})
    assert found.has_succeeded, found.output
    hits = found.output
    assert hits[0]["id"] == "chroma"
    assert hits[0]["metadata"] == {"topic": "db", "stars": 5}  # no fc_* keys leak out
    assert set(hits[0]) == {"id", "document", "metadata", "distance"}
    assert all(type(h["distance"]) is float for h in hits)
    json.dumps(hits)


def test_list_of_questions_gives_one_list_each(tenant: str) -> None:
    assert ingest_wf.run({"tenant": tenant, "collection": "kb1", "docs": SAMPLE}).has_succeeded
    found = query_wf.run(
        {"tenant": tenant, "collection": "kb1", "question": ["what is chroma?", "how do workers get executions?"], "k": 1}
    )
    assert found.has_succeeded, found.output
    assert [[h["id"] for h in hits] for hits in found.output] == [["chroma"], ["sse"]]


def test_where_filter(tenant: str) -> None:
    assert ingest_wf.run({"tenant": tenant, "collection": "kb2", "docs": SAMPLE}).has_succeeded
    found = query_wf.run(
        {"tenant": tenant, "collection": "kb2", "question": "anything", "k": 5, "where": {"topic": "db"}}
    )
    assert found.has_succeeded, found.output
    assert [h["id"] for h in found.output] == ["chroma"]


def test_running_the_same_ingest_twice_changes_nothing(tenant: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    first = ingest_wf.run({"tenant": tenant, "collection": "twice", "docs": SAMPLE})
    second = ingest_wf.run({"tenant": tenant, "collection": "twice", "docs": SAMPLE})
    assert first.has_succeeded and second.has_succeeded
    assert raw_client.get_collection(f"{tenant}__twice").count() == 3
    assert second.output["upserted"] == 0 and second.output["skipped"] == 3
    assert second.output["embedded"] == 0


def test_changed_record_is_rewritten_and_removed_metadata_keys_disappear(tenant: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    assert ingest_wf.run({"tenant": tenant, "collection": "edit", "docs": SAMPLE}).has_succeeded
    edited = [dict(SAMPLE[2], metadata={"topic": "database"})]  # "stars" removed
    run = ingest_wf.run({"tenant": tenant, "collection": "edit", "docs": edited})
    assert run.has_succeeded, run.output
    assert run.output["updated"] == 1 and run.output["added"] == 0
    stored = raw_client.get_collection(f"{tenant}__edit").get(ids=["chroma"], include=["metadatas"])
    meta = stored["metadatas"][0]
    assert meta["topic"] == "database" and "stars" not in meta


def test_two_os_processes_see_each_others_writes_immediately(tenant: str, url: str) -> None:
    script = textwrap.dedent(
        """
        import asyncio, json, sys
        from flux_chroma.chroma.collections import Target
        from flux_chroma.chroma.naming import Namespace
        from flux_chroma.tasks.reader import query_collection
        from flux_chroma.chroma.settings import ConnectionSettings
        from flux_chroma.tasks.validation import validate_documents
        from flux_chroma.tasks.writer import WriteOptions, write_documents

        url, tenant, me, other = sys.argv[1:5]
        target = Target(ConnectionSettings(url), Namespace(tenant), "shared")
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "write":
                docs = validate_documents([{"id": me, "text": f"note written by process {me}"}])
                write_documents(target, docs, WriteOptions())
                print("written", flush=True)
            elif cmd == "read":
                hits, _ = query_collection(target, [f"note written by process {other}"], k=10, where=None, where_document=None)
                print(json.dumps(sorted(h["id"] for h in hits[0])), flush=True)
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", script, url, tenant, me, other],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for me, other in (("alpha", "beta"), ("beta", "alpha"))
    ]
    try:
        def ask(proc: subprocess.Popen[str], cmd: str) -> str:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(cmd + "\n")
            proc.stdin.flush()
            return proc.stdout.readline().strip()

        a, b = procs
        assert ask(a, "write") == "written"
        assert json.loads(ask(b, "read")) == ["alpha"]  # B sees A's write at once
        assert ask(b, "write") == "written"
        assert json.loads(ask(a, "read")) == ["alpha", "beta"]  # and A sees B's
        assert json.loads(ask(b, "read")) == ["alpha", "beta"]
    finally:
        for proc in procs:
            if proc.stdin:
                proc.stdin.close()
            proc.wait(timeout=60)


def test_housekeeping_list_delete_documents_and_collection(tenant: str) -> None:
    assert ingest_wf.run({"tenant": tenant, "collection": "house", "docs": SAMPLE}).has_succeeded
    listed = housekeeping_wf.run({"tenant": tenant, "op": "list"})
    assert listed.has_succeeded, listed.output
    assert [c["name"] for c in listed.output] == ["house"]
    assert listed.output[0]["count"] == 3 and listed.output[0]["pin"]["name"] == "default"

    deleted = housekeeping_wf.run(
        {"tenant": tenant, "op": "delete_documents", "collection": "house", "ids": ["flux", "nope"]}
    )
    assert deleted.has_succeeded and deleted.output["deleted"] == 1
    by_where = housekeeping_wf.run(
        {"tenant": tenant, "op": "delete_documents", "collection": "house", "where": {"topic": "db"}}
    )
    assert by_where.has_succeeded and by_where.output["deleted"] == 1

    gone = housekeeping_wf.run({"tenant": tenant, "op": "delete_collection", "collection": "house"})
    assert gone.has_succeeded and gone.output == {"collection": "house", "deleted": True}
    again = housekeeping_wf.run({"tenant": tenant, "op": "delete_collection", "collection": "house"})
    assert again.has_succeeded and again.output["deleted"] is False
    assert housekeeping_wf.run({"tenant": tenant, "op": "list"}).output == []
