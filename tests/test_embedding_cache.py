"""EmbeddingCache (diskcache, tamper-proof, multi-process) and CachingEmbedder."""

from __future__ import annotations

import json
import os
import pickle
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import diskcache
import numpy as np
import pytest
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

from flux_chroma.embedding import (
    CachingEmbedder,
    EmbeddingCache,
    FastDefaultEmbedding,
    compute_fingerprint,
    default_cache_dir,
)
from flux_chroma.embedding.identity import cache_namespace
from flux_chroma.errors import InvalidDocumentError

DIM = 384


def vector_for(i: int, dim: int = DIM) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(dim).astype(np.float32)


def db_rows(directory: Path) -> list[tuple[Any, ...]]:
    with sqlite3.connect(directory / "cache.db") as con:
        return con.execute("SELECT rowid, key, mode, filename, value FROM Cache").fetchall()


def update_row(directory: Path, key: str, **columns: Any) -> None:
    sets = ", ".join(f"{name} = ?" for name in columns)
    with sqlite3.connect(directory / "cache.db") as con:
        changed = con.execute(
            f"UPDATE Cache SET {sets} WHERE key = ?", (*columns.values(), key)
        ).rowcount
    assert changed == 1


def only_key(directory: Path) -> str:
    rows = db_rows(directory)
    assert len(rows) == 1
    return str(rows[0][1])


