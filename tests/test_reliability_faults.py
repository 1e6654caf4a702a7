"""Faults injected into a real ``chroma run`` server while real Flux executions write to it.

* SIGKILL in the middle of a request of a multi-batch ingest, restart on the same port: the
  job completes through Flux retries and the final contents are exact.
* SIGSTOP mid-request: each attempt ends at its configured timeout (flux-chroma
  ``read_timeout=`` or Flux ``timeout=``) and is retried; after SIGCONT the job completes.
  Frozen past the retry budget, the execution ends (while the server is still frozen) with a
  readable ChromaUnavailableError: no worker thread blocks forever.
* Down longer than the retry budget: a readable ChromaUnavailableError that reloads by id;
  a later re-run completes the job and skips what was already written.

The scenarios share one dedicated server of this module (never the session server), each in
its own tenant; after every test the server is thawed and, if a test left it down, started
again on its port. Waits are event-driven (gate files, Flux events, socket queues); time
limits are hang guards only.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import fault_tools as ft
import numpy as np
import pytest

from flux_chroma import errors as E

DIM = 16
EF = ft.HashEmbedding(DIM)


@pytest.fixture(scope="module")
def module_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ft.OwnServer]:
    """The module's dedicated server (one ``chroma run`` start instead of one per test)."""
    server = ft.OwnServer(tmp_path_factory.mktemp("faults") / "server")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def own_server(module_server: ft.OwnServer) -> Iterator[ft.OwnServer]:
    """The dedicated server, which this test may kill, freeze or restart."""
    yield module_server
    if module_server.server.pid is not None:
        os.kill(module_server.pid, signal.SIGCONT)  # a test that failed while it was frozen
    else:
        module_server.restart()  # left down: up again on the same port for the next test


def assert_exact(server: ft.OwnServer, physical: str, expected: list[dict[str, Any]]) -> None:
    """The collection holds exactly ``expected``: ids, texts, metadata and vectors."""
    got = (
        server.client()
        .get_collection(physical, embedding_function=None)
        .get(include=["documents", "metadatas", "embeddings"])
    )
    assert sorted(got["ids"]) == sorted(d["id"] for d in expected)
    by_id = {d["id"]: d for d in expected}
    for rid, text, meta, vector in zip(
        got["ids"], got["documents"], got["metadatas"], got["embeddings"], strict=True
    ):
        assert text == by_id[rid]["text"]
        assert meta["key"] == by_id[rid]["metadata"]["key"]
        np.testing.assert_allclose(vector, EF.vector(text), atol=1e-6)


def _frozen(pid: int) -> bool:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "T"


@pytest.mark.slow
def test_sigkill_mid_request_then_restart_on_same_port_completes_exactly(
    own_server: ft.OwnServer, tenant: str, tmp_path: Path
) -> None:
    batches = [ft.docs(f"b{i}", 40) for i in range(5)]
    gate = tmp_path / "gate"
    worker = ft.WorkerProcess(tmp_path / "worker", env=ft.open_gate(gate, "b2 document"))
    try:
        assert worker.read() == {"ready": worker.proc.pid}
        options = {
            "url": own_server.url,
            "retry_max_attempts": 6,
            "retry_delay": 1,
            "retry_backoff": 2,
        }
        worker.send(
            {
                "wf": "steps_wf",
                "input": {
                    "tenant": tenant,
                    "hash_dim": DIM,
                    "options": options,
                    "steps": ft.ingest_steps("bulk", batches),
                },
            }
        )
        ft.wait_for_gate(gate, worker.has_reply)
        own_server.signal(signal.SIGSTOP)
        (gate / "release").touch()  # batch b2's upsert is sent to a frozen server ...
        ft.wait_until(lambda: own_server.pending_request_bytes() > 0, "the upsert to be in flight")
        port = own_server.server.port
        own_server.kill()  # ... which dies with the request unread
        assert own_server.server.pid is None
        threading.Event().wait(2.0)  # the injected outage: restart "a few seconds later"
        own_server.restart()
        assert own_server.server.port == port
        result = worker.read()
    finally:
        worker.close()

    assert result["ok"], result
    assert result["retry_failures"] >= 1  # batch b2 failed at least once and was retried
    receipts = result["output"]
    assert [r["added"] for r in receipts] == [40] * 5  # the killed request never landed
    assert sum(r["upserted"] for r in receipts) == 200
    assert_exact(own_server, f"{tenant}__bulk", [d for batch in batches for d in batch])


