"""Rich output for the ``flux-chroma`` commands: fits the console's width (80 columns
included) by cutting long values, unless ``wide=True`` (``--wide``) shows every value whole."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from flux_chroma.cli.support import stdout

__all__ = ["hits_table", "collections_table", "checks_table", "STATUS_STYLE"]

STATUS_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}
_WIDE = 100_000  # render width for --wide: nothing is cut or wrapped
HIT_LINES = 3
"""Text lines shown per query hit at a terminal's width (four hits fit a 24-line screen)."""


def _short(text: str, limit: int | None) -> str:
    value = " ".join(text.split())
    return value if limit is None or len(value) <= limit else value[: limit - 1] + "…"


def _print(renderable: Any, wide: bool) -> None:
    if wide:  # a console as wide as the longest value: tables take only the width they need
        Console(file=stdout.file, width=_WIDE, color_system="auto" if stdout.color_system else None).print(
            renderable, crop=False
        )
    else:
        stdout.print(renderable)


def _hit_label(hit: dict[str, Any]) -> str:
    """``path #chunk > heading`` (or ``p.N``) for an ingested file's hit, else the id."""
    meta = hit.get("metadata") or {}
    cited = hit.get("citation") or {}
    rid = str(hit.get("id", ""))
    path = cited.get("path") or meta.get("path")
    if not (isinstance(path, str) and path):
        return rid
    chunk = rid.rsplit("#", 1)[-1].split(":", 1)[0] if "#" in rid else ""
    label = f"{path} #{chunk}" if chunk.isdigit() else path
    if cited.get("heading"):
        label += f" > {cited['heading']}"
    elif cited.get("page") is not None:
        label += f" p.{cited['page']}"
    return label


def hits_table(hits: Sequence[dict[str, Any]], title: str, *, wide: bool = False) -> None:
    """Print ranked hits as search results: a header line per hit, then its text.

    The header holds the rank, the distance, a readable name (``guide.md #3 > Install``) and
    how many copies of its passage were folded into the hit. ``wide`` shows the id, the whole text
    and the metadata instead, each on one line however long.
    """
    if not hits:
        stdout.print(Text(f"{title}: no hits"))
        return
    width = _WIDE if wide else max(20, stdout.width)
    out = [_short(title, None if wide else width)]
    for rank, hit in enumerate(hits, start=1):
        distance = hit.get("distance")
        head = f"{rank:>2}. {'-' if distance is None else f'{float(distance):.4f}'}  "
        copies = hit.get("duplicates") or []
        tail = f"  (+{len(copies)} {'copy' if len(copies) == 1 else 'copies'})" if copies else ""
        name = str(hit.get("id", "")) if wide else _hit_label(hit)
        room = None if wide else max(8, width - len(head) - len(tail))
        out.append(head + _short(name, room) + tail)
        text = " ".join(str(hit.get("document") or "(no stored text)").split())
        if wide:
            out.append("    " + text)
            meta = hit.get("metadata") or {}
            if meta:
                out.append("    " + json.dumps(meta, ensure_ascii=False, sort_keys=True))
            if hit.get("citation"):
                out.append("    citation: " + json.dumps(hit["citation"], ensure_ascii=False, sort_keys=True))
            if copies:
                out.append("    copies: " + ", ".join(map(str, copies)))
        else:
            wrapped = textwrap.wrap(text, width=width - 4, break_long_words=True) or [""]
            if len(wrapped) > HIT_LINES:
                wrapped = wrapped[:HIT_LINES]
                wrapped[-1] = _short(wrapped[-1] + " …", width - 4)
            out.extend("    " + line for line in wrapped)
    for line in out:
        if wide:
            Console(file=stdout.file, width=_WIDE, color_system=None).print(Text(line), crop=False, soft_wrap=True)
        else:
            stdout.print(Text(line), crop=True, no_wrap=True, overflow="crop")


def collections_table(collections: Sequence[dict[str, Any]], tenant: str, *, wide: bool = False) -> None:
    """Print a tenant's collections (as ``list_collections`` returns them) with counts and pins."""
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
    """Print doctor :class:`~flux_chroma.cli.doctor.Check` results, then a summary line.

    ``wide`` (or piped output) keeps each check on one line; on a terminal details wrap.
    """
    grid = Table.grid(padding=(0, 2))  # a wrapped detail stays indented under its check
    grid.add_column(no_wrap=True)
    grid.add_column()
    for check in checks:
        line = Text.assemble((f"{check.name}: ", "bold"), check.detail)
        grid.add_row(Text(f"{check.status:<4}", style=STATUS_STYLE.get(check.status, "")), line)
    _print(grid, wide or not stdout.is_terminal)  # piped: one line per check
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("ok", "warn", "fail", "skip")}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    stdout.print(Text(f"\n{summary}", style="bold red" if counts["fail"] else "bold"))
