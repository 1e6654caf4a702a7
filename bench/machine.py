"""The machine a benchmark ran on, its measured float32 peak, and the model's FLOP count."""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["ModelShape", "describe_machine", "measure_peak_gflops", "model_shape", "sequence_flops"]


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _ram_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(dist: str) -> str:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpu_flags() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""
    flags = next(
        (ln.split(":", 1)[1].split() for ln in text.splitlines() if ln.startswith("flags")), []
    )
    wanted = ("avx512f", "avx512_vnni", "avx2", "fma", "avx")
    return ",".join(f for f in wanted if f in flags)


def describe_machine() -> dict[str, Any]:
    """Describe the machine and software versions.

    Returns:
        A JSON-able dict: cpu, cores (usable by this process), ram_gib, os, python and the
        versions of chromadb, flux-core, flux-chroma, numpy, onnxruntime, plus the load
        average when the run started (a shared machine makes absolute times noisy).
    """
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        load = os.getloadavg()
    except OSError:
        load = (float("nan"),) * 3
    return {
        "cpu": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "cores": cores,
        "ram_gib": _ram_gib(),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "chromadb": _version("chromadb"),
        "flux-core": _version("flux-core"),
        "flux-chroma": _version("flux-chroma"),
        "numpy": np.__version__,
        "onnxruntime": _version("onnxruntime"),
        "load_at_start": [round(x, 2) for x in load],
        "executable": sys.executable,
    }


def measure_peak_gflops(n: int = 2048, repeats: int = 10) -> tuple[float, str]:
    """Measure the machine's float32 matrix-multiply peak with NumPy's BLAS on all cores.

    Args:
        n: Matrix side (``n x n`` float32 operands).
        repeats: Timed repetitions after one warm-up; the fastest counts.

    Returns:
        ``(GFLOP/s, description of the method)``.
    """
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    a @ b  # warm-up: thread pool start, page faults
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - start)
    gflops = 2 * n**3 / best / 1e9
    how = (
        f"best of {repeats} float32 {n}x{n} @ {n}x{n} NumPy matmuls ({_blas_name()}, all cores), "
        f"2*n^3 FLOPs each"
    )
    return gflops, how


def _blas_name() -> str:
    try:
        config = np.show_config(mode="dicts")
        blas = config.get("Build Dependencies", {}).get("blas", {})
        return f"{blas.get('name', 'BLAS')} {blas.get('version', '')}".strip()
    except Exception:  # noqa: BLE001 - cosmetic only
        return "BLAS"


@dataclass(frozen=True)
class ModelShape:
    """The transformer dimensions of the embedding model.

    Attributes:
        layers: Encoder layers.
        hidden: Hidden size.
        intermediate: Feed-forward size.
        vocab: Vocabulary size.
        max_positions: Position embeddings.
        onnx_bytes: Size of ``model.onnx`` (float32 weights, so about 4 bytes per parameter).
    """

    layers: int
    hidden: int
    intermediate: int
    vocab: int
    max_positions: int
    onnx_bytes: int

    @property
    def params(self) -> int:
        """Parameter count from the architecture (embeddings, encoder, layer norms)."""
        h, i = self.hidden, self.intermediate
        embeddings = (self.vocab + self.max_positions + 2) * h + 2 * h
        per_layer = 4 * (h * h + h) + (h * i + i) + (i * h + h) + 4 * h
        return embeddings + self.layers * per_layer

    @property
    def matmul_params(self) -> int:
        """Weights that take part in a matrix multiply per token (the embedding lookup does not)."""
        return self.layers * (4 * self.hidden**2 + 2 * self.hidden * self.intermediate)


def model_shape(model_dir: Path) -> ModelShape:
    """Read the model's shape from its ``config.json``.

    Args:
        model_dir: The ONNX model folder.

    Returns:
        The shape.
    """
    config = json.loads((model_dir / "config.json").read_text())
    return ModelShape(
        layers=int(config["num_hidden_layers"]),
        hidden=int(config["hidden_size"]),
        intermediate=int(config["intermediate_size"]),
        vocab=int(config["vocab_size"]),
        max_positions=int(config["max_position_embeddings"]),
        onnx_bytes=(model_dir / "model.onnx").stat().st_size,
    )


def sequence_flops(shape: ModelShape, length: int) -> float:
    """FLOPs of one forward pass over a sequence of ``length`` tokens.

    Counts the matrix multiplies: ``2 * matmul_params`` per token (Q, K, V, output projection
    and the two feed-forward layers) plus attention scores and weighted sums (``4 * s * h`` per
    token per layer). Softmax, GELU and layer norms (< 2 %) are left out.

    Args:
        shape: The model shape.
        length: Tokens in the (padded) sequence.

    Returns:
        The FLOP count.
    """
    return 2.0 * shape.matmul_params * length + 4.0 * shape.layers * shape.hidden * length * length
