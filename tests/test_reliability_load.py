"""Load: 4 writer processes and 2 reader processes on one tenant collection of the real server.

Writers ingest overlapping (``s-*``) and disjoint (``w<i>-*``) ids through Flux, one execution
per batch; after every step each process queries the newest records that the OTHER writers
reported as committed and must find them at once. The throughput figure is computed from the
run and printed (``LOAD:`` line), never asserted; docs/reliability.md quotes it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import fault_tools as ft
import pytest

WRITERS, READERS = 4, 2
OWN, SHARED, BATCH = 200, 100, 50
COLLECTION = "load-shared"


def writer_batches(index: int) -> list[list[dict[str, Any]]]:
    """Writer ``index``'s documents: its own ids and the shared ids, rotated so writers overlap."""
    shared = ft.docs("s", SHARED)
    shift = index * SHARED // WRITERS
    mixed = []
    own = ft.docs(f"w{index}", OWN)
    rotated = shared[shift:] + shared[:shift]
    for i in range(max(len(own), len(rotated))):
        mixed += own[2 * i : 2 * i + 2] + rotated[i : i + 1]
    return [mixed[i : i + BATCH] for i in range(0, len(mixed), BATCH)]


def load_main() -> None:
    """A load-test process (config in ``$FC_LOAD``): a ``writer`` ingests its batches, a
    ``reader`` queries until every writer is done. Both check after every step that the latest
    records other writers reported as committed are found at once. Waits for ``go`` on stdin.
    """
    cfg = json.loads(os.environ["FC_LOAD"])
    folder, me = Path(cfg["folder"]), cfg["name"]
    base = {"tenant": cfg["tenant"], "hash_dim": cfg["hash_dim"], "options": {"url": cfg["url"]}}
    summary: dict[str, Any] = {
        "name": me,
        "errors": [],
        "checks": 0,
        "misses": [],
        "docs": 0,
        "receipts": [],
    }

    def run(steps: list[dict[str, Any]]) -> Any:
        result = ft.describe(ft.steps_wf.run({**base, "steps": steps}))
        if not result["ok"]:
            summary["errors"].append(f"{result['error_type']}: {result['error']}")
        return result["output"]

    def check_others() -> None:
        for log in sorted(folder.glob("*.committed")):
            text = log.read_text() if log.stem != me else ""
            lines = text[: text.rfind("\n") + 1].splitlines()  # complete lines only
            if not lines:
                continue
            rid = lines[-1]
            step = {
                "task": "query",
                "args": [cfg["collection"], rid],
                "kwargs": {"k": 1, "where": {"key": rid}},
            }
            hits = run([step])
            summary["checks"] += 1
            if not hits or [h["id"] for h in hits[0]] != [rid]:
                summary["misses"].append(rid)

    run([{"task": "list_collections"}])  # warm up: imports, client, Flux database
    ft.reply({"ready": os.getpid()})
    assert json.loads(sys.stdin.readline()) == "go"
    summary["started"] = time.time()
    if cfg["role"] == "writer":
        for batch in cfg["batches"]:
            receipts = run(ft.ingest_steps(cfg["collection"], [batch]))
            summary["docs"] += len(batch)
            if receipts:
                summary["receipts"] += receipts
                with open(folder / f"{me}.committed", "a") as log:
                    log.write("".join(f"{d['id']}\n" for d in batch))
            check_others()
        summary["finished"] = time.time()
        (folder / f"{me}.done").touch()
        ft.wait_until(lambda: len(list(folder.glob("*.done"))) >= cfg["writers"], "all writers")
        check_others()  # every other writer has committed everything by now
    else:
        while len(list(folder.glob("*.done"))) < cfg["writers"]:
            check_others()
        check_others()
        summary["finished"] = time.time()
    ft.reply(summary)


@pytest.mark.slow
def test_four_writers_two_readers_exact_counts_and_immediate_visibility(
    url: str,
    tenant: str,
    tmp_path: Path,
    raw_client: Any,
    capsys: pytest.CaptureFixture[str],
    record_property: Any,
) -> None:
    folder = tmp_path / "load"
    folder.mkdir()
    common = {
        "folder": str(folder),
        "tenant": tenant,
        "url": url,
        "hash_dim": 16,
        "collection": COLLECTION,
        "writers": WRITERS,
    }
    configs = [
        {**common, "role": "writer", "name": f"w{i}", "batches": writer_batches(i)}
        for i in range(WRITERS)
    ]
    configs += [{**common, "role": "reader", "name": f"r{j}"} for j in range(READERS)]
    procs: list[ft.WorkerProcess] = []
    try:
        for cfg in configs:
            procs.append(
                ft.WorkerProcess(
                    tmp_path / cfg["name"],
                    env={"FC_LOAD": json.dumps(cfg)},
                    code="import test_reliability_load as t; t.load_main()",
                )
            )
        for proc in procs:
            assert "ready" in proc.read()
        for proc in procs:
            proc.send("go")
        summaries = [proc.read() for proc in procs]
    finally:
        for proc in procs:
            proc.close()

    for summary in summaries:
        assert summary["errors"] == [], summary
        assert summary["misses"] == [], summary  # another process's committed write was not seen
        assert summary["checks"] >= 1, summary
    writers = summaries[:WRITERS]
    for summary in writers:
        receipts = summary["receipts"]
        assert (
            sum(r["upserted"] + r["skipped"] for r in receipts) == summary["docs"] == OWN + SHARED
        )

    expected = {
        d["id"]: d["text"] for i in range(WRITERS) for batch in writer_batches(i) for d in batch
    }
    assert len(expected) == WRITERS * OWN + SHARED
    stored = raw_client.get_collection(f"{tenant}__{COLLECTION}").get(include=["documents"])
    assert dict(zip(stored["ids"], stored["documents"], strict=True)) == expected
    assert raw_client.get_collection(f"{tenant}__{COLLECTION}").count() == len(expected)

    seconds = max(s["finished"] for s in writers) - min(s["started"] for s in writers)
    submitted = sum(s["docs"] for s in writers)
    checks = sum(s["checks"] for s in summaries)
    line = (
        f"LOAD: {WRITERS} writers + {READERS} readers, {submitted} docs submitted "
        f"({len(expected)} unique) in {seconds:.1f} s = {submitted / seconds:.0f} docs/s submitted, "
        f"{len(expected) / seconds:.0f} unique docs/s; {checks} cross-process visibility queries, 0 misses"
    )
    record_property("load", line)
    with capsys.disabled():
        print("\n" + line)
