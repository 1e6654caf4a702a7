#!/usr/bin/env bash
# Shared set-up for scripts/quickstart.sh and scripts/test.sh (source it, don't run it).
# Finds a Python >= 3.12 (PATH first, then pyenv), builds ./.venv, installs the project,
# and, when ../shared/models exists, copies Chroma's default model into Chroma's cache.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"

_py_ok() {  # $1 = interpreter; true when it runs and is >= 3.12
    "$1" -c 'import sys, venv; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
    local c
    for c in "${FLUX_CHROMA_PYTHON:-}" python3.13 python3.12 python3 python; do
        [ -n "$c" ] || continue
        if command -v "$c" >/dev/null 2>&1 && _py_ok "$(command -v "$c")"; then
            command -v "$c"; return 0
        fi
    done
    local roots=()
    command -v pyenv >/dev/null 2>&1 && roots+=("$(pyenv root)/versions")
    roots+=("$HOME/.pyenv/versions")
    for r in "${roots[@]}"; do
        for c in $(ls -d "$r"/3.1[2-9]*/bin/python 2>/dev/null | sort -rV); do
            if _py_ok "$c"; then echo "$c"; return 0; fi
        done
    done
    echo "error: no Python >= 3.12 found on PATH or in pyenv; install one (flux-core needs it)" >&2
    return 1
}

ensure_venv() {
    if [ ! -x "$VENV/bin/python" ] || ! _py_ok "$VENV/bin/python"; then
        local py; py="$(find_python)"
        echo "==> creating $VENV with $py ($("$py" -V 2>&1))"
        rm -rf "$VENV"
        "$py" -m venv "$VENV"
    fi
    local stamp="$VENV/.flux-chroma-installed-compiled-2"  # renamed when the steps below change
    if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
        echo "==> installing flux-chroma and its dependencies into .venv"
        local log="$VENV/pip-install.log"
        # uv installs the same versions as pip in a quarter of the time (measured on a fresh
        # venv here: 10 s, uv's own install included, against 38 s); pip is the fallback when uv
        # cannot be installed or reach the index. uv itself goes beside the environment, not into
        # it (the README corpus of docs/retrieval-quality.md is the environment's packages), and
        # trusts the system's certificates, as pip does.
        local uv="$VENV/uv-tool/bin/uv"
        if ! { "$VENV/bin/python" -m pip install --disable-pip-version-check -q --target "$VENV/uv-tool" "uv>=0.13,<0.14" \
                && "$uv" pip install --system-certs --python "$VENV/bin/python" -e "$ROOT[test]"; } >"$log" 2>&1 \
            && ! "$VENV/bin/python" -m pip install --disable-pip-version-check --no-compile -e "$ROOT[test]" >>"$log" 2>&1; then
            tail -n 40 "$log" >&2
            echo "error: installing flux-chroma failed (full log: $log)" >&2
            return 1
        fi
        # Byte-compile what was installed: in a shell with PYTHONDONTWRITEBYTECODE=1, Python never
        # writes a .pyc, so otherwise every process compiles each module it imports again
        # (`import chromadb` 2.0-3.1 s against 0.9-1.3 s, measured here), and the test suite
        # starts hundreds of processes. Not the kubernetes client (chromadb's distributed
        # server needs it; an HTTP client never imports it) nor packages' own tests: a quarter of
        # the files, a third of the time (14 s against 20 s on 2 cores). A file that does not
        # compile (a template shipped as .py) is left as it is, as pip and uv do, and named in
        # the log.
        local site skip
        site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_path("purelib"))')"
        skip="$("$VENV/bin/python" -c 'import re, sys; print(re.escape(sys.argv[1]) + "/(kubernetes|(.*/)?tests?)/")' "$site")"
        if ! "$VENV/bin/python" -m compileall -q -j 0 -x "$skip" "$site" >>"$log" 2>&1; then
            echo "note: some installed modules were not byte-compiled (harmless; see $log)" >&2
        fi
        touch "$stamp"
    fi
    # The project itself is installed editable, so no installer compiles it: do it here (only
    # what changed since the last run; __pycache__ is git-ignored). tests/ and bench/ too: the
    # suite and the benchmarks start many processes that import them.
    "$VENV/bin/python" -m compileall -q "$ROOT/flux_chroma" "$ROOT/tests" "$ROOT/bench" >/dev/null
}

install_shared_model() {
    # Offline machines: Chroma cannot download its default model. ../shared/models carries it.
    local src="$ROOT/../shared/models/chroma-onnx-all-MiniLM-L6-v2/onnx"
    local dst="$HOME/.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx"
    if [ -d "$src" ] && [ ! -f "$dst/model.onnx" ]; then
        echo "==> copying Chroma's default embedding model from ../shared/models"
        mkdir -p "$dst"
        cp -r "$src/." "$dst/"
        chmod -R u+w "$dst"
    fi
}

ensure_venv
install_shared_model
export PATH="$VENV/bin:$PATH"