class CountingEmbedding(EmbeddingFunction[Documents]):
    """Wraps the real FastDefaultEmbedding and records every batch it is asked to embed."""

    def __init__(self) -> None:
        self.inner = FastDefaultEmbedding()
        self.batches: list[list[str]] = []

    def __call__(self, input: Documents) -> Embeddings:
        self.batches.append(list(input))
        return self.inner(input)

    @staticmethod
    def name() -> str:
        return "flux-chroma-test-counting"

    def get_config(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> CountingEmbedding:
        return CountingEmbedding()


class BrokenEmbedding(CountingEmbedding):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def __call__(self, input: Documents) -> Embeddings:
        good: Embeddings = [np.ones(DIM, dtype=np.float32) for _ in input]
        if self.mode == "dimension":
            good[-1] = np.ones(DIM - 1, dtype=np.float32)
        elif self.mode == "nan":
            good[-1] = np.full(DIM, np.nan, dtype=np.float32)
        elif self.mode == "count":
            good = good[:-1] + [good[0], good[0]]
        return good


def test_roundtrip_and_namespaces(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    texts = ["alpha", "beta", "Ünïcödé 🚀", ""]
    vectors = np.stack([vector_for(i) for i in range(len(texts))])
    assert cache.get_many("d1", texts, DIM) == [None] * 4
    cache.set_many("d1", texts, vectors)
    got = cache.get_many("d1", texts, DIM)
    assert all(g is not None and g.dtype == np.float32 for g in got)
    assert np.array_equal(np.stack([g for g in got if g is not None]), vectors)
    assert cache.get_many("d2", texts, DIM) == [None] * 4  # other model, other namespace
    assert cache.get_many("d1", texts, DIM - 1) == [None] * 4  # other dimension
    assert cache.stats.hits == 4 and cache.stats.rejected == 4
    assert all(mode == diskcache.core.MODE_RAW for _, _, mode, _, _ in db_rows(tmp_path))
    assert all(filename is None for _, _, _, filename, _ in db_rows(tmp_path))
    cache.close()
    assert cache.get_many("d1", ["alpha"], DIM)[0] is not None  # reopens after close


def test_flipped_byte_is_a_miss_then_recomputed(tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path)
    ef = CountingEmbedding()
    embedder = CachingEmbedder(ef, cache)
    good = embedder.embed(["the text"]).vectors
    key = only_key(tmp_path)
    value = bytearray(db_rows(tmp_path)[0][4])
    value[-3] ^= 0x01  # one bit in the payload
    update_row(tmp_path, key, value=bytes(value))
    assert cache.get_many(embedder_digest(embedder), ["the text"], DIM) == [None]
    again = embedder.embed(["the text"])
    assert (again.hits, again.misses) == (0, 1)
    assert np.array_equal(again.vectors, good)
    third = embedder.embed(["the text"])  # the bad entry was overwritten
    assert (third.hits, third.misses) == (1, 0)
    assert np.array_equal(third.vectors, good)


def embedder_digest(embedder: CachingEmbedder) -> str:
    """The cache namespace the embedder's entries live under (name, config, fingerprint)."""
    namespace = cache_namespace(embedder.ef, compute_fingerprint(embedder.ef).digest)
    assert namespace is not None
    return namespace


@pytest.mark.parametrize("damage", ["truncate", "header_dim", "magic", "empty", "moved"])
def test_damaged_entries_are_misses(tmp_path: Path, damage: str) -> None:
    cache = EmbeddingCache(tmp_path)
    cache.set_many("d", ["a"], [vector_for(1)])
    key = only_key(tmp_path)
    value = bytes(db_rows(tmp_path)[0][4])
    if damage == "truncate":
        update_row(tmp_path, key, value=value[:-10])
    elif damage == "header_dim":  # claims 383 dims with a matching length
        update_row(tmp_path, key, value=value[:4] + (383).to_bytes(4, "little") + value[8:-4])
    elif damage == "magic":
        update_row(tmp_path, key, value=b"XXXX" + value[4:])
    elif damage == "empty":
        update_row(tmp_path, key, value=b"")
    else:  # a valid entry of another text copied under this text's key
        cache.set_many("d", ["b"], [vector_for(2)])
        other = next(row for row in db_rows(tmp_path) if row[1] != key)
        update_row(tmp_path, key, value=bytes(other[4]))
    assert cache.get_many("d", ["a"], DIM) == [None]
    assert cache.stats.rejected == 1
    assert cache.get_many("d", ["a"], 383) == [None]
    cache.set_many("d", ["a"], [vector_for(1)])
    fixed = cache.get_many("d", ["a"], DIM)[0]
    assert fixed is not None and np.array_equal(fixed, vector_for(1))


class _Marker:
    """Unpickling this object creates a file (stands in for arbitrary code execution)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self) -> tuple[Any, ...]:
        return (open, (self.path, "w"))


def test_pickle_mode_row_is_never_unpickled(tmp_path: Path) -> None:
    cache_dir, marker = tmp_path / "cache", tmp_path / "pwned"
    cache = EmbeddingCache(cache_dir)
    cache.set_many("d", ["a"], [vector_for(1)])
    key = only_key(cache_dir)
    payload = pickle.dumps(_Marker(str(marker)))
    update_row(cache_dir, key, mode=diskcache.core.MODE_PICKLE, value=payload)
    assert cache.get_many("d", ["a"], DIM) == [None]
    assert not marker.exists()
    # Same for pickle/binary/text rows that point at files, inside or outside the folder.
    victim = tmp_path / "victim.txt"
    victim.write_bytes(payload)
    for mode in (diskcache.core.MODE_PICKLE, diskcache.core.MODE_BINARY, diskcache.core.MODE_TEXT):
        update_row(cache_dir, key, mode=mode, filename="../victim.txt", value=None)
        assert cache.get_many("d", ["a"], DIM) == [None]
    assert not marker.exists()
    cache.set_many("d", ["a"], [vector_for(1)])  # overwriting must not delete ../victim.txt
    assert victim.exists()
    assert cache.stats.rejected == 4
    # The guard matters: stock diskcache would have unpickled the tampered row.
    update_row(cache_dir, key, mode=diskcache.core.MODE_PICKLE, filename=None, value=payload)
    with diskcache.Cache(str(cache_dir)) as stock:
        stock.get(key)
    assert marker.exists()


def test_unusable_directory_degrades_to_misses(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    cache = EmbeddingCache(blocker / "cache")
    assert cache.get_many("d", ["a", "b"], DIM) == [None, None]
    cache.set_many("d", ["a"], [vector_for(1)])
    assert cache.stats.errors == 1 and cache.stats.misses == 2
    embedded = CachingEmbedder(CountingEmbedding(), cache).embed(["x"])
    assert embedded.misses == 1


def test_lru_size_limit_and_default_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = EmbeddingCache(tmp_path / "small", size_limit=200_000)
    for start in range(0, 400, 50):
        texts = [f"t{i}" for i in range(start, start + 50)]
        cache.set_many("d", texts, [vector_for(i) for i in range(start, start + 50)])
    assert len(db_rows(tmp_path / "small")) < 400
    monkeypatch.setenv("FLUX_CHROMA_CACHE_DIR", str(tmp_path / "env"))
    assert default_cache_dir() == tmp_path / "env"
    monkeypatch.delenv("FLUX_CHROMA_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "flux-chroma" / "embeddings"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert default_cache_dir() == Path.home() / ".cache" / "flux-chroma" / "embeddings"


_WORKER = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from flux_chroma.embedding import EmbeddingCache

    directory, first, last, rounds = sys.argv[1], *map(int, sys.argv[2:5])
    def vector_for(i):
        return np.random.default_rng(i).standard_normal(384).astype(np.float32)
    cache = EmbeddingCache(directory)
    wrong = 0
    for r in range(rounds):
        for start in range(first, last, 10):
            ids = list(range(start, min(start + 10, last)))
            texts = [f"text-{i}" for i in ids]
            got = cache.get_many("shared", texts, 384)
            wrong += sum(1 for i, g in zip(ids, got) if g is not None and not np.array_equal(g, vector_for(i)))
            todo = [i for i, g in zip(ids, got) if g is None]
            cache.set_many("shared", [f"text-{i}" for i in todo], [vector_for(i) for i in todo])
    s = cache.stats
    print(json.dumps({"wrong": wrong, "hits": s.hits, "misses": s.misses,
                      "rejected": s.rejected, "errors": s.errors}))
    """
)


def run_workers(
    directory: Path, ranges: list[tuple[int, int]], rounds: int
) -> list[dict[str, int]]:
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(directory), str(a), str(b), str(rounds)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for a, b in ranges
    ]
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def test_two_processes_share_without_corruption(tmp_path: Path) -> None:
    directory = tmp_path / "shared"
    concurrent = run_workers(directory, [(0, 300), (100, 400)], rounds=3)
    for stats in concurrent:
        assert stats["wrong"] == 0 and stats["rejected"] == 0 and stats["errors"] == 0
        # Each key is missed at most once per process; rounds 2 and 3 are all hits.
        assert stats["misses"] <= 300 and stats["hits"] + stats["misses"] == 900
    later = run_workers(directory, [(0, 400)], rounds=1)[0]  # a fresh process: all shared hits
    assert later == {"wrong": 0, "hits": 400, "misses": 0, "rejected": 0, "errors": 0}
    cache = EmbeddingCache(directory)
    got = cache.get_many("shared", [f"text-{i}" for i in range(400)], DIM)
    assert all(g is not None and np.array_equal(g, vector_for(i)) for i, g in enumerate(got))
    assert os.stat(directory).st_mode & 0o777 == 0o700