@pytest.mark.parametrize(
    "timeouts",
    [{"read_timeout": 1}, {"timeout": 1}],
    ids=["flux-chroma-read_timeout", "flux-task-timeout"],
)
def test_sigstop_mid_request_times_out_retries_and_completes_after_sigcont(
    own_server: ft.OwnServer,
    tenant: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    timeouts: dict[str, int],
) -> None:
    gate = tmp_path / "gate"
    for key, value in ft.open_gate(gate, "b1 document").items():
        monkeypatch.setenv(key, value)
    batches = [ft.docs(f"b{i}", 10) for i in range(3)]
    options = {
        "url": own_server.url,
        "retry_max_attempts": 10,
        "retry_delay": 1,
        "retry_backoff": 1,
        **timeouts,
    }
    run = ft.BackgroundRun(
        ft.steps_wf,
        {
            "tenant": tenant,
            "hash_dim": DIM,
            "options": options,
            "steps": ft.ingest_steps("frozen", batches),
        },
    )
    try:
        ft.wait_for_gate(gate, run.done)
        own_server.signal(signal.SIGSTOP)
        (gate / "release").touch()
        # Two attempts end while the server is frozen: only their timeouts can end them.
        ft.wait_until(
            lambda: ft.retry_failures(run.events) >= 2 or run.done(), "two timed-out attempts"
        )
        assert _frozen(own_server.pid) and not run.done()
    finally:
        own_server.signal(signal.SIGCONT)
    ctx = run.join()
    assert ctx.has_succeeded, ctx.output
    assert ft.retry_failures(ctx.events) >= 2
    assert_exact(own_server, f"{tenant}__frozen", [d for batch in batches for d in batch])


@pytest.mark.parametrize(
    ("timeouts", "culprit"),
    [({"read_timeout": 1}, "got no complete answer within 1 s"), ({"timeout": 1}, "timed out")],
    ids=["flux-chroma-read_timeout", "flux-task-timeout"],
)
def test_frozen_past_the_retry_budget_fails_readably_while_still_frozen(
    own_server: ft.OwnServer,
    tenant: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    timeouts: dict[str, int],
    culprit: str,
) -> None:
    gate = tmp_path / "gate"
    for key, value in ft.open_gate(gate, "b1 document").items():
        monkeypatch.setenv(key, value)
    threads_before = threading.active_count()
    options = {
        "url": own_server.url,
        "retry_max_attempts": 2,
        "retry_delay": 1,
        "retry_backoff": 1,
        **timeouts,
    }
    run = ft.BackgroundRun(
        ft.steps_wf,
        {
            "tenant": tenant,
            "hash_dim": DIM,
            "options": options,
            "steps": ft.ingest_steps("frozen", [ft.docs("b0", 5), ft.docs("b1", 5)]),
        },
    )
    try:
        ft.wait_for_gate(gate, run.done)
        own_server.signal(signal.SIGSTOP)
        (gate / "release").touch()
        # The execution, its retries and every worker thread end although chroma stays frozen.
        ft.wait_until(run.done, "the execution to give up")
        assert _frozen(own_server.pid)
        ctx = run.join()
        assert threading.active_count() <= threads_before
    finally:
        own_server.signal(signal.SIGCONT)
    assert ctx.has_failed
    err = ctx.output
    assert type(err) is E.ChromaUnavailableError, repr(err)
    assert culprit in str(err) and "gave up after 3 attempts" in str(err)
    assert ft.retry_failures(ctx.events) == 3


