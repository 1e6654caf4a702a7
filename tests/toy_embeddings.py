"""Deterministic, cheap embedding functions for tests about naming, pinning and batching.

They are real chromadb embedding functions (name/get_config/build_from_config, registered
with chromadb), not mocks. End-to-end tests use the real default model instead.
"""

from __future__ import annotations

import hashlib
import threading
import time
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function


class _Base(EmbeddingFunction[Documents]):
    salt = b""

    def __init__(self, dim: int = 8) -> None:
        self.dim = int(dim)
        self.calls: list[list[str]] = []
        self._lock = threading.Lock()

    def __call__(self, input: Documents) -> Embeddings:
        with self._lock:
            self.calls.append(list(input))
        out = []
        for text in input:
            raw = hashlib.sha256(self.salt + text.encode()).digest() * (1 + self.dim // 32)
            vec = np.frombuffer(raw[: self.dim], dtype=np.uint8).astype(np.float32) / 255.0 + 0.01
            out.append(vec / np.linalg.norm(vec))
        return out

    def texts_seen(self) -> set[str]:
        with self._lock:
            return {t for call in self.calls for t in call}

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim}

    @classmethod
    def build_from_config(cls, config: dict[str, Any]) -> _Base:
        return cls(dim=int(config.get("dim", 8)))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        return None

    def validate_config_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        return None


@register_embedding_function
class ToyEmbedding(_Base):
    """Hash-based vectors, name 'toy'."""

    @staticmethod
    def name() -> str:
        return "toy"


class ToyEmbeddingOtherWeights(_Base):
    """Same name and config as ToyEmbedding, different vectors (a silent model change)."""

    salt = b"v2"

    @staticmethod
    def name() -> str:
        return "toy"


@register_embedding_function
class OtherToyEmbedding(_Base):
    """A different model name."""

    salt = b"other"

    @staticmethod
    def name() -> str:
        return "other-toy"


class UnregisteredToyEmbedding(_Base):
    """A model this worker cannot rebuild from a pin (never registered with chromadb)."""

    salt = b"unregistered"

    @staticmethod
    def name() -> str:
        return "toy-unregistered"


EFS: dict[str, EmbeddingFunction[Documents]] = {
    "toy8": ToyEmbedding(8),
    "toy16": ToyEmbedding(16),
    "toy8-other-weights": ToyEmbeddingOtherWeights(8),
    "other8": OtherToyEmbedding(8),
    "unregistered8": UnregisteredToyEmbedding(8),
}


@register_embedding_function
class LatencyToyEmbedding(_Base):
    """A stand-in remote embedding API: toy vectors after a fixed latency per call.

    Config ``{"dim": 8, "delay": 0.05}``: every call sleeps ``delay`` seconds (releasing
    the GIL, as a network call does), then returns :class:`ToyEmbedding`'s vectors.
    ``max_in_flight`` records how many calls were ever in flight at once.
    """

    def __init__(self, dim: int = 8, delay: float = 0.05) -> None:
        super().__init__(dim)
        self.delay = float(delay)
        self.in_flight = 0
        self.max_in_flight = 0

    @staticmethod
    def name() -> str:
        return "toy-latency"

    def __call__(self, input: Documents) -> Embeddings:
        with self._lock:
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            time.sleep(self.delay)
        finally:
            with self._lock:
                self.in_flight -= 1
        return super().__call__(input)

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim, "delay": self.delay}

    @classmethod
    def build_from_config(cls, config: dict[str, Any]) -> LatencyToyEmbedding:
        return cls(dim=int(config.get("dim", 8)), delay=float(config.get("delay", 0.05)))
