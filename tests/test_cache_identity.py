"""The embedding cache is keyed by the embedding function's whole identity (issue 22, item 4).

Two functions that agree on the short canary texts (so they share a behavioural fingerprint)
but not on long texts, e.g. different truncation settings, must never share a cache entry.
A function that cannot state its identity (no ``get_config()``) is never cached at all.
Real ``chroma run`` server, real Flux executions, real chromadb embedding functions.
"""

from __future__ import annotations

import hashlib
import logging
from typing import Any

import numpy as np
import pytest
from chromadb.api.types import DefaultEmbeddingFunction, Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function
from flux import ExecutionContext, workflow

from flux_chroma import FastDefaultEmbedding, embed_and_add, query
from flux_chroma.embedding import CANARY_TEXTS, compute_fingerprint
from flux_chroma.embedding.identity import cache_namespace

DIM = 16
# Identical for the first 100 characters; the rest differs between the two documents.
PREFIX = "Section 4.2 of the handbook explains how quarterly expenses are approved and archived. "
LONG_TEXT = PREFIX + "The approval needs two signatures from the finance team. " * 30
OTHER_LONG = PREFIX + "Archived reports are kept for seven years in cold storage. " * 30


def _truncated_vectors(texts: Documents, max_chars: int, dim: int) -> Embeddings:
    out = []
    for text in texts:
        raw = hashlib.sha256(text[:max_chars].encode()).digest()
        vec = np.frombuffer(raw[:dim], dtype=np.uint8).astype(np.float32) / 255.0 + 0.01
        out.append(vec / np.linalg.norm(vec))
    return out


@register_embedding_function
class TruncatingToyEmbedding(EmbeddingFunction[Documents]):
    """Hash of the first ``max_chars`` characters: equal on short texts, not on long ones."""

    def __init__(self, max_chars: int = 100, dim: int = DIM) -> None:
        self.max_chars = int(max_chars)
        self.dim = int(dim)
        self.embedded: list[str] = []

    def __call__(self, input: Documents) -> Embeddings:
        self.embedded.extend(input)
        return _truncated_vectors(input, self.max_chars, self.dim)

    @staticmethod
    def name() -> str:
        return "flux-chroma-test-truncating"

    def get_config(self) -> dict[str, Any]:
        return {"max_chars": self.max_chars, "dim": self.dim}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> TruncatingToyEmbedding:
        return TruncatingToyEmbedding(int(config["max_chars"]), int(config["dim"]))

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        return None

    def validate_config_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        return None


class NoConfigTruncatingEmbedding(EmbeddingFunction[Documents]):
    """Same behaviour, but a ``name()`` and no ``get_config()``: its settings are invisible."""

    def __init__(self, max_chars: int) -> None:
        self.max_chars = int(max_chars)
        self.embedded: list[str] = []

    def __call__(self, input: Documents) -> Embeddings:
        self.embedded.extend(input)
        return _truncated_vectors(input, self.max_chars, DIM)

    @staticmethod
    def name() -> str:
        return "flux-chroma-test-truncating-no-config"


SHORT_CUT = TruncatingToyEmbedding(max_chars=100)
LONG_CUT = TruncatingToyEmbedding(max_chars=5000)
NO_CONFIG_SHORT = NoConfigTruncatingEmbedding(max_chars=100)
NO_CONFIG_LONG = NoConfigTruncatingEmbedding(max_chars=5000)
EFS: dict[str, EmbeddingFunction[Documents]] = {
    "short": SHORT_CUT,
    "long": LONG_CUT,
    "no-config-short": NO_CONFIG_SHORT,
    "no-config-long": NO_CONFIG_LONG,
}


