"""Regenerate some rows of docs/benchmarks.md and keep the others as they are.

``bash scripts/bench.sh --rows 24`` measures row 24 only; writing its report whole would drop
every other row. :func:`merge_rows` takes the existing page and replaces only the selected
rows' table lines and "How each row is measured" sections, adding one line that says which
rows were regenerated, when and by which command. Everything else stays byte for byte.
"""

from __future__ import annotations

import re

__all__ = ["merge_rows", "rows_in"]

_ROW_LINE = re.compile(r"^\| (\d+) \|")
_SECTION = re.compile(r"^### (\d+)\.")
_NOTES_HEAD = "## How each row is measured"


def _table(lines: list[str]) -> tuple[int, int]:
    """``(first, end)`` of the main table's data lines (after its ``|---|`` line)."""
    head = next(i for i, line in enumerate(lines) if line.startswith("| # |"))
    end = head + 2
    while end < len(lines) and lines[end].startswith("|"):
        end += 1
    return head + 2, end


def _sections(lines: list[str]) -> tuple[int, int, dict[int, list[str]]]:
    """The notes block's span and its sections by row number."""
    start = next(i for i, line in enumerate(lines) if line.startswith(_NOTES_HEAD)) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    sections: dict[int, list[str]] = {}
    current: int | None = None
    for line in lines[start:end]:
        match = _SECTION.match(line)
        if match:
            current = int(match.group(1))
            sections[current] = []
        if current is not None:
            sections[current].append(line)
    return start, end, sections


def _row_of(line: str) -> int:
    match = _ROW_LINE.match(line)
    return int(match.group(1)) if match else 0


def rows_in(page: str) -> set[int]:
    """The row numbers of a page's main table."""
    lines = page.splitlines()
    first, end = _table(lines)
    return {int(m.group(1)) for line in lines[first:end] if (m := _ROW_LINE.match(line))}


def merge_rows(existing: str, fresh: str, rows: set[int], stamp: str) -> str:
    """The existing page with ``rows`` taken from ``fresh`` (both in ``Report.markdown`` form).

    Args:
        existing: The current docs/benchmarks.md.
        fresh: The markdown of a run that measured ``rows``.
        rows: Row numbers to replace.
        stamp: A line recording the regeneration, ``"- Row 24 regenerated: <date>, <command>"``,
            added to the header list (an older line with the same text before " regenerated"
            is replaced).

    Returns:
        The merged page.
    """
    old, new = existing.splitlines(), fresh.splitlines()
    first, end = _table(old)
    nfirst, nend = _table(new)
    kept = [line for line in old[first:end] if not ((m := _ROW_LINE.match(line)) and int(m.group(1)) in rows)]
    added = [line for line in new[nfirst:nend] if (m := _ROW_LINE.match(line)) and int(m.group(1)) in rows]
    table = sorted(kept + added, key=_row_of)
    merged = old[:first] + table + old[end:]
    start, stop, sections = _sections(merged)
    fresh_sections = _sections(new)[2]
    for row in rows:
        if row in fresh_sections:
            sections[row] = fresh_sections[row]
    body = [line for row in sorted(sections) for line in sections[row]]
    merged = merged[:start] + ["", *body] + merged[stop:]
    header_end = next(i for i, line in enumerate(merged) if line.startswith("- Date:"))
    while header_end < len(merged) and merged[header_end].startswith("- "):
        header_end += 1
    prefix = stamp.split(" regenerated")[0]
    merged = [line for line in merged[:header_end] if not line.startswith(prefix + " regenerated")] + [stamp] + merged[header_end:]
    return "\n".join(_squeeze(merged)) + "\n"


def _squeeze(lines: list[str]) -> list[str]:
    """No two blank lines in a row."""
    out: list[str] = []
    for line in lines:
        if not line.strip() and out and not out[-1].strip():
            continue
        out.append(line)
    return out
