"""Embedding-function identity and fingerprints (real model, no mocks)."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from chromadb.api.types import DefaultEmbeddingFunction, Documents, EmbeddingFunction, Embeddings

from flux_chroma.embedding import (
    CANARY_TEXTS,
    FastDefaultEmbedding,
    Fingerprint,
    clear_fingerprint_cache,
    compute_fingerprint,
    ef_identity,
    fingerprint_from_vectors,
    fingerprints_match,
)
from flux_chroma.errors import InvalidDocumentError


class HashEmbedding(EmbeddingFunction[Documents]):
    """Deterministic toy embedding of any dimension; counts its calls."""

    def __init__(self, dim: int = 8, salt: str = "") -> None:
        self.dim = dim
        self.salt = salt
        self.calls = 0

    def __call__(self, input: Documents) -> Embeddings:
        self.calls += 1
        out = []
        for text in input:
            raw = hashlib.sha256((self.salt + text).encode()).digest() * (1 + self.dim // 32)
            vec = np.frombuffer(raw[: self.dim], dtype=np.uint8).astype(np.float32) / 255.0
            out.append((vec / np.linalg.norm(vec)).astype(np.float32))
        return out

    @staticmethod
    def name() -> str:
        return "flux-chroma-test-hash"

    def get_config(self) -> dict[str, Any]:
        return {"dim": self.dim, "salt": self.salt}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> HashEmbedding:
        return HashEmbedding(int(config["dim"]), str(config["salt"]))


class LegacyEmbedding:
    """A pre-1.0 style function: no name(), no config."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, input: list[str]) -> list[np.ndarray]:
        self.calls += 1
        return [np.full(4, float(len(t)) + 1.0, dtype=np.float32) for t in input]


class NaNEmbedding(HashEmbedding):
    def __call__(self, input: Documents) -> Embeddings:
        return [np.full(self.dim, np.nan, dtype=np.float32) for _ in input]


def test_identity_of_fast_and_chroma_default() -> None:
    expected = {"name": "default", "config": {}}
    assert ef_identity(FastDefaultEmbedding()) == expected
    assert ef_identity(DefaultEmbeddingFunction()) == expected
    assert ef_identity(HashEmbedding(16, "s")) == {
        "name": "flux-chroma-test-hash",
        "config": {"dim": 16, "salt": "s"},
    }


def test_identity_of_legacy_and_odd_configs() -> None:
    legacy = ef_identity(LegacyEmbedding())
    assert legacy == {"name": f"{__name__}.LegacyEmbedding", "config": {}}

    class PathConfig(HashEmbedding):
        def get_config(self) -> dict[str, Any]:
            return {"path": Path("/models/x"), "n": 1}

    identity = ef_identity(PathConfig())
    assert identity["config"] == {"path": "/models/x", "n": 1}
    json.dumps(identity)


def test_fast_and_chroma_default_share_fingerprint() -> None:
    clear_fingerprint_cache()
    fast = compute_fingerprint(FastDefaultEmbedding())
    chroma = compute_fingerprint(DefaultEmbeddingFunction())
    assert fast.digest == chroma.digest
    assert fast.dimension == chroma.dimension == 384
    assert fingerprints_match(fast, chroma)
    assert max(abs(a - b) for a, b in zip(fast.probe, chroma.probe, strict=True)) <= 1e-5
    assert len(fast.digest) == 16 and int(fast.digest, 16) >= 0
    assert len(fast.probe) == 64
    assert len(CANARY_TEXTS) == 4


def test_other_models_differ() -> None:
    fast = compute_fingerprint(FastDefaultEmbedding())
    small = compute_fingerprint(HashEmbedding(8))
    same_dim = compute_fingerprint(HashEmbedding(384))
    other_weights = compute_fingerprint(HashEmbedding(384, salt="v2"))
    assert small.dimension == 8 and same_dim.dimension == 384
    digests = {fast.digest, small.digest, same_dim.digest, other_weights.digest}
    assert len(digests) == 4
    assert not fingerprints_match(fast, small)
    assert not fingerprints_match(fast, same_dim)
    assert not fingerprints_match(same_dim, other_weights)


def test_tolerance_separates_noise_from_model_changes() -> None:
    vectors = np.asarray(FastDefaultEmbedding().embed(CANARY_TEXTS), dtype=np.float64)
    base = fingerprint_from_vectors(vectors)
    rng = np.random.default_rng(7)
    tiny = fingerprint_from_vectors(vectors + rng.uniform(-1e-6, 1e-6, vectors.shape))
    assert fingerprints_match(base, tiny)
    changed = vectors + rng.normal(0.0, 0.02, vectors.shape)  # e.g. a quantised model
    assert not fingerprints_match(base, fingerprint_from_vectors(changed))
    scaled = fingerprint_from_vectors(vectors * 2.0)  # un-normalised variant
    assert not fingerprints_match(base, scaled) and scaled.digest != base.digest


def test_json_roundtrip_fits_metadata() -> None:
    fp = compute_fingerprint(FastDefaultEmbedding())
    text = fp.to_json()
    assert isinstance(text, str) and len(text) < 2048
    back = Fingerprint.from_json(text)
    assert back == fp and fingerprints_match(back, fp)
    bad_texts = ["", "{}", '{"v": 99}', '{"v":1,"digest":"a","dim":0}', "[1]", '{"v":1}']
    bad_texts += ['{"v":1,"digest":"a","dim":true}', '{"v":1,"digest":"a","dim":3,"probe":["x"]}']
    for bad in bad_texts:
        with pytest.raises(ValueError):
            Fingerprint.from_json(bad)


def test_fingerprint_is_cached_per_process() -> None:
    clear_fingerprint_cache()
    ef = HashEmbedding(12)
    first = compute_fingerprint(ef)
    assert compute_fingerprint(ef) == first
    assert compute_fingerprint(HashEmbedding(12)) == first  # same identity, same class
    assert ef.calls == 1
    compute_fingerprint(ef, use_cache=False)
    assert ef.calls == 2
    legacy = LegacyEmbedding()  # legacy identity does not pin behaviour: never cached
    compute_fingerprint(legacy)
    compute_fingerprint(legacy)
    assert legacy.calls == 2


def test_non_finite_vectors_are_rejected() -> None:
    with pytest.raises(InvalidDocumentError):
        compute_fingerprint(NaNEmbedding(8))


def test_stable_across_processes() -> None:
    here = compute_fingerprint(FastDefaultEmbedding())
    code = (
        "from flux_chroma.embedding import FastDefaultEmbedding, compute_fingerprint\n"
        "print(compute_fingerprint(FastDefaultEmbedding()).to_json())\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True
    )
    there = Fingerprint.from_json(done.stdout.strip().splitlines()[-1])
    assert there.digest == here.digest
    assert fingerprints_match(there, here)
