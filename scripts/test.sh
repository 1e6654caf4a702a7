#!/usr/bin/env bash
# Set up .venv, then run the static checks (ruff, mypy --strict) and the whole test suite (slow
# scenarios included) against real `chroma run` servers that the tests start on free loopback
# ports. With arguments, only pytest runs, with those arguments (e.g. `-m "not slow"`, a file).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
if [ "$#" -gt 0 ]; then
    exec "$VENV/bin/python" -m pytest "$@"
fi

echo "==> ruff check ."
"$VENV/bin/ruff" check .

# mypy needs ~30 s of one core; the suite mostly waits on servers and processes, so mypy runs
# beside it and its result is shown (and counted) when the suite is done.
mypy_log="$(mktemp)"
trap 'rm -f "$mypy_log"' EXIT
echo "==> mypy --strict flux_chroma (beside the test suite)"
"$VENV/bin/mypy" --strict flux_chroma >"$mypy_log" 2>&1 &
mypy_pid=$!

# Three workers on two cores: the fleet tests mostly wait on servers and processes, so a third
# worker keeps both cores busy (measured: 493 s with -n 3 against 573 s with -n 2).
# --dist loadscope: a module is one unit of work, so its module fixtures (a Flux fleet, a server)
# start once; tests/conftest.py orders the longest modules first and --no-loadscope-reorder keeps
# that order (measured on a quiet machine: 403 s, against 462 s handing out single tests; a
# fresh-clone CI run with plain `-n 3`, which pre-assigns a quarter of the suite round-robin, took 611 s).
echo "==> pytest -n 3 --dist loadscope --no-loadscope-reorder (longest modules first, see tests/conftest.py)"
status=0
"$VENV/bin/python" -m pytest -n 3 --dist loadscope --no-loadscope-reorder --durations=30 || status=$?

mypy_status=0
wait "$mypy_pid" || mypy_status=$?
echo "==> mypy --strict flux_chroma"
cat "$mypy_log"
if [ "$mypy_status" -ne 0 ]; then
    echo "error: mypy --strict found problems (above)" >&2
    [ "$status" -ne 0 ] || status=$mypy_status
fi
exit "$status"
