"""``flux-chroma tenant erase TENANT``: list (dry run) or, with ``--yes``, erase a tenant."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flux_chroma.cli.support import (
    Command,
    Debug,
    check_settings,
    check_tenant,
    cli_errors,
    print_json,
    run_workflow,
    stdout,
)

__all__ = ["group", "erase", "render_receipt"]


def render_receipt(receipt: dict[str, Any]) -> list[str]:
    """The lines ``tenant erase`` prints for a :func:`~flux_chroma.erasure.erase_tenant` receipt."""
    dry = receipt["dry_run"]
    verb = "would erase" if dry else "erased"
    tenant = f"tenant {receipt['tenant']} ({receipt['tenancy']})"
    lines = [f"{tenant}: {verb}"]
    if not receipt["cache_only"]:
        names = ", ".join(receipt["collections"]) or "none"
        lines.append(f"  collections  {len(receipt['collections'])}: {names}")
        lines.append(f"  records      {receipt['records']}")
        lines.append(f"  aliases      {receipt['aliases']}")
        if receipt["tenancy"] == "database":
            lines.append(f"  database     {receipt['tenant']}" + (" (dropped)" if receipt["database_deleted"] else ""))
    entries = receipt["cache_entries_to_delete"]
    lines.append(f"  cache        {entries} entries on this host ({receipt['cache_directory']})")
    if receipt["cache_entries_kept_shared"]:
        lines.append(f"               {receipt['cache_entries_kept_shared']} kept: another tenant stores the same text")
    if receipt["running_jobs"]:
        lines.append(f"  running ingestion jobs on this host: {', '.join(receipt['running_jobs'])}")
    lines.append("not erased by this command:")
    lines.extend(f"  - {item}" for item in receipt["remains"])
    if dry:
        lines.append("dry run: nothing was erased. Run again with --yes to erase.")
    return lines


group = typer.Typer(name="tenant", help="Tenant-wide operations.", no_args_is_help=True, rich_markup_mode=None)


@group.command(cls=Command)
def erase(
    tenant: Annotated[str, typer.Argument(metavar="TENANT", help="The tenant to erase.")],
    yes: Annotated[bool, typer.Option("--yes", help="Erase (without it: list what would go).")] = False,
    cache_only: Annotated[
        bool, typer.Option("--cache-only", help="Only this host's embedding-cache entries (run on other hosts first).")
    ] = False,
    tenancy: Annotated[str, typer.Option("--tenancy", metavar="MODE", help="'prefix' or 'database'.")] = "prefix",
    url: Annotated[
        str | None, typer.Option("--url", metavar="URL", envvar="FLUX_CHROMA_URL", help="Chroma server URL.")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="Print the receipt as JSON.")] = False,
    flux_home: Annotated[Path | None, typer.Option("--flux-home", metavar="DIR", help="Folder for Flux's state.")] = None,
    debug: Debug = False,
) -> None:
    """Erase a tenant's collections, aliases (or database) and cache entries; a dry run without --yes."""
    with cli_errors(debug=debug, json_out=json_out):
        check_tenant(tenant, tenancy)
        settings = check_settings(url)
        from flux_chroma.cli.workflows import cli_erase_tenant

        payload = {"tenant": tenant, "tenancy": tenancy, "url": settings.url, "confirm": yes, "cache_only": cache_only}
        receipt = run_workflow(cli_erase_tenant, payload, flux_home)
        if json_out:
            print_json(receipt)
            return
        for line in render_receipt(receipt):
            stdout.print(line, highlight=False, markup=False, soft_wrap=True)
