"""Rich tables for the ``flux-chroma`` commands (the ``--json`` forms print plain data).

On a terminal every table fits its width (80 columns included): long ids, names and
fingerprints end in an ellipsis, documents and metadata wrap and are shortened. ``wide=True``
(the commands' ``--wide``) shows every value whole, however long the lines get.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from flux_chroma.cli.support import stdout

__all__ = ["hits_table", "collections_table", "checks_table", "STATUS_STYLE"]

STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}
_WIDE = 100_000  # render width for --wide: nothing is cut or wrapped


def _short(text: Any, limit: int | None) -> str:
    value = "" if text is None else str(text)
    value = " ".join(value.split())
    return value if limit is None or len(value) <= limit else value[: limit - 1] + "…"


def _print(renderable: Any, wide: bool) -> None:
    if wide:  # a console as wide as the longest value: tables take only the width they need
        Console(file=stdout.file, width=_WIDE, color_system="auto" if stdout.color_system else None).print(
            renderable, crop=False
        )
    else:
        stdout.print(renderable)


def hits_table(hits: Sequence[dict[str, Any]], title: str | None = None, *, wide: bool = False) -> None:
    """Print ranked hits: rank, distance, id, document, metadata.

    Args:
        hits: ``[{"id", "document", "metadata", "distance"}, ...]``, nearest first.
        title: Table title.
        wide: Show ids, documents and metadata whole.
    """
    if not hits:
        stdout.print(Text(f"{title}: no hits" if title else "no hits"))
        return
    cut = None if wide else 24
    table = Table(title=title, title_justify="left", show_lines=not wide)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("distance", justify="right", no_wrap=True)
    table.add_column("id", no_wrap=True, overflow="ellipsis", max_width=cut)
    table.add_column("document", overflow="fold", ratio=3 if not wide else None)
    table.add_column("metadata", overflow="fold", ratio=1 if not wide else None)
    for rank, hit in enumerate(hits, start=1):
        meta = hit.get("metadata") or {}
        table.add_row(
            str(rank),
            f"{float(hit.get('distance', 0.0)):.4f}",
            Text(str(hit.get("id", ""))),
            Text(_short(hit.get("document"), None if wide else 200)),
            Text(_short(json.dumps(meta, ensure_ascii=False, sort_keys=True), None if wide else 60) if meta else ""),
        )
    _print(table, wide)


def collections_table(collections: Sequence[dict[str, Any]], tenant: str, *, wide: bool = False) -> None:
    """Print a tenant's collections with counts and pins.

    Args:
        collections: ``[{"name", "count", "pin"}, ...]`` as returned by ``list_collections``.
        tenant: The tenant (for the title).
        wide: Show names, models and fingerprints whole.
    """
    if not collections:
        stdout.print(Text(f"tenant {tenant!r} has no collections"))
        return
    table = Table(title=f"collections of tenant {tenant!r}", title_justify="left")
    table.add_column("collection", no_wrap=True, overflow="ellipsis", max_width=None if wide else 28)
    table.add_column("records", justify="right", no_wrap=True)
    table.add_column("model", no_wrap=True, overflow="ellipsis", max_width=None if wide else 16)
    table.add_column("dim", justify="right", no_wrap=True)
    table.add_column("space", no_wrap=True)
    table.add_column("fingerprint", no_wrap=True, overflow="ellipsis", max_width=None if wide else 13)
    for coll in collections:
        pin = coll.get("pin")
        if pin:
            model = pin["name"] + (json.dumps(pin["config"], sort_keys=True) if pin.get("config") else "")
            row = [model, str(pin["dimension"]), str(pin["space"]), str(pin["fingerprint"])]
        else:
            row = ["(unpinned)", "", "", ""]
        table.add_row(Text(coll["name"]), str(coll["count"]), *[Text(v) for v in row])
    _print(table, wide)


def checks_table(checks: Sequence[Any], *, wide: bool = False) -> None:
    """Print doctor results, one entry per check: status, name, detail.

    Args:
        checks: :class:`~flux_chroma.cli.doctor.Check` objects.
        wide: One line per check however long (on a terminal, details wrap otherwise).
    """
    grid = Table.grid(padding=(0, 2))  # a wrapped detail stays indented under its check
    grid.add_column(no_wrap=True)
    grid.add_column()
    for check in checks:
        line = Text()
        line.append(f"{check.name}: ", style="bold")
        line.append(check.detail)
        grid.add_row(Text(f"{check.status:<4}", style=STATUS_STYLE.get(check.status, "")), line)
    _print(grid, wide or not stdout.is_terminal)  # piped: one line per check
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail", "skip")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    stdout.print(Text(f"\n{summary}", style="bold red" if counts["fail"] else "bold"))
