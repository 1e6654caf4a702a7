"""``flux-chroma watch EXECUTION_ID --flux URL``: follow an ingestion job on a Flux server.

Progress is read from the events the server stores (``GET /executions/{id}?detailed=true``):
Flux streams TASK_PROGRESS events to an attached caller only, so a watcher started mid-job
would miss them. A ``parallel`` job's units are read from their own child executions.
"""

from __future__ import annotations

import contextlib
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Annotated, Any

import httpx
import typer

from flux_chroma.cli.support import CliError, Debug, ExitCode, cli_errors, stderr, stdout

__all__ = ["JobView", "read_job", "render", "watch", "watch_job"]

WIDTH = 80
TERMINAL = {"COMPLETED": ExitCode.OK, "FAILED": ExitCode.FAILED, "CANCELLED": ExitCode.FAILED}


def _events(execution: dict[str, Any]) -> Iterator[tuple[str, Any, Any]]:
    """``(name, type, value)`` of each stored event, the value unwrapped from Flux's inline
    output storage."""
    for event in execution.get("events") or []:
        value = event.get("value")
        if isinstance(value, dict) and value.get("storage_type") == "inline" and "metadata" in value:
            value = (value.get("metadata") or {}).get("value")
        yield str(event.get("name") or ""), event.get("type"), value


@dataclass
class UnitView:
    """One unit of a ``parallel`` job as last seen."""

    unit: int
    execution_id: str
    state: str = "STARTED"
    worker: str = ""
    batches_done: int = 0
    batches: int = 0


@dataclass
class JobView:
    """What ``watch`` shows of one job execution (built by :func:`read_job`)."""

    execution_id: str
    workflow: str
    state: str
    worker: str
    label: str = ""
    chunks_total: int | None = None
    batches_total: int | None = None
    receipts: dict[int, dict[str, Any]] = field(default_factory=dict)
    units: dict[int, UnitView] = field(default_factory=dict)
    skipped_files: int = 0
    error: str = ""

    @property
    def chunks_done(self) -> int:
        """Chunks of batches whose receipts the server stores."""
        return sum(int(r.get("chunks", 0)) for r in self.receipts.values())


def _get(client: httpx.Client, base: str, execution_id: str) -> dict[str, Any]:
    try:
        response = client.get(f"{base}/executions/{execution_id}", params={"detailed": "true"})
    except httpx.HTTPError as exc:
        raise CliError(
            f"the Flux server at {base} does not answer ({type(exc).__name__}).",
            "check --flux (the URL of `flux start server`) and that the server runs.",
            ExitCode.UNREACHABLE,
        ) from None
    if response.status_code == 404:
        raise CliError(
            f"no execution {execution_id!r} on the Flux server at {base}.",
            "use the execution id `flux workflow run ... --mode async` printed, or list them with "
            "`flux execution list --server-url URL`.",
        )
    if response.status_code >= 400:
        raise CliError(f"the Flux server at {base} answered {response.status_code} for {execution_id!r}: {response.text[:200]}")
    data: dict[str, Any] = response.json()
    return data


def _error_text(output: Any) -> str:
    if isinstance(output, dict):
        for key in ("message", "error", "detail"):
            if isinstance(output.get(key), str):
                return str(output[key])
        kind = output.get("type") or output.get("class") or ""
        return f"{kind}: {output}" if kind else str(output)
    return "" if output is None else str(output)


def read_job(client: httpx.Client, base: str, execution_id: str) -> JobView:
    """Read a job execution (and its running units) from the Flux server at ``base``.

    Raises:
        CliError: Unknown execution id, or the server does not answer.
    """
    data = _get(client, base, execution_id)
    job_input = data.get("input") if isinstance(data.get("input"), dict) else {}
    spec = job_input.get("job", job_input) if isinstance(job_input, dict) else {}
    view = JobView(
        execution_id=execution_id,
        workflow=f"{data.get('workflow_namespace', '')}/{data.get('workflow_name', '')}",
        state=str(data.get("state", "?")),
        worker=str(data.get("current_worker") or ""),
        label=f"{spec.get('tenant', '?')}/{spec.get('collection', '?')}" if isinstance(spec, dict) else "",
    )
    for name, kind, value in _events(data):
        if kind == "TASK_COMPLETED" and name.startswith("plan_ingest") and isinstance(value, dict):
            view.chunks_total = (view.chunks_total or 0) + int(value.get("chunks", 0))
            view.batches_total = (view.batches_total or 0) + len(value.get("batches") or [])
            view.skipped_files += sum(int(s.get("skipped_files", 0)) for s in value.get("sources") or [])
        elif kind == "TASK_COMPLETED" and name.startswith("ingest_batch") and isinstance(value, dict):
            view.receipts[int(value["batch"])] = value
        elif kind == "TASK_STARTED" and name == "await_unit" and isinstance(value, dict):
            number = int(value.get("unit", len(view.units)))
            view.units[number] = UnitView(number, str(value.get("execution_id", "")))
        elif kind == "TASK_COMPLETED" and name == "await_unit" and isinstance(value, dict):
            finished = view.units.setdefault(int(value["unit"]), UnitView(int(value["unit"]), ""))
            finished.state = "COMPLETED"
            for receipt in value.get("receipts") or []:
                view.receipts[int(receipt["batch"])] = receipt
                finished.worker = finished.worker or str(receipt.get("worker") or "")
            finished.batches_done = finished.batches = len(value.get("receipts") or [])
    for unit in view.units.values():
        if unit.state != "COMPLETED" and unit.execution_id:
            child = _get(client, base, unit.execution_id)
            unit.state, unit.worker = str(child.get("state", "?")), str(child.get("current_worker") or "")
            child_input = child.get("input") if isinstance(child.get("input"), dict) else {}
            unit.batches = len(((child_input or {}).get("unit") or {}).get("batches") or [])
            for name, kind, value in _events(child):
                if kind == "TASK_COMPLETED" and name.startswith("ingest_batch") and isinstance(value, dict):
                    view.receipts[int(value["batch"])] = value
                    unit.batches_done += 1
    if view.state in ("FAILED", "CANCELLED"):
        view.error = _error_text(data.get("output")) or view.state.lower()
    return view


