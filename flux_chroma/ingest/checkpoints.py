"""Inline checkpoints that hand Flux only the events it has not stored yet.

Flux's inline checkpoint (``Workflow.run``'s, flux-core 0.87) passes the whole execution
context to ``ContextManager.save`` after every task start and end. Flux then asks its database
which of those events it already holds with one ``event_id IN (?, ?, ...)`` query over the
WHOLE event log, so every checkpoint sends a different SQL text (one or two parameters longer
than the last). Python's ``sqlite3`` keeps the last 128 distinct statements of a connection
prepared, and SQLite spends about 135 bytes of native memory per ``IN`` parameter of a
prepared statement: a long ingestion job's process grew by about 100 KB per batch (80 MiB over
800 batches), memory that ``tracemalloc`` does not see. Each checkpoint also cost O(events).

Flux's own workers send delta checkpoints (only the events the server has not acknowledged),
which ``ContextManager.update`` reconciles by event id. :class:`DeltaCheckpoint` does the
same for inline jobs: the ``IN`` list holds the one or two new events, the statements repeat
and stay cached, and memory stays flat. State and output are written from the whole context,
as before. Where the delta path does not apply (the execution row is gone, or a claim
generation fences it) the whole context is saved, exactly as Flux's inline checkpoint does.
"""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext

from flux_chroma.seams import execution_store

__all__ = ["DeltaCheckpoint"]


class _Unsaved(ExecutionContext[Any]):
    """An execution as ``ContextManager.update`` reads it: only the unsaved events, the real output."""

    def __init__(self, ctx: ExecutionContext[Any], events: list[Any]) -> None:
        super().__init__(
            workflow_id=ctx.workflow_id,
            workflow_namespace=ctx.workflow_namespace,
            workflow_name=ctx.workflow_name,
            input=ctx.input,
            execution_id=ctx.execution_id,
            state=ctx.state,
            events=events,
            current_worker=ctx.current_worker or None,
            name=ctx.name,
        )
        self._whole_output = ctx.output  # derived from the events: the full log's, not the delta's

    @property
    def output(self) -> Any:
        """The output of the whole execution (not of the unsaved events alone)."""
        return self._whole_output


class DeltaCheckpoint:
    """A checkpoint function (``ctx.set_checkpoint``) that persists only new events.

    Args:
        ctx: The execution, as it is stored right now (just saved whole, or just loaded):
            its events are the ones the database already holds.

    Example:
        >>> save_execution(ctx)  # flux_chroma.seams
        >>> ctx.set_checkpoint(DeltaCheckpoint(ctx))
    """

    def __init__(self, ctx: ExecutionContext[Any]) -> None:
        self._stored = {(e.id, e.type) for e in ctx.events}

    def unsaved(self, ctx: ExecutionContext[Any]) -> list[Any]:
        """The events of ``ctx`` that no checkpoint has stored yet (in log order)."""
        return [e for e in ctx.events if (e.id, e.type) not in self._stored]

    async def __call__(self, ctx: ExecutionContext[Any]) -> None:
        """Store the state, the output and the new events of ``ctx``."""
        from flux.errors import ExecutionContextNotFoundError, StaleClaimError

        new = self.unsaved(ctx)
        manager = execution_store()
        try:
            manager.update(_Unsaved(ctx, new))
        except (ExecutionContextNotFoundError, StaleClaimError):
            manager.save(ctx)  # what Flux's own inline checkpoint does, with every event
        self._stored.update((e.id, e.type) for e in new)
