"""``flux-chroma doctor --flux URL``: run the canary workflow on each online Flux worker.

Why: in Flux 0.87 a worker that cannot import flux-chroma is invisible (its child process dies
before reporting and the execution flips between CLAIMED and SCHEDULED with no error). Each
canary run asks the server to prefer one worker; Flux's ``event`` dispatch mode honours it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from flux_chroma.cli.host_checks import Check

__all__ = ["check_fleet"]

CANARY = "flux-chroma/canary"
_TERMINAL = {"COMPLETED", "FAILED", "CANCELLED"}


def _client(flux_url: str) -> httpx.Client:
    try:  # the flux CLI's own credentials (FLUX_AUTH_TOKEN or its stored login)
        from flux.cli_auth import get_auth_headers

        headers = dict(get_auth_headers() or {})
    except Exception:  # noqa: BLE001 - no credentials: anonymous, like `flux` itself
        headers = {}
    return httpx.Client(base_url=flux_url.rstrip("/"), timeout=15.0, headers=headers)


def _worker_line(ran_on: str, execution: dict[str, Any], flux_url: str) -> Check:
    name = f"worker {ran_on}"
    state = execution.get("state")
    output = execution.get("output")
    if state == "COMPLETED" and isinstance(output, dict):
        if "error" in output:
            last = str(output.get("traceback", "")).strip().splitlines()[-3:]
            return Check(
                name,
                "fail",
                f"cannot import flux-chroma in Flux's child process: {output['error']} "
                f"({' | '.join(s.strip() for s in last)}). Every ingestion job on this worker "
                "would crash and be re-dispatched forever: install flux-chroma in the worker's "
                "environment (the same version everywhere) and restart the worker.",
            )
        detail = (
            f"flux-chroma {output.get('flux_chroma')}, chromadb {output.get('chromadb')}, "
            f"python {output.get('python')}; model {output.get('model')}; chroma {output.get('chroma')}"
        )
        if not output.get("ok"):
            return Check(name, "fail", detail)
        server_url = str(output.get("server_url") or "")
        if server_url.rstrip("/") != flux_url.rstrip("/"):
            return Check(
                name,
                "warn",
                f"{detail}; FLUX_WORKERS__SERVER_URL is {server_url or 'unset'}, not {flux_url}: "
                "jobs with parallel > 1 start their units there.",
            )
        return Check(name, "ok", detail)
    message = output.get("message") if isinstance(output, dict) else output
    return Check(
        name,
        "fail",
        f"canary ended {state}: {message}. The worker's own log has the child's traceback.",
    )


def check_fleet(flux_url: str, *, timeout: float = 120.0) -> list[Check]:
    """Run the canary once per online worker of the Flux server at ``flux_url``.

    Returns:
        A ``flux`` line for the server, then one line per worker with its versions or error
        (``fail`` for a canary not finished within ``timeout`` seconds).
    """
    with _client(flux_url) as client:
        try:
            health = client.get("/health").json()
            response = client.get("/workers")
            response.raise_for_status()
            online = [w for w in response.json() if str(w.get("status", "")).lower() == "online"]
            workers = sorted(str(w["name"]) for w in online)
        except (httpx.HTTPError, ValueError) as exc:
            return [Check("flux", "fail", f"no Flux server answers at {flux_url} ({type(exc).__name__}: {exc}).")]
        if not isinstance(health, dict) or health.get("status") != "healthy":
            return [Check("flux", "fail", f"the Flux server at {flux_url} is not healthy: {health}.")]
        if not workers:
            return [
                Check("flux", "fail", f"{flux_url} answers but no worker is online: start workers (docs/deployment.md).")
            ]
        canary = Path(__file__).resolve().parent.parent / "canary.py"
        with canary.open("rb") as handle:
            client.post("/workflows", files={"file": (canary.name, handle, "text/x-python")}).raise_for_status()
        lines = [Check("flux", "ok", f"{flux_url} answers; {len(workers)} worker(s) online: {', '.join(workers)}")]
        started = []
        for worker in workers:
            response = client.post(
                f"/workflows/{CANARY}/run/async", json={"worker": worker}, headers={"X-Flux-Preferred-Worker": worker}
            )
            response.raise_for_status()
            started.append(str(response.json()["execution_id"]))
        return lines + _collect(client, started, workers, flux_url, timeout)


def _collect(client: httpx.Client, started: list[str], workers: list[str], flux_url: str, timeout: float) -> list[Check]:
    deadline = time.monotonic() + timeout
    done: dict[str, dict[str, Any]] = {}
    while len(done) < len(started) and time.monotonic() < deadline:
        for eid in [e for e in started if e not in done]:
            execution = client.get(f"/executions/{eid}").json()
            if execution.get("state") in _TERMINAL:
                done[eid] = execution
        if len(done) < len(started):
            time.sleep(0.5)
    lines: list[Check] = []
    reached: set[str] = set()
    for eid in started:
        if eid in done:
            ran_on = str(done[eid].get("current_worker") or done[eid].get("worker_name") or "?")
            reached.add(ran_on)
            lines.append(_worker_line(ran_on, done[eid], flux_url))
            continue
        execution = client.get(f"/executions/{eid}").json()
        client.get(f"/workflows/{CANARY}/cancel/{eid}")  # so it is not dispatched later
        lines.append(
            Check(
                f"canary {eid}",
                "fail",
                f"not finished after {timeout:g} s (state {execution.get('state')}, worker "
                f"{execution.get('current_worker') or '-'}). A state that flips between CLAIMED and "
                "SCHEDULED means a worker's child process dies before reporting: read the workers' "
                "logs (run them without FLUX_LOG_LEVEL=WARNING to see the error).",
            )
        )
    lines += [
        Check(f"worker {w}", "warn", "no canary ran here (the server placed them elsewhere); run doctor again")
        for w in workers
        if w not in reached
    ]
    return lines
