"""Run the benchmark: ``python -m bench [--sizes 1000,10000,50000] [--quick] [--rows 1,2]``.

Use ``bash scripts/bench.sh`` (same arguments), which sets up the virtualenv first. Prints the
table and writes docs/benchmarks.md (``--out``) plus a JSON copy of the results (``--json``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from bench.workspace import ROOT, Workspace

__all__ = ["main"]

_DEFAULT_ROWS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)  # row 24 (two real-model ingestions) only when asked
_FULL_SIZES = (1000, 10_000, 50_000)
_QUICK_SIZES = (300, 1000)
_DEFAULT_OUT = ROOT / "docs" / "benchmarks.md"
_SAMPLE_FLAGS = (
    "embed_sample",
    "chunk_sample",
    "naive_sample",
    "naive_batch",
    "first_ingest_sample",
    "queries",
    "reps",
    "scale_docs",
    "int8_sample",
    "serve_calls",
    "parallel_docs",
    "cluster_docs",
)


def _ints(text: str) -> tuple[int, ...]:
    values = tuple(sorted({int(x.replace("_", "")) for x in text.split(",") if x.strip()}))
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(
            f"expected positive integers separated by commas, got {text!r}"
        )
    return values


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse the command line."""
    p = argparse.ArgumentParser(prog="bench", description=__doc__)
    p.add_argument(
        "--sizes",
        type=_ints,
        help="corpus sizes in chunks (default 1000,10000,50000; quick 300,1000)",
    )
    p.add_argument("--quick", action="store_true", help="small sizes and samples, for iterating")
    p.add_argument(
        "--rows",
        type=_ints,
        default=_DEFAULT_ROWS,
        help="rows to run (default 1-13; 24 only when asked); the other rows of --out are kept",
    )
    p.add_argument("--out", type=Path, default=_DEFAULT_OUT, help="markdown report path")
    p.add_argument(
        "--json",
        type=Path,
        default=None,
        help="JSON results path (default: bench/.work/benchmarks.json, or next to a given --out)",
    )
    p.add_argument(
        "--workdir", default=None, help="keep all state in this folder instead of a temp folder"
    )
    p.add_argument("--keep", action="store_true", help="keep the temp folder")
    p.add_argument("--procs", type=_ints, default=(1, 2, 4), help="row 7 process counts")
    p.add_argument("--rss-sizes", type=_ints, default=None, help="row 6 peak-RSS corpus sizes")
    p.add_argument("--workers", type=_ints, default=None, help="row 11 Flux worker counts")
    for flag in _SAMPLE_FLAGS:
        p.add_argument(
            f"--{flag.replace('_', '-')}", type=int, default=None, help="override a sample size"
        )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write the report.

    Args:
        argv: Arguments (default ``sys.argv[1:]``).

    Returns:
        Exit status 0.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    ws = Workspace.create(args.workdir, args.keep)  # sets Flux's env before flux is imported
    from bench.context import Bench, Plan
    from bench.machine import describe_machine
    from bench.report import Report

    sizes = args.sizes or (_QUICK_SIZES if args.quick else _FULL_SIZES)
    rows = frozenset(args.rows)
    plan = (
        Plan.quick_plan(sizes, rows)
        if args.quick
        else Plan(sizes, rows, scale_docs=min(3000, max(sizes)))
    )
    overrides = {f: getattr(args, f) for f in _SAMPLE_FLAGS if getattr(args, f) is not None}
    plan = replace(plan, procs=args.procs, **overrides)
    if args.rss_sizes:
        plan = replace(plan, rss_sizes=args.rss_sizes)
    if args.workers:
        plan = replace(plan, cluster_workers=args.workers)
    entry = os.environ.get("FLUX_CHROMA_BENCH_ENTRY", "python -m bench")
    report = Report(
        meta={
            "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
            "command": " ".join([entry, *argv]),
            "mode": "quick" if plan.quick else "full",
            "machine": describe_machine(),
            "sizes": list(sizes),
            "rows": sorted(rows),
        }
    )
    started = time.perf_counter()
    b = Bench(ws, plan, report)
    try:
        b.setup()
        report.meta["corpus"] = (
            f"first {max(sizes):,} chunks of the Python {report.meta['machine']['python']} standard "
            "library's docstrings (bench/corpus.py), 20-70 words / at most 400 characters unless 20 words are longer"
        )
        _run_rows(b)
    finally:
        ws.close()
    report.meta["seconds"] = time.perf_counter() - started
    report.meta["load_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print()
    print(report.text_table())
    default_json = ROOT / "bench" / ".work" / "benchmarks.json"  # git-ignored
    json_path = args.json or (
        default_json if args.out == _DEFAULT_OUT else args.out.with_suffix(".json")
    )
    _write(report, rows, args.out, json_path)
    print(f"\nwrote {args.out} and {json_path} in {report.meta['seconds']:.0f} s")
    return 0


def _write(report: object, rows: frozenset[int], out: Path, json_path: Path) -> None:
    """Write the page; rows of an existing page that this run did not measure are kept."""
    from bench.report import Report
    from bench.report_merge import merge_rows, rows_in

    assert isinstance(report, Report)
    report.write(None, json_path)
    page = report.markdown()
    if out.exists():
        old = out.read_text(encoding="utf-8")
        if rows >= set(_DEFAULT_ROWS):  # a full run: its own page, plus the rows it did not run
            kept = rows_in(old) - rows
            if kept:
                stamp = f"- Row(s) {', '.join(map(str, sorted(kept)))} kept from the previous page (not run)"
                page = merge_rows(page, old, kept, stamp)
        else:
            stamp = f"- Row(s) {', '.join(map(str, sorted(rows)))} regenerated: {report.meta['date']}, `{report.meta['command']}`"
            page = merge_rows(old, page, set(rows), stamp)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")


def _run_rows(b: object) -> None:
    from bench.cli_cost import run_row13
    from bench.context import Bench
    from bench.rows_cluster import run_row11
    from bench.rows_embed import run_row1
    from bench.rows_first_ingest import run_row9
    from bench.rows_ingest import run_row2, run_row3, run_row4
    from bench.rows_int8 import run_row12
    from bench.rows_memory import run_row6
    from bench.rows_parallel import run_row10
    from bench.rows_procs import run_row7
    from bench.rows_query import run_row5
    from bench.rows_retrieval import run_row24
    from bench.rows_serving import run_row8

    assert isinstance(b, Bench)
    # Row 4 runs before row 2: its largest first ingest fills the cache row 2 starts warm.
    steps: list[tuple[int, Callable[[], None]]] = [
        (1, lambda: run_row1(b.report, b.plan)),
        (4, lambda: run_row4(b)),
        (2, lambda: run_row2(b)),
        (3, lambda: run_row3(b)),
        (5, lambda: run_row5(b)),
        (6, lambda: run_row6(b)),
        (7, lambda: run_row7(b)),
        (8, lambda: run_row8(b)),
        (9, lambda: run_row9(b)),
        (10, lambda: run_row10(b)),
        (11, lambda: run_row11(b)),
        (12, lambda: run_row12(b.report, b.plan)),
        (13, lambda: run_row13(b)),
        (24, lambda: run_row24(b)),
    ]
    for row, step in steps:
        if row in b.plan.rows:
            begin = time.perf_counter()
            print(f"row {row} ...", flush=True)
            step()
            print(f"row {row} done in {time.perf_counter() - begin:.0f} s", flush=True)
            b.report.meta.setdefault("row_seconds", {})[str(row)] = round(
                time.perf_counter() - begin, 1
            )


if __name__ == "__main__":
    sys.exit(main())
