"""The typed public API passes a strict checker, and the package passes the linter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[1]


def test_mypy_strict_passes_on_the_package() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "flux_chroma"], cwd=ROOT, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout + out.stderr


def test_ruff_passes_on_the_package() -> None:
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "flux_chroma"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_py_typed_marker_ships() -> None:
    assert (ROOT / "flux_chroma" / "py.typed").exists()
