#!/usr/bin/env bash
# Set up .venv and run the whole test suite (slow scenarios included) against real
# `chroma run` servers that the tests start on free loopback ports.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
exec "$VENV/bin/python" -m pytest "$@"