def test_down_past_the_retry_budget_fails_readably_reloads_and_a_rerun_completes(
    own_server: ft.OwnServer, tenant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = tmp_path / "gate"
    for key, value in ft.open_gate(gate, "b2 document").items():
        monkeypatch.setenv(key, value)
    batches = [ft.docs(f"b{i}", 10) for i in range(4)]
    payload = {
        "tenant": tenant,
        "hash_dim": DIM,
        "steps": ft.ingest_steps("outage", batches),
        "options": {
            "url": own_server.url,
            "retry_max_attempts": 2,
            "retry_delay": 1,
            "retry_backoff": 2,
        },
    }
    run = ft.BackgroundRun(ft.steps_wf, payload)
    ft.wait_for_gate(gate, run.done)
    own_server.server.stop()  # down for longer than 1 + 2 seconds of retries
    (gate / "release").touch()
    failed = run.join()

    assert failed.has_failed
    err = failed.output
    assert type(err) is E.ChromaUnavailableError, repr(err)
    text = str(err)
    assert (
        text not in ("", "None") and own_server.url in text and "gave up after 3 attempts" in text
    )
    reloaded = ft.steps_wf.run(execution_id=failed.execution_id)  # no unpickling crash
    assert reloaded.has_failed and type(reloaded.output) is E.ChromaUnavailableError
    assert str(reloaded.output) == text

    own_server.restart()
    monkeypatch.delenv(ft.GATE_DIR_ENV)
    rerun = ft.steps_wf.run(payload)
    assert rerun.has_succeeded, rerun.output
    # b0 and b1 landed before the outage: the server says they are unchanged, so they are skipped.
    assert [r["skipped"] for r in rerun.output] == [10, 10, 0, 0]
    assert [r["added"] for r in rerun.output] == [0, 0, 10, 10]
    assert_exact(own_server, f"{tenant}__outage", [d for batch in batches for d in batch])


# ------------------------------------------------------------------------ one-owner rule
# Also covered elsewhere: str/"./"/file:// paths and a PersistentClient as url=
# (tests/test_errors.py); a live second owner, and a SIGKILLed owner whose orphaned chroma
# still holds the lock, then is taken over (tests/test_server.py).


def test_paths_and_local_clients_are_refused_through_flux(
    tenant: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import chromadb

    from flux_chroma import embed_and_add
    from flux_chroma.chroma.settings import ConnectionSettings

    data = tmp_path / "chroma-data"
    for bad in (data, "~/chroma-data"):
        with pytest.raises(E.OneOwnerError, match="filesystem path"):
            ConnectionSettings(bad)  # type: ignore[arg-type]
    with pytest.raises(E.OneOwnerError, match="chroma run"):
        embed_and_add.with_options(tenant=tenant, url=chromadb.EphemeralClient())

    steps = ft.ingest_steps("owned", [ft.docs("a", 1)])
    by_option = ft.steps_wf.run({"tenant": tenant, "options": {"url": str(data)}, "steps": steps})
    monkeypatch.setenv("FLUX_CHROMA_URL", str(data))
    by_env = ft.steps_wf.run({"tenant": tenant, "steps": steps})
    for run in (by_option, by_env):
        assert run.has_failed and type(run.output) is E.OneOwnerError, repr(run.output)
        assert "one `chroma run` process owns" in str(run.output) and "url=" in str(run.output)
        assert ft.retry_failures(run.events) == 0
    assert not data.exists()  # nothing opened or created at the path


# A racer imports only what it runs (not fault_tools, which imports chromadb and Flux): the
# replies are fault_tools' protocol lines.
RACE = f"""
import json, os, sys
from flux_chroma import ChromaServer, OneOwnerError
def reply(payload):
    print({ft.MARK!r} + json.dumps(payload), flush=True)
server = ChromaServer(os.environ["FC_RACE_DIR"], log_path=os.environ["FC_RACE_LOG"])
reply({{"ready": os.getpid()}})
sys.stdin.readline()
try:
    server.start()
    reply({{"won": server.url, "chroma_pid": server.pid}})
except OneOwnerError as err:
    reply({{"refused": str(err)}})
sys.stdin.readline()
server.stop()
"""


@pytest.mark.slow
def test_racing_owners_over_a_stale_lock_exactly_one_wins(tmp_path: Path) -> None:
    from flux_chroma.chroma.server import LOCK_FILE_NAME

    data = tmp_path / "data"
    data.mkdir()
    stale = {
        "chroma_pid": 2**22 + 7,
        "owner_pid": 2**22 + 5,
        "url": "http://127.0.0.1:9",
        "path": str(data),
        "started_at": "2020-01-01T00:00:00+00:00",
    }
    (data / LOCK_FILE_NAME).write_text(
        json.dumps(stale)
    )  # left by a SIGKILLed owner: no flock held
    racers = [
        ft.WorkerProcess(
            tmp_path / f"racer{i}",
            code=RACE,
            env={"FC_RACE_DIR": str(data), "FC_RACE_LOG": str(tmp_path / f"chroma{i}.log")},
        )
        for i in range(3)
    ]
    try:
        for racer in racers:
            assert "ready" in racer.read()
        for racer in racers:
            racer.send("go")
        results = [racer.read() for racer in racers]
        winners = [r for r in results if "won" in r]
        assert len(winners) == 1, results
        owner = json.loads((data / LOCK_FILE_NAME).read_text())
        assert owner["chroma_pid"] == winners[0]["chroma_pid"] and owner["url"] == winners[0]["won"]
        for refused in (r["refused"] for r in results if "refused" in r):
            assert str(data) in refused and "HttpClient" in refused
            assert str(stale["chroma_pid"]) not in refused and stale["url"] not in refused
    finally:
        for racer in racers:
            racer.close()