def test_embedder_hits_misses_and_duplicates(tmp_path: Path) -> None:
    ef = CountingEmbedding()
    embedder = CachingEmbedder(ef, EmbeddingCache(tmp_path))
    texts = ["one", "two", "one", "three", "two"]
    first = embedder.embed(texts)
    assert ef.batches[-1] == ["one", "two", "three"]  # each distinct text embedded once
    assert (first.hits, first.misses) == (0, 3)
    assert first.vectors.shape == (5, DIM) and first.vectors.dtype == np.float32
    assert np.array_equal(first.vectors[0], first.vectors[2])
    direct = FastDefaultEmbedding().embed(texts)
    assert float(np.abs(first.vectors - direct).max()) <= 1e-6
    calls = len(ef.batches)
    second = embedder.embed(texts)
    assert len(ef.batches) == calls  # the embedding function was not called at all
    assert (second.hits, second.misses, second.seconds) == (3, 0, 0.0)
    assert np.array_equal(second.vectors, first.vectors)
    mixed = embedder.embed(["three", "four"])
    assert (mixed.hits, mixed.misses) == (1, 1) and ef.batches[-1] == ["four"]
    empty = embedder.embed([])
    assert empty.vectors.shape == (0, DIM) and (empty.hits, empty.misses) == (0, 0)


def test_embedder_without_cache_and_explicit_namespace() -> None:
    ef = CountingEmbedding()
    embedder = CachingEmbedder(ef, None, digest="pinned-digest", dimension=DIM)
    result = embedder.embed(["a", "a", "b"])
    assert ef.batches == [["a", "b"]]  # no fingerprint run: digest and dimension were given
    assert (result.hits, result.misses) == (0, 2)
    with pytest.raises(InvalidDocumentError):
        CachingEmbedder(ef, None, digest="x", dimension=DIM + 1).embed(["a"])


def test_truncation_is_reported() -> None:
    long = "word " * 400
    fast = CachingEmbedder(FastDefaultEmbedding()).embed(["short", long, "short", long])
    assert fast.truncation_checked and fast.truncated == 2
    assert fast.truncated_indices == (1, 3)
    other = CachingEmbedder(CountingEmbedding()).embed([long])
    assert not other.truncation_checked and other.truncated == 0


@pytest.mark.parametrize("mode", ["dimension", "nan", "count"])
def test_embedder_rejects_bad_vectors(tmp_path: Path, mode: str) -> None:
    cache = EmbeddingCache(tmp_path)
    embedder = CachingEmbedder(BrokenEmbedding(mode), cache, digest="d", dimension=DIM)
    with pytest.raises(InvalidDocumentError) as info:
        embedder.embed(["first", "second"])
    if mode != "count":
        assert "document #1" in str(info.value)
    assert db_rows(tmp_path) == []  # nothing bad was cached


def test_embedder_rejects_non_text() -> None:
    embedder = CachingEmbedder(CountingEmbedding(), digest="d", dimension=DIM)
    with pytest.raises(InvalidDocumentError) as info:
        embedder.embed(["ok", 42])  # type: ignore[list-item]
    assert "#1" in str(info.value)
