"""Rich tables for the ``flux-chroma`` commands (the ``--json`` forms print plain data)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.table import Table
from rich.text import Text

from flux_chroma.cli.support import stdout

__all__ = ["hits_table", "collections_table", "checks_table", "STATUS_STYLE"]

STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def _short(text: Any, limit: int = 160) -> str:
    value = "" if text is None else str(text)
    value = " ".join(value.split())
    return value if len(value) <= limit else value[: limit - 1] + "…"


def hits_table(hits: Sequence[dict[str, Any]], title: str | None = None) -> None:
    """Print ranked hits: rank, distance, id, document, metadata.

    Args:
        hits: ``[{"id", "document", "metadata", "distance"}, ...]``, nearest first.
        title: Table title.
    """
    table = Table(title=title, title_justify="left", show_lines=False)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("distance", justify="right", no_wrap=True)
    table.add_column("id", no_wrap=True, overflow="fold")
    table.add_column("document", overflow="fold")
    table.add_column("metadata", overflow="fold")
    for rank, hit in enumerate(hits, start=1):
        meta = hit.get("metadata") or {}
        table.add_row(
            str(rank),
            f"{float(hit.get('distance', 0.0)):.4f}",
            Text(str(hit.get("id", ""))),
            Text(_short(hit.get("document"))),
            Text(json.dumps(meta, ensure_ascii=False, sort_keys=True) if meta else ""),
        )
    if not hits:
        stdout.print(Text(f"{title}: no hits" if title else "no hits"))
        return
    stdout.print(table)


def collections_table(collections: Sequence[dict[str, Any]], tenant: str) -> None:
    """Print a tenant's collections with counts and pins.

    Args:
        collections: ``[{"name", "count", "pin"}, ...]`` as returned by ``list_collections``.
        tenant: The tenant (for the title).
    """
    if not collections:
        stdout.print(Text(f"tenant {tenant!r} has no collections"))
        return
    table = Table(title=f"collections of tenant {tenant!r}", title_justify="left")
    table.add_column("collection", no_wrap=True)
    table.add_column("records", justify="right")
    table.add_column("model", no_wrap=True)
    table.add_column("dim", justify="right")
    table.add_column("space")
    table.add_column("fingerprint", no_wrap=True)
    for coll in collections:
        pin = coll.get("pin")
        if pin:
            model = pin["name"] + (json.dumps(pin["config"], sort_keys=True) if pin.get("config") else "")
            row = [model, str(pin["dimension"]), str(pin["space"]), str(pin["fingerprint"])]
        else:
            row = ["(unpinned)", "", "", ""]
        table.add_row(Text(coll["name"]), str(coll["count"]), *[Text(v) for v in row])
    stdout.print(table)


def checks_table(checks: Sequence[Any]) -> None:
    """Print doctor results, one line per check: status, name, detail.

    Args:
        checks: :class:`~flux_chroma.cli.doctor.Check` objects.
    """
    for check in checks:
        line = Text()
        line.append(f"{check.status:<4}", style=STATUS_STYLE.get(check.status, ""))
        line.append(f"  {check.name}: ", style="bold")
        line.append(check.detail)
        stdout.print(line, soft_wrap=True)
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail", "skip")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    stdout.print(Text(f"\n{summary}", style="bold red" if counts["fail"] else "bold"))
