#!/usr/bin/env bash
# Run the benchmarks: prints the table and writes docs/benchmarks.md (+ docs/benchmarks.json).
#   bash scripts/bench.sh                      # sizes 1000,10000,50000 (tens of minutes on 2 cores)
#   bash scripts/bench.sh --quick              # sizes 300,1000 and small samples, for iterating
#   bash scripts/bench.sh --sizes 2000 --rows 1,2,4
# The harness starts its own Chroma server, Flux state and embedding cache in a temp folder.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
export FLUX_CHROMA_BENCH_ENTRY="bash scripts/bench.sh"
exec "$VENV/bin/python" -m bench "$@"
