#!/usr/bin/env bash
# Main job: set up .venv, start a local Chroma server owned by this command, ingest three
# documents through a Flux workflow, query them through another, print the hits, stop the server.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ROOT"
exec "$VENV/bin/python" examples/quickstart.py "$@"
