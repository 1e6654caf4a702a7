"""Benchmark results: one :class:`Result` per figure, judged against its goal, rendered as tables."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Report", "Result", "judge", "fmt", "ratio_result"]

ROW_TITLES = {
    1: "Embedding: fast default vs Chroma default, at three text lengths",
    2: "Ingest: embed_and_add workflow vs raw HttpClient upserts",
    3: "Ingest: embed_and_add vs naive (Chroma embeds inside upsert)",
    4: "Re-ingest unchanged corpus vs first ingest, each in a fresh process",
    5: "Query task in a workflow vs raw collection.query",
    6: "Ingestion job: Flux state and peak RSS",
    7: "Multi-process ingest against one server",
    8: "Query serving through a Flux server and worker, both runners",
    9: "First ingest, sequential: where the wall time goes",
    10: "Ingestion job inline with parallel units: I/O-bound (remote) embedder",
    11: "Ingestion job across a Flux cluster: workers on one host, dispatch overhead",
    12: "int8 variant of the default model: speed and retrieval quality vs fp32",
    13: "Fixed cost of a fresh process: `flux-chroma query` vs a bare `import chromadb`",
    24: "Retrieval: dense vs hybrid quality and latency, cost of distinct results",
}


def fmt(value: float | None, digits: int = 3) -> str:
    """Format a number compactly (``-`` for None/NaN)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if value == 0:
        return "0"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) < 1e-3:
        return f"{value:.1e}"
    return f"{value:.{digits}g}"


def judge(value: float | None, op: str, target: float, *, unit: str = "") -> str:
    """Compare a figure with its goal.

    Args:
        value: The figure.
        op: ``"<="``, ``"<"``, ``">="`` or ``">"``.
        target: The goal.
        unit: Unit for the message.

    Returns:
        ``"met"``, or ``"MISSED by X"`` where X is the relative (or absolute, for a zero
        target) distance to the goal.
    """
    if value is None or math.isnan(value):
        return "not measured"
    ok = {"<=": value <= target, "<": value < target, ">=": value >= target, ">": value > target}[
        op
    ]
    if ok:
        return "met"
    if target == 0:
        return f"MISSED by {fmt(abs(value))}{unit}"
    rel = value / target if op in ("<=", "<") else target / value
    return f"MISSED by {fmt((rel - 1) * 100, 2)}%"


@dataclass
class Result:
    """One figure of the benchmark.

    Attributes:
        row: Row number (1-7, as in the issue).
        metric: What the figure is.
        size: Corpus size or sample the figure was measured on.
        value: The figure (a ratio, a count or a latency); None when not measured.
        unit: Its unit.
        goal: The goal, e.g. ``"<= 1.10"`` (empty when the row has none).
        status: ``"met"``, ``"MISSED by ..."``, ``"info"`` or ``"TODO ..."``.
        detail: The side-by-side measurements the figure comes from.
    """

    row: int
    metric: str
    size: str
    value: float | None
    unit: str = ""
    goal: str = ""
    status: str = "info"
    detail: str = ""


def ratio_result(
    row: int,
    metric: str,
    size: str,
    value: float,
    detail: str,
    goal: tuple[str, float, str] | None = None,
) -> Result:
    """A ratio figure (unit ``x``), judged when it carries a goal.

    Args:
        row: Row number.
        metric: What the ratio is.
        size: Sample it was measured on.
        value: The ratio.
        detail: The side-by-side measurements.
        goal: ``(op, target, label)``, e.g. ``(">=", 0.95, ">= 0.95 (no loss)")``; None: info only.

    Returns:
        The result.
    """
    if goal is None:
        return Result(row, metric, size, value, "x", "", "info", detail)
    op, target, label = goal
    return Result(row, metric, size, value, "x", label, judge(value, op, target), detail)


