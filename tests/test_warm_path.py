"""The warm write path: a cache hit carries its text's token count, so a warm run reports
truncation without a tokenizer pass; entries without a count are read and upgraded;
the stored count is covered by the entry's check sum."""

from __future__ import annotations

import sqlite3
import struct
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from flux_chroma.embedding import CachingEmbedder, EmbeddingCache, FastDefaultEmbedding
from flux_chroma.embedding.cache import _key, decode_full

LONG = " ".join(f"word{i}" for i in range(400))  # well over 256 tokens
TEXTS = ["a short text", LONG, "another short text", "a short text"]


class CountingTokens(FastDefaultEmbedding):
    """The real model; records every batch of texts whose tokens are counted."""

    def __init__(self) -> None:
        super().__init__()
        self.counted: list[list[str]] = []

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        self.counted.append(list(texts))
        return super().token_counts(texts)


def _raw_values(directory: Path) -> dict[str, bytes]:
    with sqlite3.connect(directory / "cache.db") as con:
        return {str(k): bytes(v) for k, v in con.execute("SELECT key, value FROM Cache")}


def test_warm_run_counts_no_tokens_and_reports_the_same_truncation(tmp_path: Path) -> None:
    ef = CountingTokens()
    with EmbeddingCache(tmp_path / "cache") as cache:
        cold = CachingEmbedder(ef, cache=cache).embed(TEXTS)
        assert (cold.misses, cold.truncated, cold.truncated_indices) == (3, 1, (1,))
        assert ef.counted == [["a short text", LONG, "another short text"]]

        ef.counted.clear()
        warm = CachingEmbedder(ef, cache=cache).embed(TEXTS)
        assert (warm.hits, warm.misses) == (3, 0)
        assert ef.counted == []  # every count came from the cache
        assert (warm.truncated, warm.truncated_indices, warm.truncation_checked) == (1, (1,), True)
        assert np.array_equal(warm.vectors, cold.vectors)

        # A new text among hits: only it is tokenized.
        mixed = CachingEmbedder(ef, cache=cache).embed([*TEXTS, "brand new"])
        assert ef.counted == [["brand new"]] and mixed.misses == 1 and mixed.truncated == 1


def test_entries_without_a_count_are_read_then_upgraded(tmp_path: Path) -> None:
    ef = CountingTokens()
    directory = tmp_path / "cache"
    with EmbeddingCache(directory) as cache:
        digest = CachingEmbedder(ef, cache=cache)._namespace()[0]
        reference = ef.embed([LONG])[0]
        cache.set_many(digest, [LONG], [reference])  # no count: written by a caller without a tokenizer
        assert cache.lookup(digest, [LONG], 384)[0] is not None
        assert cache.lookup(digest, [LONG], 384)[0][1] is None  # type: ignore[index]

        first = CachingEmbedder(ef, cache=cache).embed([LONG])
        assert first.hits == 1 and first.truncated == 1 and ef.counted == [[LONG]]
        entry = cache.lookup(digest, [LONG], 384)[0]
        assert entry is not None and entry[1] is not None and entry[1] > 256
        assert np.array_equal(entry[0], reference)

        ef.counted.clear()
        again = CachingEmbedder(ef, cache=cache).embed([LONG])
        assert again.truncated == 1 and ef.counted == []


def test_a_tampered_token_count_is_a_miss(tmp_path: Path) -> None:
    directory = tmp_path / "cache"
    vector = np.ones(384, dtype=np.float32) / np.sqrt(384)
    with EmbeddingCache(directory) as cache:
        cache.set_many("d", ["text"], [vector], [300])
        key = _key("d", "text")
        value = _raw_values(directory)[key]
        assert decode_full(key, value, 384) is not None
        forged = value[:8] + struct.pack("<I", 12) + value[12:]  # claim 12 tokens
        assert decode_full(key, forged, 384) is None
        with sqlite3.connect(directory / "cache.db") as con:
            con.execute("UPDATE Cache SET value = ? WHERE key = ?", (forged, key))
        assert cache.lookup("d", ["text"], 384) == [None]
        assert cache.stats.rejected == 1
