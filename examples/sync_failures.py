"""The hook target of examples/scheduled_sync.py: record a failed sync run.

``report_failed_sync`` is started by the hook that ``sync`` declares (on its own
``execution:kb-<tenant>:sync:failed`` events) and appends one JSON line to ``FAILURES``: the
failed execution's id, its workflow, and the error Flux recorded. Swap the body for your
pager or chat webhook. Flux checks that a hook's target workflow exists when the declaring
workflow is registered, so this file is registered first (``register_for`` in
scheduled_sync.py writes both copies).

Definitions only: Flux re-executes this module when it registers or runs a workflow.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from flux import ExecutionContext, workflow

TEMPLATE = "kb-" + "template"  # the namespace as written; register_for() replaces it and FAILURES
FAILURES = "/var/log/kb-sync-failures.jsonl"


@workflow.with_options(namespace="kb-template", runner="inprocess")
async def report_failed_sync(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Append the failed run (its execution id and error) to ``FAILURES``; started by the hook."""
    event = (ctx.input or {}).get("event") or {}
    line = {
        "tenant": ctx.workflow_namespace.removeprefix("kb-"),
        "execution_id": event.get("execution_id"),
        "workflow": f"{event.get('workflow_namespace')}/{event.get('workflow_name')}",
        "state": event.get("state"),
        "error": event.get("value"),
        "occurred_at": event.get("occurred_at"),
    }
    await asyncio.to_thread(_append, FAILURES, json.dumps(line, default=str))
    return line


def _append(path: str, text: str) -> None:
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(text + "\n")


