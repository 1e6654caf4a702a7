"""Timing helpers: run a workflow with its checkpoints timed, percentiles, and profiles."""

from __future__ import annotations

import asyncio
import cProfile
import io
import math
import pstats
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Timed",
    "cumulative",
    "embed_timed",
    "median",
    "percentile",
    "profile",
    "run_timed",
    "top_own_time",
]


@dataclass
class Timed:
    """One timed workflow execution.

    Attributes:
        ctx: Flux's execution context (``output``, ``has_succeeded``, ...).
        seconds: Wall time of the whole ``run``.
        checkpoint_seconds: Time spent persisting Flux state (every ``ctx.checkpoint()``).
        checkpoints: Number of checkpoints.
    """

    ctx: Any
    seconds: float
    checkpoint_seconds: float
    checkpoints: int


def run_timed(wf: Any, value: Any) -> Timed:
    """Run a workflow inline exactly like ``wf.run(value)``, timing Flux's checkpoints.

    ``wf.run`` builds an execution context, sets ``wf._save`` as its checkpoint and runs the
    workflow; this does the same with ``wf._save`` wrapped in a timer.

    Args:
        wf: A Flux ``@workflow``.
        value: The workflow input.

    Returns:
        The timed execution.

    Raises:
        RuntimeError: The execution did not succeed (its output is quoted).
    """
    from flux import ExecutionContext

    spent = [0.0, 0]

    async def save(ctx: Any) -> None:  # Flux awaits the checkpoint callback
        begin = time.perf_counter()
        wf._save(ctx)
        spent[0] += time.perf_counter() - begin
        spent[1] += 1

    start = time.perf_counter()
    ctx = ExecutionContext(
        workflow_id=wf._ensure_registered(),
        workflow_namespace=wf.namespace,
        workflow_name=wf.name,
        input=value,
    )
    ctx.set_checkpoint(save)
    ctx = asyncio.run(wf(ctx))
    seconds = time.perf_counter() - start
    if not ctx.has_succeeded:
        raise RuntimeError(f"workflow {wf.name} did not succeed: {ctx.output!r}")
    return Timed(ctx, seconds, float(spent[0]), int(spent[1]))


def embed_timed(ef: Any, texts: list[str]) -> tuple[Any, float]:
    """``ef.embed(texts)`` (a :class:`~flux_chroma.embedding.FastDefaultEmbedding`) and its seconds."""
    start = time.perf_counter()
    vectors = ef.embed(texts)
    return vectors, time.perf_counter() - start


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation; NaN for no values."""
    data = sorted(values)
    if not data:
        return math.nan
    pos = (len(data) - 1) * q / 100.0
    lo, hi = math.floor(pos), math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def median(values: Sequence[float]) -> float:
    """The median; NaN for no values."""
    return percentile(values, 50.0)


def profile(fn: Callable[[], Any]) -> pstats.Stats:
    """Run ``fn()`` under cProfile (the calling thread only) and return the statistics."""
    profiler = cProfile.Profile()
    profiler.enable()
    try:
        fn()
    finally:
        profiler.disable()
    return pstats.Stats(profiler, stream=io.StringIO())


def cumulative(stats: pstats.Stats, file_suffix: str, name: str) -> float:
    """Cumulative seconds of the functions called ``name`` defined in a file ending with ``file_suffix``."""
    entries = stats.stats  # type: ignore[attr-defined]
    return float(
        sum(row[3] for (f, _, n), row in entries.items() if n == name and f.endswith(file_suffix))
    )


def top_own_time(stats: pstats.Stats, top: int = 8) -> list[str]:
    """The entries with the most own (``tottime``) time.

    Args:
        stats: Profile statistics.
        top: How many entries.

    Returns:
        Lines ``"12.3% 0.456 s  function (file:line)"``.
    """
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(row[2] for row in entries.values()) or 1.0
    ranked = sorted(entries.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    lines = []
    for (filename, line, name), row in ranked:
        short = "/".join(filename.split("/")[-2:]) if "/" in filename else filename
        lines.append(f"{100 * row[2] / total:4.1f}% {row[2]:.3f} s  {name} ({short}:{line})")
    return lines
