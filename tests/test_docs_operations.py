"""docs/operations.md: its code blocks run verbatim, and it names every metric and span."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from user_shell import code_blocks

from flux_chroma.telemetry import METRICS

PAGE = Path(__file__).resolve().parent.parent / "docs" / "operations.md"


def test_the_python_block_runs_and_prints_every_metric() -> None:
    blocks = code_blocks(PAGE.read_text(), "python")
    assert len(blocks) == 1
    done = subprocess.run([sys.executable, "-c", blocks[0]], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert {line.split()[0] for line in done.stdout.splitlines()} == set(METRICS)


def test_the_environment_block_runs_and_the_page_documents_every_metric() -> None:
    page = PAGE.read_text()
    exports = [b for b in code_blocks(page, "bash") if "export " in b]
    assert len(exports) == 1
    done = subprocess.run(["bash", "-c", exports[0] + "\nenv | grep FLUX_OBSERVABILITY__"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.count("FLUX_OBSERVABILITY__") == 3
    for name in METRICS:
        assert f"`{name}`" in page, name
    for span in ("flux_chroma.task", "flux_chroma.ingest.batch", "flux_chroma.ingest.unit"):
        assert f"`{span}`" in page
