"""Stand-in embedding functions of the benchmark: cheap, deterministic, registered with chromadb.

* ``bench-hash``: hash vectors (``dim`` floats from sha256 of the text), no model. Rows 6
  and 11 use it where the embedder is not what is measured (memory of the write path, the
  dispatch overhead per unit).
* ``bench-remote``: the same vectors after sleeping ``latency`` seconds per call, like a
  remote embedding API (row 10: a job's docs/s with ``parallel`` units in flight).

A process that runs ingestion tasks with these names must import this module first (the
job spec names a chromadb-registered function). Real chromadb embedding functions, no mocks.
"""

from __future__ import annotations

import hashlib
import time
from typing import Any

import numpy as np
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

__all__ = ["HashEmbedding", "RemoteStandIn", "hash_spec", "remote_spec"]


def _vectors(texts: Documents, dim: int) -> Embeddings:
    out = []
    for text in texts:
        digest = hashlib.sha256(text.encode()).digest() * (1 + dim // 32)
        vec = np.frombuffer(digest[:dim], dtype=np.uint8).astype(np.float32) + 1.0
        out.append(vec / np.linalg.norm(vec))
    return out


@register_embedding_function
class HashEmbedding(EmbeddingFunction[Documents]):
    """Hash vectors of ``dim`` floats (name ``bench-hash``).

    Args:
        dim: Vector size.
    """

    def __init__(self, dim: int = 16) -> None:
        self.dim = int(dim)

    @staticmethod
    def name() -> str:
        """The registered name."""
        return "bench-hash"

    def __call__(self, input: Documents) -> Embeddings:
        """Embed deterministically."""
        return _vectors(input, self.dim)

    def get_config(self) -> dict[str, Any]:
        """Config stored with the collection."""
        return {"dim": self.dim}

    @classmethod
    def build_from_config(cls, config: dict[str, Any]) -> HashEmbedding:
        """Rebuild from :meth:`get_config`."""
        return cls(int(config.get("dim", 16)))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        """Any config is valid."""

    def validate_config_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        """Any update is valid."""


@register_embedding_function
class RemoteStandIn(HashEmbedding):
    """Hash vectors after ``latency`` seconds per call (name ``bench-remote``).

    Args:
        latency: Seconds slept per call (the round trip of a remote API).
        dim: Vector size.
    """

    def __init__(self, latency: float = 0.05, dim: int = 16) -> None:
        super().__init__(dim)
        self.latency = float(latency)

    @staticmethod
    def name() -> str:
        """The registered name."""
        return "bench-remote"

    def __call__(self, input: Documents) -> Embeddings:
        """Sleep, then embed deterministically."""
        time.sleep(self.latency)
        return _vectors(input, self.dim)

    def get_config(self) -> dict[str, Any]:
        """Config stored with the collection."""
        return {"latency": self.latency, "dim": self.dim}

    @classmethod
    def build_from_config(cls, config: dict[str, Any]) -> RemoteStandIn:
        """Rebuild from :meth:`get_config`."""
        return cls(float(config.get("latency", 0.05)), int(config.get("dim", 16)))


def hash_spec(dim: int = 16) -> dict[str, Any]:
    """The job-spec ``embedding_function`` entry of :class:`HashEmbedding`."""
    return {"name": "bench-hash", "config": {"dim": dim}}


def remote_spec(latency: float, dim: int = 16) -> dict[str, Any]:
    """The job-spec ``embedding_function`` entry of :class:`RemoteStandIn`."""
    return {"name": "bench-remote", "config": {"latency": latency, "dim": dim}}
