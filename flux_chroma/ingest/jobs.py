"""Submitting durable jobs inline: deterministic execution ids, resume, and re-runs.

Execution ids are ``fc-<kind>-<tenant>-<digest>-r<run>``. The latest run decides: none yet,
run 1 is SAVED before anything runs (a crash in the first task is resumable); ``CREATED`` or
``RUNNING`` (its process died) is resumed by id; ``FAILED``/``CANCELLED`` (Flux cannot resume
those) start run ``n+1`` with run ``n``'s completed task events, so unchanged batches replay;
``COMPLETED`` starts a fresh run (replaying would do nothing after the collection was wiped).
A lock file under Flux's home allows one process per job on a host (released even on SIGKILL);
submitters on different hosts sharing one Flux database are not serialized.
"""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from flux import ExecutionContext
from flux.domain.events import ExecutionEventType

from flux_chroma.errors import ConfigurationError
from flux_chroma.flux_state import ensure_flux_db_folder
from flux_chroma.ingest.checkpoints import DeltaCheckpoint
from flux_chroma.ingest.spec import digest_of
from flux_chroma.seams import execution_store, register_workflow, save_execution

__all__ = [
    "execution_base",
    "execution_id",
    "latest_run",
    "run_durable",
    "JobBusyError",
    "Progress",
    "committed_work",
    "job_lock_dir",
]

Progress = Callable[[Any], None]
_RESUMABLE = {"CREATED", "RUNNING"}
_RERUN_WITH_REPLAY = {"FAILED", "CANCELLED"}
_TASK_EVENTS = {ExecutionEventType.TASK_STARTED, ExecutionEventType.TASK_COMPLETED}


class JobBusyError(ConfigurationError):
    """The job is already running in another live process on this host."""


def execution_base(kind: str, tenant: str, collection: str, key: str) -> str:
    """The execution-id prefix shared by every run of one job."""
    return f"fc-{kind}-{tenant}-{digest_of([kind, tenant, collection, key], 16)}"


def execution_id(base: str, run: int) -> str:
    """The execution id of run ``run`` (1-based) of a job family."""
    return f"{base}-r{run}"


def latest_run(base: str) -> tuple[int, dict[str, Any] | None]:
    """``(run number, Flux summary)`` of the newest run of a job family (``(0, None)``)."""
    manager = execution_store()
    run = 0
    while manager.exists(execution_id(base, run + 1)):
        run += 1
    return run, (manager.get_summary(execution_id(base, run)) if run else None)


def job_lock_dir() -> Path:
    """Where running jobs hold their ``<execution base>.lock`` (under Flux's home)."""
    from flux.config import Configuration

    return Path(Configuration.get().settings.home).expanduser() / "flux-chroma-locks"


@contextmanager
def _job_lock(base: str) -> Iterator[None]:
    folder = job_lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{base}.lock"
    with open(path, "a+") as handle:  # closing the file releases the lock
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            owner = handle.read().strip() or "?"
            raise JobBusyError(
                f"job {base} is already running in process {owner} on this host (lock {path}). "
                "Wait for it, or stop that process; a later submission resumes where it stopped."
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        yield


def committed_work(events: list[Any]) -> dict[str, int | None]:
    """What an event log already holds: ``{"committed": batches, "committed_chunks": chunks,
    "batches": planned total or None}``."""
    done = [(str(e.name), _stored(e.value)) for e in events if e.type == ExecutionEventType.TASK_COMPLETED]
    batches = [value for name, value in done if name.startswith("ingest_batch")]
    plans = [value for name, value in done if name.startswith("plan_ingest") and "batches" in value]
    return {
        "committed": len(batches),
        "committed_chunks": sum(int(b.get("chunks", 0)) for b in batches),
        "batches": sum(len(p["batches"]) for p in plans) if plans else None,
    }


def _stored(value: Any) -> dict[str, Any]:
    """A task output as stored in the log (inline references resolved; else ``{}``)."""
    if getattr(value, "storage_type", None) == "inline":
        value = value.metadata.get("value")
    return value if isinstance(value, dict) else {}


def _run(
    wf: Any, ctx: ExecutionContext[Any], on_progress: Progress | None, resumed_from: str | None = None
) -> ExecutionContext[Any]:
    ctx.set_checkpoint(DeltaCheckpoint(ctx))  # ctx is stored as it is now (just saved or loaded)
    if on_progress is not None:
        on_progress({"phase": "execution", "execution_id": ctx.execution_id, "resumed_from": resumed_from,
                     **committed_work(list(ctx.events))})
        ctx.set_progress_callback(lambda _eid, _tid, _name, value: on_progress(value))
    result: ExecutionContext[Any] = asyncio.run(wf(ctx))
    return result


def run_durable(
    wf: Any,
    input: dict[str, Any],
    *,
    base: str,
    on_progress: Progress | None = None,
) -> ExecutionContext[Any]:
    """Run, resume or re-run the job family ``base`` inline and return its execution.

    Args:
        base: Execution-id prefix from :func:`execution_base`.

    Raises:
        JobBusyError: The job is running in another process on this host.
        ConfigurationError: The latest run is owned by a Flux server/worker (scheduled,
            claimed, paused, ...), so it must not be resumed inline.
    """
    ensure_flux_db_folder()
    with _job_lock(base):
        run, summary = latest_run(base)
        copied: list[Any] = []
        replayed_from = None
        if summary is not None:
            state = str(summary["state"])
            eid = execution_id(base, run)
            if state in _RESUMABLE:
                return _run(wf, execution_store().get(eid), on_progress, resumed_from=eid)
            if state in _RERUN_WITH_REPLAY:  # copy the events of its completed tasks
                events = execution_store().get(eid).events
                done = {e.source_id for e in events if e.type == ExecutionEventType.TASK_COMPLETED}
                copied = [e for e in events if e.type in _TASK_EVENTS and e.source_id in done]
                replayed_from = eid
            elif state != "COMPLETED":
                raise ConfigurationError(
                    f"execution {eid} is {state}: a Flux server or worker owns it. Resume or cancel "
                    "it through Flux, not inline."
                )
        eid = execution_id(base, run + 1)
        ctx: ExecutionContext[Any] = ExecutionContext(
            workflow_id=register_workflow(wf),
            workflow_namespace=wf.namespace,
            workflow_name=wf.name,
            input={**input, "run": run + 1, "replayed_from": replayed_from},
            execution_id=eid,
        )
        ctx.start(f"{wf.name}_{eid}")
        ctx.events.extend(copied)
        save_execution(ctx)  # exists (RUNNING) before the first task: a crash anywhere is resumable
        return _run(wf, ctx, on_progress, resumed_from=replayed_from)
