"""A tiny real run of the benchmark harness (bench/): every row is produced, every figure a number.

It starts its own Chroma server and Flux state (as `bash scripts/bench.sh` does), on a
40-chunk corpus with tiny samples. Speed is not asserted: only that the table is complete.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from user_shell import user_env

ROOT = Path(__file__).resolve().parent.parent
ROWS = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13}


@pytest.mark.slow
@pytest.mark.timeout(1500)  # a hang guard only: on a loaded 2-core machine the run passed 600 s
def test_tiny_benchmark_run_fills_every_row(tmp_path: Path) -> None:
    out = tmp_path / "benchmarks.md"
    command = [
        sys.executable, "-m", "bench", "--sizes", "40", "--quick", "--embed-sample", "2",
        "--chunk-sample", "2", "--naive-sample", "2", "--naive-batch", "2", "--queries", "4",
        "--reps", "1", "--scale-docs", "4", "--procs", "1,2", "--serve-calls", "1", "--first-ingest-sample", "6",
        "--int8-sample", "12",
        "--rss-sizes", "40,80", "--parallel-docs", "8", "--cluster-docs", "8", "--workers", "1",
        "--out", str(out),
    ]  # fmt: skip
    env = user_env()
    done = subprocess.run(
        command, check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1400
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]

    data = json.loads(out.with_suffix(".json").read_text())
    results = data["results"]
    assert {r["row"] for r in results} == ROWS
    for r in results:
        assert isinstance(r["value"], (int, float)) and math.isfinite(r["value"]), r
        assert not r["status"].startswith("TODO"), r
    by_metric = {(r["row"], r["metric"]): r for r in results}
    assert by_metric[(4, "embedder calls during re-ingest")]["value"] == 0
    assert by_metric[(1, "max abs vector difference")]["value"] <= 1e-5
    row7 = [r for r in results if r["row"] == 7]
    assert len(row7) == 6  # 1 and 2 processes, cold and warm cache, + 2 with the advised threads, + the model alone
    assert len([r for r in results if r["row"] == 8]) == 6  # four workflows, the goal, the remainder
    assert len([r for r in results if r["row"] == 9]) == 2  # ~1,000-character and short chunks
    row6 = [r["metric"] for r in results if r["row"] == 6]
    assert row6.count("peak RSS of a job, largest / smallest corpus") == 1
    assert len([r for r in results if r["row"] == 10]) == 4  # parallel 1, 2 and 4, + the bare client
    assert len([r for r in results if r["row"] == 13]) == 2  # hybrid and dense query processes / import chromadb
    row11 = [r["metric"] for r in results if r["row"] == 11]
    assert len(row11) == 2 and "dispatch overhead per unit through the Flux server (median)" in row11

    text = out.read_text()
    machine = data["meta"]["machine"]
    assert machine["cpu"] in text and f"chromadb {machine['chromadb']}" in text
    assert "| 7 |" in text and "--sizes 40" in text
