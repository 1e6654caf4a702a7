"""Peak memory of embedding does not follow ``batch_size`` or text length (issue 23, item 5).

The real default model, each run in its own child process (a fresh interpreter, whose
``VmHWM`` is its own high-water mark). Compared as a ratio, not against a fixed figure: a
large batch of long texts must peak within a small factor of the same texts embedded two at
a time. Without a token budget the child embedding 32 texts of 256 tokens in one ONNX run
peaks at about 825 MiB, against about 275 MiB two at a time (about 320 MiB with the budget).
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

from flux_chroma.embedding.onnx_session import ATTENTION_BUDGET, run_sizes

CHILD = """
import json, sys
from pathlib import Path
from flux_chroma.embedding import FastDefaultEmbedding
batch_size = int(sys.argv[1])
base = " ".join(f"word{i % 97} alpha beta" for i in range(200))  # well over 256 tokens
texts = [f"{j} {base}" for j in range(32)] + [f"short text {j}" for j in range(32)]
vectors = FastDefaultEmbedding(batch_size=batch_size).embed(texts)
# VmHWM, not ru_maxrss: Linux folds the pre-exec image (the test process) into ru_maxrss.
status = Path("/proc/self/status").read_text()
peak_mib = int(status.split("VmHWM:")[1].split()[0]) / 1024
print(json.dumps({
    "peak_mib": peak_mib,
    "checksum": [round(float(x), 4) for x in vectors.sum(axis=0)[:8]],
}))
"""


def _embed_in_child(batch_size: int) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(batch_size)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_peak_memory_of_a_large_batch_of_long_texts_stays_near_a_small_batch() -> None:
    small = _embed_in_child(2)
    large = _embed_in_child(32)
    ratio = large["peak_mib"] / small["peak_mib"]
    assert ratio <= 1.3, (
        f"peak RSS {small['peak_mib']:.0f} MiB at batch_size=2, {large['peak_mib']:.0f} MiB at "
        f"batch_size=32 ({ratio:.2f}x): one ONNX run holds more than the attention budget"
    )
    assert np.allclose(small["checksum"], large["checksum"], atol=1e-3)  # same vectors


def test_runs_fit_the_budget_and_cover_every_text() -> None:
    lengths = [256] * 10 + [128] * 40 + [64] * 100 + [9] * 300
    sizes = run_sizes(lengths, 32)
    assert sum(sizes) == len(lengths)
    start = 0
    for count in sizes:
        width = lengths[start]
        assert count <= 32
        assert count == 1 or count * width * width <= ATTENTION_BUDGET
        start += count
    assert sizes[:4] == [4, 4, 4, 16]  # 4 a run while the longest is 256 tokens, then 16 (128)
    assert run_sizes([5000], 32) == [1]  # a text past the budget alone still runs
    assert run_sizes([], 32) == []