@workflow
async def write_with(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Upsert ``input.docs`` into ``input.collection`` with the named function and cache=True."""
    add = embed_and_add.with_options(
        tenant=ctx.input["tenant"], embedding_function=EFS[ctx.input["ef"]], cache=True
    )
    return await add(ctx.input["collection"], ctx.input["docs"])


@workflow
async def ask_with(ctx: ExecutionContext[dict[str, Any]]) -> Any:
    """Query ``input.collection`` with the named function and cache=True."""
    ask = query.with_options(
        tenant=ctx.input["tenant"], embedding_function=EFS[ctx.input["ef"]], cache=True
    )
    return await ask(ctx.input["collection"], ctx.input["question"], k=1)


def _write(tenant: str, ef: str, collection: str, text: str = LONG_TEXT) -> dict[str, Any]:
    run = write_with.run(
        {
            "tenant": tenant,
            "ef": ef,
            "collection": collection,
            "docs": [{"id": "doc", "text": text}],
        }
    )
    assert run.has_succeeded, run.output
    return dict(run.output)


def _stored(raw_client: Any, tenant: str, collection: str) -> np.ndarray:
    got = raw_client.get_collection(f"{tenant}__{collection}").get(
        ids=["doc"], include=["embeddings"]
    )
    return np.asarray(got["embeddings"][0], dtype=np.float32)


def _distance(a: np.ndarray, b: Any) -> float:
    return float(np.linalg.norm(np.asarray(a, np.float32) - np.asarray(b, np.float32)))


def test_the_two_functions_share_a_fingerprint_but_not_long_vectors() -> None:
    assert max(len(t) for t in CANARY_TEXTS) < 100 < len(LONG_TEXT)
    assert compute_fingerprint(SHORT_CUT).digest == compute_fingerprint(LONG_CUT).digest
    short_vec, long_vec = SHORT_CUT([LONG_TEXT])[0], LONG_CUT([LONG_TEXT])[0]
    assert _distance(short_vec, long_vec) > 0.1


def test_functions_equal_on_short_texts_never_share_cache_entries(
    tenant: str, raw_client: Any
) -> None:
    own_short = SHORT_CUT([LONG_TEXT])[0]
    own_long = LONG_CUT([LONG_TEXT])[0]

    first = _write(tenant, "short", "cut-at-100")
    assert (first["embedded"], first["cache_hits"]) == (1, 0)

    # Same text, same fingerprint, other max_chars: a cache miss, embedded with its own setting.
    second = _write(tenant, "long", "cut-at-5000")
    assert (second["embedded"], second["cache_hits"], second["cache_misses"]) == (1, 0, 1), second
    assert LONG_TEXT in LONG_CUT.embedded
    stored = _stored(raw_client, tenant, "cut-at-5000")
    assert _distance(stored, own_long) < 1e-6, (
        _distance(stored, own_long),
        _distance(stored, own_short),
    )
    assert _distance(_stored(raw_client, tenant, "cut-at-100"), own_short) < 1e-6

    # The cache still works for each identity: a third collection per function is all hits.
    for ef, own in (("long", own_long), ("short", own_short)):
        again = _write(tenant, ef, f"again-{ef}")
        assert (again["embedded"], again["cache_hits"]) == (0, 1), again
        assert _distance(_stored(raw_client, tenant, f"again-{ef}"), own) < 1e-6

    # The query path uses the same keys: each function's question vector is its own.
    for ef, collection in (("long", "cut-at-5000"), ("short", "cut-at-100")):
        hits = ask_with.run(
            {"tenant": tenant, "ef": ef, "collection": collection, "question": LONG_TEXT}
        )
        assert hits.has_succeeded, hits.output
        assert hits.output[0]["id"] == "doc" and hits.output[0]["distance"] < 1e-6, hits.output


def test_function_without_get_config_is_never_cached(
    tenant: str, raw_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="flux_chroma")
    first = _write(tenant, "no-config-short", "no-config-100")
    assert (first["embedded"], first["cache_hits"]) == (1, 0)
    second = _write(tenant, "no-config-long", "no-config-5000")
    assert (second["embedded"], second["cache_hits"]) == (1, 0), second
    assert (
        _distance(_stored(raw_client, tenant, "no-config-5000"), NO_CONFIG_LONG([LONG_TEXT])[0])
        < 1e-6
    )
    # Not even the same instance is served from the cache: its settings are unknown.
    third = _write(tenant, "no-config-long", "no-config-again", OTHER_LONG)
    fourth = _write(tenant, "no-config-long", "no-config-again-2", OTHER_LONG)
    assert (third["embedded"], fourth["embedded"], fourth["cache_hits"]) == (1, 1, 0)
    warned = [r.getMessage() for r in caplog.records if "get_config" in r.getMessage()]
    assert warned, caplog.text
    assert "NoConfigTruncatingEmbedding" in warned[0] and "not cached" in warned[0]


def test_cache_namespace_carries_name_config_and_fingerprint() -> None:
    digest = compute_fingerprint(SHORT_CUT).digest
    short_ns = cache_namespace(SHORT_CUT, digest)
    assert short_ns is not None
    assert short_ns == cache_namespace(TruncatingToyEmbedding(max_chars=100), digest)
    assert short_ns != cache_namespace(LONG_CUT, digest)  # config differs
    assert short_ns != cache_namespace(SHORT_CUT, "0" * 16)  # fingerprint differs
    # Chroma's default and flux-chroma's fast copy of it keep sharing their vectors.
    default_digest = compute_fingerprint(FastDefaultEmbedding()).digest
    assert cache_namespace(FastDefaultEmbedding(), default_digest) == cache_namespace(
        DefaultEmbeddingFunction(), default_digest
    )
    assert cache_namespace(NO_CONFIG_SHORT, digest) is None


class _LegacyNoName:
    def __call__(self, input: list[str]) -> list[np.ndarray]:
        return [np.ones(4, np.float32) for _ in input]


class _BrokenConfig(TruncatingToyEmbedding):
    def get_config(self) -> dict[str, Any]:
        raise RuntimeError("no config today")


class _ListConfig(TruncatingToyEmbedding):
    def get_config(self) -> Any:
        return ["not", "a", "dict"]


@pytest.mark.parametrize(
    "ef",
    [_LegacyNoName(), _BrokenConfig(), _ListConfig(), NO_CONFIG_LONG],
    ids=["no-name", "get-config-raises", "get-config-not-a-dict", "no-get-config"],
)
def test_incomplete_identity_is_not_cacheable(ef: Any) -> None:
    assert cache_namespace(ef, "0123456789abcdef") is None
