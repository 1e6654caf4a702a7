"""The ONNX runtime side of the default model: tokenizers, one session per process, pooling.

Sessions and tokenizers are loaded once per model folder (and per process: ONNX thread pools
do not survive ``fork()``) under one lock, so threads share them. A session's thread count
comes from :mod:`flux_chroma.embedding.threads`; when it shares the host's cores and the share
changes (another embedding process started or ended), the session is built again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from flux_chroma.embedding.core_gate import CoreGate
from flux_chroma.embedding.model_files import MAX_TOKENS
from flux_chroma.embedding.threads import Budget, configured_threads, cpu_count
from flux_chroma.errors import ModelNotAvailableError

__all__ = ["GatedSession", "load_tokenizers", "pool", "running_session"]


@dataclass(frozen=True)
class _Tokenizers:
    truncating: Any  # tokenizers.Tokenizer: truncation at MAX_TOKENS, no padding
    counting: Any  # tokenizers.Tokenizer: no truncation, no padding


_TOKENIZERS: dict[str, _Tokenizers] = {}
_SESSIONS: dict[tuple[int, str], tuple[int, Any]] = {}  # (pid, folder) -> (threads, session)
# The session replaced last, kept: a share that flips between two values (another process
# embedding now and then) swaps sessions instead of building one per flip (~0.1 s each).
_SPARE: dict[tuple[int, str], tuple[int, Any]] = {}
_LOCK = threading.Lock()
_BUDGET = Budget()
_GATE = CoreGate(_BUDGET.slots.folder, cpu_count())


def load_tokenizers(folder: Path) -> _Tokenizers:
    """The truncating and counting tokenizers of ``folder`` (loaded once, shared)."""
    key = str(folder)
    with _LOCK:
        cached = _TOKENIZERS.get(key)
        if cached is None:
            from tokenizers import Tokenizer

            path = str(folder / "tokenizer.json")
            try:
                truncating = Tokenizer.from_file(path)
                counting = Tokenizer.from_file(path)
            except Exception as exc:
                raise ModelNotAvailableError(
                    f"The tokenizer file {path} could not be loaded ({type(exc).__name__}: "
                    f"{exc}). Replace the model folder {folder} with an intact copy."
                ) from exc
            # Same settings as Chroma's ONNXMiniLM_L6_V2, minus the fixed padding to 256.
            truncating.enable_truncation(max_length=MAX_TOKENS)
            truncating.no_padding()
            counting.no_truncation()
            counting.no_padding()
            cached = _Tokenizers(truncating=truncating, counting=counting)
            _TOKENIZERS[key] = cached
        return cached


class GatedSession:
    """An ONNX session whose runs take the host's cores through a :class:`CoreGate`.

    Args:
        session: The ``onnxruntime.InferenceSession``.
        threads: Its intra-op threads.
        gate: The host's gate, or ``None`` to run ungated (a fixed thread count was set).
    """

    def __init__(self, session: Any, threads: int, gate: CoreGate | None) -> None:
        self.session = session
        self.threads = threads
        self.gate = gate

    def get_outputs(self) -> Any:
        """The session's output descriptions."""
        return self.session.get_outputs()

    def run(self, outputs: Any, feeds: dict[str, Any]) -> Any:
        """``session.run`` once a core is free (at most one run per core on the host)."""
        if self.gate is None:
            return self.session.run(outputs, feeds)
        with self.gate.hold(self.threads):
            return self.session.run(outputs, feeds)


@contextmanager
def running_session(folder: Path, threads: int | None = None) -> Iterator[Any]:
    """The session of ``folder`` for one embedding; meanwhile this process counts as busy.

    The thread count is ``threads``, else ``$FLUX_CHROMA_EMBED_THREADS``, else this process's
    share of the host's cores (see :mod:`flux_chroma.embedding.threads`), decided when the
    embedding starts; sharing, each model run also waits for a free core
    (:mod:`flux_chroma.embedding.core_gate`). When it ends, the process is marked idle.

    Args:
        folder: The model folder.
        threads: ``threads=`` of the embedding function, if set.

    Yields:
        The session (built again when its thread count no longer matches), gated when shared.
    """
    fixed = configured_threads(threads)
    if fixed is not None:
        yield GatedSession(_session(folder, fixed), fixed, None)
        return
    want = _BUDGET.threads()
    try:
        yield GatedSession(_session(folder, want), want, _GATE)
    finally:
        _BUDGET.done()


def _session(folder: Path, want: int) -> Any:
    key = (os.getpid(), str(folder))  # ONNX thread pools do not survive fork(): one per process
    with _LOCK:
        current = _SESSIONS.get(key)
        if current is not None and current[0] == want:
            return current[1]
        spare = _SPARE.get(key)
        if spare is not None and current is not None and spare[0] == want:
            _SESSIONS[key], _SPARE[key] = spare, current
            return spare[1]
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = want
        options.inter_op_num_threads = 1
        path = str(folder / "model.onnx")
        try:
            session = ort.InferenceSession(
                path, sess_options=options, providers=["CPUExecutionProvider"]
            )
        except Exception as exc:
            raise ModelNotAvailableError(
                f"The ONNX model {path} could not be loaded ({type(exc).__name__}: {exc}). "
                f"Replace the model folder {folder} with an intact copy."
            ) from exc
        if current is not None:
            _SPARE[key] = current
        _SESSIONS[key] = (want, session)
        return session


def pool(hidden: npt.NDArray[np.float32], mask: npt.NDArray[np.int64]) -> npt.NDArray[np.float32]:
    """Masked mean pooling and L2 normalisation, with Chroma's float64 arithmetic."""
    weights = mask[:, :, np.newaxis].astype(np.float64)
    summed = np.sum(hidden.astype(np.float64) * weights, axis=1)
    counts = np.clip(weights.sum(axis=1), a_min=1e-9, a_max=None)
    mean = summed / counts
    norm = np.linalg.norm(mean, axis=1)
    norm[norm == 0] = 1e-12
    return cast(npt.NDArray[np.float32], (mean / norm[:, np.newaxis]).astype(np.float32))
