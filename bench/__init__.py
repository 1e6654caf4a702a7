"""flux-chroma benchmark harness: side-by-side ratios and counts (see docs/benchmarks.md).

Run it with ``bash scripts/bench.sh [--sizes 1000,10000,50000] [--quick]``.
"""
