"""A real distributed deployment on loopback: one Chroma server, one Flux server, two workers.

Run it inside the project's virtualenv::

    python examples/distributed/run_local.py [--workdir DIR] [--keep] [--summary FILE] [--flux-db sqlite]
        [--workers N] [--hold]

It starts, as separate OS processes (each in its own process group):

1. ``flux-chroma server --path WORKDIR/chroma-data --port 0``: the ONE process that owns
   the Chroma data directory;
2. a throwaway PostgreSQL server for Flux's state (``flux_chroma.local_fleet.LocalPostgres``:
   a temporary directory, a free loopback port; as the ``postgres`` OS user when run as root). A fleet
   needs it: on SQLite the Flux server warns that multi-worker fleets get lock contention
   and dispatch anomalies. ``--flux-db sqlite`` keeps SQLite (one-node use);
3. ``flux start server``: the Flux server (``FLUX_DATABASE_URL`` points at PostgreSQL;
   anonymous access allowed because everything listens on 127.0.0.1 only);
4. two ``flux start worker`` processes: stateless, each a ``chromadb.HttpClient`` of the
   same Chroma server (``FLUX_CHROMA_URL``), sharing one embedding cache folder, and each
   told where the Flux server is (``FLUX_WORKERS__SERVER_URL``: a workflow that starts
   child executions, like an ingestion job with ``parallel``, calls the server with it).

Then it registers ``workflows.py`` once per tenant (namespaces ``kb-acme`` and ``kb-globex``:
the tenant comes from the workflow a caller may run, never from its input), runs two
ingestions at once (same collection name) and one question per tenant
through ``flux workflow run --mode sync``, prints what came back and which worker ran it,
and stops every process it started, by pid, even when a step fails or it is interrupted.
With ``--hold`` it keeps the fleet running afterwards (``WORKDIR/fleet.env`` holds the URLs)
until Ctrl-C or SIGTERM: docs/deployment.md runs a cluster ingestion job on it.
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from flux_chroma.errors import FluxChromaError
from flux_chroma.local_fleet import LocalFleet, Processes, clean_env, tool, wait_for
from flux_chroma.local_fleet import flux_cli as flux
from flux_chroma.local_fleet.processes import RUN_TIMEOUT

DOCS: dict[str, list[dict[str, Any]]] = {
    "acme": [
        {"id": "refunds", "text": "Acme refunds any order within 30 days, no questions asked."},
        {"id": "shipping", "text": "Acme ships rockets and anvils by freight within five days."},
        {"id": "support", "text": "Acme support answers the phone around the clock."},
    ],
    "globex": [
        {"id": "refunds", "text": "Globex gives store credit instead of refunds after 14 days."},
        {"id": "security", "text": "Globex badges are required on every floor of the campus."},
        {"id": "hours", "text": "Globex offices open at eight and close at six."},
    ],
}
QUESTIONS = {"acme": "what is the refund policy?", "globex": "what is the refund policy?"}


def run_workflows(names_inputs: list[tuple[str, dict[str, Any]]], env: dict[str, str], flux_url: str) -> list[dict[str, Any]]:
    """Run several executions at once through the Flux server (``--mode sync``) and parse them."""
    procs = [
        subprocess.Popen(
            [tool("flux"), "workflow", "run", name, json.dumps(data), "--mode", "sync", "--server-url", flux_url],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        for name, data in names_inputs
    ]
    results = []
    for proc, (name, _) in zip(procs, names_inputs, strict=True):
        out, err = proc.communicate(timeout=RUN_TIMEOUT)
        if proc.returncode != 0:
            raise RuntimeError(f"flux workflow run {name} failed ({proc.returncode}): {err or out}")
        execution = settle(name, json.loads(out), env, flux_url)
        if execution.get("state") != "COMPLETED":
            raise RuntimeError(f"{name} ended {execution.get('state')}: {execution.get('output')}")
        results.append(execution)
    return results


TERMINAL = {"COMPLETED", "FAILED", "CANCELLED"}
SETTLE_SECONDS = 15.0


def settle(name: str, execution: dict[str, Any], env: dict[str, str], flux_url: str) -> dict[str, Any]:
    """Wait briefly for a terminal state.

    flux-core 0.87's ``--mode sync`` can answer with the workflow's output while the server
    still says RUNNING (seen about once in ten runs of tests/test_distributed.py with two
    concurrent executions); the state change usually lands a moment later. If it has not after
    ``SETTLE_SECONDS`` but the output is there, the output is used and the lag is reported.
    """
    deadline = time.monotonic() + SETTLE_SECONDS
    while execution.get("state") not in TERMINAL and time.monotonic() < deadline:
        time.sleep(0.5)
        status = flux(["workflow", "status", name, str(execution["execution_id"]), "--server-url", flux_url], env)
        try:
            execution = {**execution, **json.loads(status)}
        except ValueError:
            continue  # the status endpoint answered with an error line on stderr: ask again
    output = execution.get("output")
    if execution.get("state") not in TERMINAL and isinstance(output, dict) and "message" not in output:
        print(f"note: {name} returned its output but the Flux server still reports {execution.get('state')}")
        execution = {**execution, "state": "COMPLETED"}
    return execution


def deploy_and_run(stack: Processes, flux_db: str = "postgresql", workers: int = 2) -> dict[str, Any]:
    work = stack.workdir
    # 1. The ONE Chroma server (flux-chroma's own command; it prints its URL as JSON).
    chroma_log = work / "chroma" / "output.log"
    stack.start("chroma", [tool("flux-chroma"), "server", "--path", str(work / "chroma-data"), "--port", "0", "--json"], clean_env())
    def chroma_ready() -> str | None:
        lines = [ln for ln in chroma_log.read_text().splitlines() if ln.startswith("{")]
        return json.loads(lines[0])["url"] if lines else None

    chroma_url = wait_for("the Chroma server", chroma_ready, stack, "chroma")

    # 2. The Flux server, its state in PostgreSQL (or SQLite with --flux-db sqlite), and
    # 3. stateless workers: the Flux server's URL, the Chroma URL and a shared embedding cache.
    fleet = LocalFleet(
        work,
        chroma_url,
        database="postgresql" if flux_db == "postgresql" else "sqlite",
        worker_env={"FLUX_CHROMA_CACHE_DIR": str(work / "embedding-cache")},
        processes=stack,
    ).start(workers)
    flux_url, server_env = fleet.url, fleet.server_env
    names = [f"worker-{n}" for n in range(1, workers + 1)]
    print(f"Chroma {chroma_url}  Flux {flux_url} ({flux_db})  workers {', '.join(names)}", flush=True)

    # 4. Register the workflows once per tenant (namespace kb-<tenant>: the tenant is bound to
    #    what the caller may run, never to its input), then ingest both tenants at once and ask
    #    each a question.
    from workflows import register_for

    for tenant in DOCS:
        copy = register_for(tenant, work / f"kb-{tenant}.py")
        print(flux(["workflow", "register", str(copy), "--server-url", flux_url], server_env).strip())
    for tenant, docs in DOCS.items():  # the sources: files every worker can read
        folder = work / "docs" / tenant
        folder.mkdir(parents=True, exist_ok=True)
        for doc in docs:
            (folder / f"{doc['id']}.md").write_text(doc["text"] + "\n")
    ingests = run_workflows(
        [(f"kb-{t}/ingest", {"path": str(work / "docs" / t)}) for t in DOCS], server_env, flux_url
    )
    for tenant, execution in zip(DOCS, ingests, strict=True):
        report = execution["output"]
        print(
            f"ingest {tenant:<6} on {execution['current_worker']}: {report['docs']} docs, "
            f"{report['chunks']} chunks in {report['batches']} batches -> {report['physical_name']} "
            f"(added {report['added']}, skipped {report['skipped']})",
            flush=True,
        )
    asks = run_workflows([(f"kb-{t}/ask", {"question": q}) for t, q in QUESTIONS.items()], server_env, flux_url)
    for tenant, execution in zip(QUESTIONS, asks, strict=True):
        print(f"\n{tenant} asks {QUESTIONS[tenant]!r} (ran on {execution['current_worker']}):")
        for rank, hit in enumerate(execution["output"]["hits"], start=1):
            print(f"  {rank}. {hit['document']}  (id={hit['id']}, distance={hit['distance']:.4f})")
    return {
        "chroma_url": chroma_url,
        "flux_url": flux_url,
        "flux_db": flux_db,
        "ingest": [{"tenant": t, "worker": e["current_worker"], "receipt": e["output"]} for t, e in zip(DOCS, ingests, strict=True)],
        "ask": [{"tenant": t, "worker": e["current_worker"], **e["output"]} for t, e in zip(QUESTIONS, asks, strict=True)],
    }


def hold(stack: Processes, summary: dict[str, Any]) -> None:
    """Keep the fleet running: write ``fleet.env`` and a ``pid`` file per process, wait for a signal.

    ``source WORKDIR/fleet.env`` sets ``FLUX_SERVER`` (the Flux server's URL), ``FLUX_CHROMA_URL``
    and ``FLEET`` (the workdir); ``WORKDIR/<name>/pid`` holds each process's pid, which is also
    its process group id (``kill -KILL -- -PID`` ends a worker with its executions).
    """
    work = stack.workdir
    for name, pid in stack.pids().items():
        (work / name).mkdir(parents=True, exist_ok=True)
        (work / name / "pid").write_text(f"{pid}\n")
    (work / "fleet.env").write_text(
        f"export FLUX_SERVER={summary['flux_url']}\n"
        f"export FLUX_CHROMA_URL={summary['chroma_url']}\n"
        f"export FLEET={work}\n"
    )
    print(f"\nfleet ready: source {work / 'fleet.env'}   (Ctrl-C stops everything)", flush=True)
    while True:
        time.sleep(3600)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", type=Path, help="folder for data, state and logs (default: a temporary one)")
    parser.add_argument("--keep", action="store_true", help="keep the temporary workdir (logs) afterwards")
    parser.add_argument("--summary", type=Path, help="write pids and results as JSON to this file")
    parser.add_argument(
        "--flux-db", choices=("postgresql", "sqlite"), default="postgresql",
        help="Flux's state: a throwaway PostgreSQL (default; what a fleet needs) or SQLite (one node)",
    )  # fmt: skip
    parser.add_argument("--workers", type=int, default=2, help="number of Flux workers (default 2)")
    parser.add_argument(
        "--hold", action="store_true",
        help="keep everything running after the demo; write WORKDIR/fleet.env; stop with Ctrl-C or SIGTERM",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")

    workdir = (args.workdir or Path(tempfile.mkdtemp(prefix="flux-chroma-distributed-"))).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    stack = Processes(workdir)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # run the finally block below
    summary: dict[str, Any] = {"workdir": str(workdir), "ok": False}
    code = 1
    try:
        summary.update(deploy_and_run(stack, args.flux_db, args.workers))
        summary["ok"] = True
        code = 0
        if args.hold:
            hold(stack, summary)
    except (RuntimeError, FluxChromaError, subprocess.SubprocessError, json.JSONDecodeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        print("interrupted" if not (args.hold and summary["ok"]) else "stopping", file=sys.stderr)
        code = 0 if args.hold and summary["ok"] else 130
    finally:
        summary["pids"] = stack.pids()
        print()
        stack.stop()
        if args.summary:
            args.summary.write_text(json.dumps(summary, indent=2))
        if args.workdir is None and not args.keep and code == 0:
            shutil.rmtree(workdir, ignore_errors=True)
        elif code != 0:
            print(f"logs kept in {workdir}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
