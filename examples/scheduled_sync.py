"""Keep a tenant's collection in sync with a folder on a Flux schedule, and report failed runs.

Register one copy of this file per tenant with a Flux server; the server creates the schedule
(``sync_auto``) when it registers the workflow, and a worker runs the ingestion job at each
interval. A run re-reads the folder, skips every chunk that is already stored unchanged (no
embedding, no write) and deletes the chunks of files that disappeared (``cleanup: "full"``).
A run that fails fires the hook declared on ``sync``, which starts ``report_failed_sync``
(examples/sync_failures.py, registered first: Flux checks a hook's target at registration).

Scheduled runs have no input, so what they sync is written into the copies:
:func:`register_for` sets the namespace (``kb-<tenant>``: the tenant comes from it), the folder,
the interval and the failure report file. By hand::

    python examples/scheduled_sync.py acme /srv/docs/acme 21600 /var/log/kb-acme-failures.jsonl /tmp/kb-acme
    flux workflow register /tmp/kb-acme/report.py --server-url http://127.0.0.1:8080
    flux workflow register /tmp/kb-acme/sync.py --server-url http://127.0.0.1:8080
    flux schedule list --server-url http://127.0.0.1:8080

Definitions only when imported: Flux re-executes this module when it registers or runs a workflow.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

from flux import ExecutionContext, workflow
from flux.domain.schedule import interval
from flux.hooks import hook

from flux_chroma.errors import TenantError
from flux_chroma.ingest import ingest_steps

TEMPLATE = "kb-" + "template"  # the namespace as written; register_for() replaces it and the 3 values below
FOLDER = "/srv/docs"
EVERY_SECONDS = 21600
FAILURES = "/var/log/kb-sync-failures.jsonl"
COLLECTION = "handbook"


def register_for(tenant: str, folder: str, every_seconds: int, failures: str, directory: str | os.PathLike[str]) -> tuple[Path, Path]:
    """Write this tenant's copies of sync_failures.py and this file into ``directory``.

    Register them with ``flux workflow register`` in the order returned.

    Args:
        tenant: The tenant id (3-63 lowercase letters, digits, single hyphens).
        folder: The folder to keep in sync (every worker must be able to read it).
        every_seconds: The interval between runs.
        failures: The file ``report_failed_sync`` appends to.
        directory: Where to write ``report.py`` and ``sync.py``.

    Returns:
        ``(report.py, sync.py)``.

    Raises:
        TenantError: An invalid tenant id.
    """
    if not re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", tenant) or not 3 <= len(tenant) <= 63:
        raise TenantError(f"tenant id {tenant!r} is invalid: 3-63 lowercase letters, digits, single hyphens.")
    here = Path(__file__).parent
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)

    def copy(name: str, target: str) -> Path:
        source = (here / name).read_text()
        source = source.replace(f'"{TEMPLATE}', f'"kb-{tenant}').replace(f":{TEMPLATE}:", f":kb-{tenant}:")
        source = source.replace(f'FOLDER = "{FOLDER}"', f"FOLDER = {str(folder)!r}", 1)
        source = source.replace(f"EVERY_SECONDS = {EVERY_SECONDS}", f"EVERY_SECONDS = {int(every_seconds)}", 1)
        source = source.replace(f'FAILURES = "{FAILURES}"', f"FAILURES = {str(failures)!r}", 1)
        path = out / target
        path.write_text(source)
        return path

    return copy("sync_failures.py", "report.py"), copy("scheduled_sync.py", "sync.py")


def _tenant(ctx: ExecutionContext[Any]) -> str:
    namespace = ctx.workflow_namespace
    if namespace == TEMPLATE or not namespace.startswith("kb-"):
        raise TenantError(f"workflow namespace {namespace!r} binds no tenant: register a copy made by register_for().")
    return namespace.removeprefix("kb-")


@workflow.with_options(
    namespace="kb-template",
    schedule=interval(seconds=EVERY_SECONDS),
    hooks=[hook.run(on="execution:kb-template:sync:failed", workflow="kb-template/report_failed_sync", principal="kb-sync")],
)
async def sync(ctx: ExecutionContext[Any]) -> dict[str, Any]:
    """Ingest ``FOLDER`` into this tenant's collection (unchanged chunks are skipped)."""
    job = {
        "tenant": _tenant(ctx),
        "collection": COLLECTION,
        "sources": [{"kind": "files", "path": FOLDER}],
        "cleanup": "full",
        "options": {"cache": True},
    }
    return await ingest_steps(job)


if __name__ == "__main__":
    for written in register_for(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]):
        print(written)