@dataclass
class Report:
    """All results of a run plus the notes that explain them.

    Attributes:
        results: Figures in row order.
        notes: Per-row method notes and profiles (markdown lines).
        meta: Machine, command, date, duration.
    """

    results: list[Result] = field(default_factory=list)
    notes: dict[int, list[str]] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    def add(self, result: Result) -> Result:
        """Record a figure and print it at once (long runs show progress)."""
        self.results.append(result)
        print(
            f"  [{result.row}] {result.metric} @ {result.size}: {fmt(result.value)}{result.unit} "
            f"{result.goal and '(goal ' + result.goal + ')'} {result.status} | {result.detail}",
            flush=True,
        )
        return result

    def note(self, row: int, *lines: str) -> None:
        """Attach markdown lines to a row's notes."""
        self.notes.setdefault(row, []).append("\n".join(lines))

    def table_rows(self) -> list[list[str]]:
        """The table as cells: row, figure, size, value, goal, status, side by side."""
        rows = []
        for r in sorted(self.results, key=lambda x: x.row):
            rows.append(
                [
                    str(r.row),
                    r.metric,
                    r.size,
                    f"{fmt(r.value)}{r.unit}",
                    r.goal or "-",
                    r.status,
                    r.detail,
                ]
            )
        return rows

    def text_table(self) -> str:
        """A plain-text table for the terminal."""
        head = ["#", "figure", "size", "value", "goal", "status"]
        rows = [r[:6] for r in self.table_rows()]
        widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=False)]
        line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))
        out = [line, "-" * len(line)]
        out += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
        return "\n".join(out)

    def markdown(self) -> str:
        """The full docs/benchmarks.md text."""
        m = self.meta
        machine = m.get("machine", {})
        lines = [
            "# Benchmarks",
            "",
            "Generated by the benchmark harness in `bench/`; do not edit by hand. Every figure is a",
            "ratio of two measurements taken side by side in the same invocation, or a count (bytes,",
            "embedder calls), so it means something on a shared, noisy machine. Absolute times in the",
            "last column are only there to show what each ratio was computed from.",
            "",
            f"- Date: {m.get('date', '?')}",
            f"- Command: `{m.get('command', '?')}`",
            f"- Duration: {fmt(m.get('seconds'))} s ({m.get('mode', '')}); per row: "
            + ", ".join(f"{k}: {v:.0f} s" for k, v in (m.get("row_seconds") or {}).items()),
            (
                f"- Machine: {machine.get('cpu', '?')} ({machine.get('cpu_flags', '')}), "
                f"{machine.get('cores', '?')} cores, {machine.get('ram_gib', '?')} GiB RAM, {machine.get('os', '?')}; "
                f"load average at start {machine.get('load_at_start', '?')}, at end {m.get('load_at_end', '?')}"
            ),
            (
                f"- Software: Python {machine.get('python', '?')}, chromadb {machine.get('chromadb', '?')}, "
                f"flux-core {machine.get('flux-core', '?')}, flux-chroma {machine.get('flux-chroma', '?')}, "
                f"numpy {machine.get('numpy', '?')}, onnxruntime {machine.get('onnxruntime', '?')}"
            ),
            f"- Corpus: {m.get('corpus', '?')}",
            "",
            "| # | figure | size | value | goal | status | side by side |",
            "|---|---|---|---|---|---|---|",
        ]
        for cells in self.table_rows():
            lines.append("| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |")
        lines += ["", "## How each row is measured, and why a goal is missed", ""]
        for row in sorted(set(ROW_TITLES) | set(self.notes)):
            lines.append(f"### {row}. {ROW_TITLES.get(row, '')}")
            lines.append("")
            lines.extend(self.notes.get(row, ["(no notes)"]))
            lines.append("")
        lines += [
            "## Running it",
            "",
            "```",
            "bash scripts/bench.sh                       # sizes 1000,10000,50000",
            "bash scripts/bench.sh --quick               # sizes 300,1000 and small samples",
            "bash scripts/bench.sh --sizes 2000 --rows 1,2,4",
            "```",
            "",
            "The harness starts its own `chroma run` server, Flux state and embedding cache in a",
            "temporary folder, and deletes them afterwards (`--keep` keeps them).",
            "",
        ]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """Results, notes and metadata as JSON-able data."""
        return {
            "meta": self.meta,
            "results": [asdict(r) for r in self.results],
            "notes": self.notes,
        }

    def write(self, markdown_path: Path | None, json_path: Path | None) -> None:
        """Write the markdown and/or JSON files."""
        if markdown_path is not None:
            markdown_path.parent.mkdir(parents=True, exist_ok=True)
            markdown_path.write_text(self.markdown(), encoding="utf-8")
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(
                json.dumps(self.to_json(), indent=1, default=str), encoding="utf-8"
            )
