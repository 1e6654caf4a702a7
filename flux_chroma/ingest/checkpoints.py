"""Inline checkpoints that hand Flux only the events it has not stored yet.

Flux's inline checkpoint (flux-core 0.87) saves the whole context after every task start and
end, asking its database which events it holds with one ``event_id IN (?, ...)`` query over the
WHOLE log: a new SQL text each time. sqlite3 keeps 128 prepared statements per connection and
SQLite spends about 135 bytes per ``IN`` parameter, so a long job grew by about 100 KB per batch
(80 MiB over 800 batches, invisible to ``tracemalloc``). :class:`DeltaCheckpoint` sends only the
new events through ``ContextManager.update`` (as Flux's workers do), so memory stays flat; where
that does not apply (row gone, claim fenced) it saves the whole context as Flux would.
"""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext

from flux_chroma.seams import execution_store

__all__ = ["DeltaCheckpoint"]


class _Unsaved(ExecutionContext[Any]):
    """An execution as ``ContextManager.update`` reads it: the unsaved events, the real output."""

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
        return self._whole_output


class DeltaCheckpoint:
    """A checkpoint function (``ctx.set_checkpoint``) that persists only new events.

    ``ctx`` is the execution as stored right now (just saved or loaded).

    Example:
        >>> save_execution(ctx)  # flux_chroma.seams
        >>> ctx.set_checkpoint(DeltaCheckpoint(ctx))
    """

    def __init__(self, ctx: ExecutionContext[Any]) -> None:
        self._stored = {(e.id, e.type) for e in ctx.events}

    async def __call__(self, ctx: ExecutionContext[Any]) -> None:
        """Store the state, the output and the new events of ``ctx``."""
        from flux.errors import ExecutionContextNotFoundError, StaleClaimError

        new = [e for e in ctx.events if (e.id, e.type) not in self._stored]
        manager = execution_store()
        try:
            manager.update(_Unsaved(ctx, new))
        except (ExecutionContextNotFoundError, StaleClaimError):
            manager.save(ctx)  # what Flux's own inline checkpoint does, with every event
        self._stored.update((e.id, e.type) for e in new)