def _fit(line: str) -> str:
    return line if len(line) <= WIDTH else line[: WIDTH - 1] + "…"


def _duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m" if seconds >= 3600 else f"{seconds // 60}m{seconds % 60:02d}s"


def render(view: JobView, rate: float | None) -> list[str]:
    """The lines ``watch`` shows for ``view`` (each at most 80 columns).

    Args:
        view: The job.
        rate: Chunks per second observed while watching (``None``: not known yet).
    """
    where = f" on {view.worker}" if view.worker else ""
    lines = [_fit(f"{view.workflow} {view.execution_id[:12]}  {view.label}  {view.state}{where}")]
    done, total = view.chunks_done, view.chunks_total
    if total is None:
        lines.append("  planning..." if view.state not in TERMINAL else "  no plan was stored")
    else:
        share = f" ({done * 100 // total}%)" if total else ""
        batches = f"  batches {len(view.receipts)}/{view.batches_total}"
        speed = f"  {rate:.1f} chunks/s" if rate else ""
        eta = f"  ETA {_duration((total - done) / rate)}" if rate and total > done and view.state not in TERMINAL else ""
        lines.append(_fit(f"  chunks {done}/{total}{share}{batches}{speed}{eta}"))
        unchanged = sum(int(r.get("skipped", 0)) for r in view.receipts.values())
        lines.append(_fit(f"  unchanged {unchanged} chunks  skipped files {view.skipped_files}"))
    for unit in sorted(view.units.values(), key=lambda u: u.unit):
        of = f"{unit.batches_done}/{unit.batches} batches" if unit.batches else f"{unit.batches_done} batches"
        lines.append(_fit(f"  unit {unit.unit:<3} {unit.state:<10} {of:<14} {unit.worker or '-'}"))
    if view.error:
        lines.append(_fit(f"  error: {view.error}"))
        lines.extend(_fit(f"    {part}") for part in textwrap.wrap(view.error, WIDTH - 4)[1:])
    return lines


def watch_job(base: str, execution_id: str, interval: float = 1.0) -> ExitCode:
    """Follow a job until it ends, reading every ``interval`` seconds; return its exit code.

    On a terminal the screen is redrawn in place; otherwise (a log) the first screen is
    printed, then only the lines that changed.

    Raises:
        CliError: Unknown execution id, or the server does not answer.
    """
    base = base.rstrip("/")
    live = stdout.is_terminal
    shown: list[str] = []
    with httpx.Client(timeout=10) as client:
        view = read_job(client, base, execution_id)
        started, chunks_before = time.monotonic(), view.chunks_done
        from rich.live import Live
        from rich.text import Text

        screen: Any = Live(console=stdout, auto_refresh=False) if live else contextlib.nullcontext()
        with screen:
            while True:
                elapsed, gained = time.monotonic() - started, view.chunks_done - chunks_before
                rate = gained / elapsed if elapsed > 0 and gained > 0 else None
                lines = render(view, rate)
                if live:
                    screen.update(Text("\n".join(lines)), refresh=True)
                else:
                    for line in lines if not shown else [ln for ln in lines if ln not in shown]:
                        stdout.print(line, highlight=False, markup=False, soft_wrap=True)
                shown = lines
                if view.state in TERMINAL:
                    return TERMINAL[view.state]
                time.sleep(interval)
                view = read_job(client, base, execution_id)


def watch(
    execution_id: Annotated[str, typer.Argument(metavar="EXECUTION_ID", help="The job's Flux execution id.")],
    flux: Annotated[
        str, typer.Option("--flux", metavar="URL", help="The Flux server URL (`flux start server`).")
    ] = "http://localhost:8000",
    interval: Annotated[float, typer.Option("--interval", metavar="SECONDS", help="Seconds between reads.")] = 1.0,
    debug: Debug = False,
) -> None:
    """Follow an ingestion job running on a Flux server until it ends; exit with its outcome."""
    with cli_errors(debug=debug):
        code = watch_job(flux, execution_id, interval)
        if code != ExitCode.OK:
            stderr.print(f"error: job {execution_id} did not complete.", highlight=False, markup=False)
        raise typer.Exit(int(code))
