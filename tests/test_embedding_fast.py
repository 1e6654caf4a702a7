"""FastDefaultEmbedding against Chroma's real DefaultEmbeddingFunction (real model, no mocks)."""

from __future__ import annotations

import pickle
import shutil
import threading
import uuid
from pathlib import Path
from typing import Any, cast

import chromadb
import httpx
import numpy as np
import pytest
from chromadb.api.types import DefaultEmbeddingFunction
from chromadb.utils.embedding_functions import known_embedding_functions
from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

from flux_chroma.embedding import (
    MAX_TOKENS,
    MODEL_DIR_ENV,
    CachingEmbedder,
    FastDefaultEmbedding,
    chroma_default_model_dir,
    ensure_model_available,
)
from flux_chroma.embedding.fast_default import REGISTRY_NAME
from flux_chroma.errors import ConfigurationError, ModelNotAvailableError

LONG_A = "The quick brown fox jumps over the lazy dog. " * 60  # ~600 tokens
LONG_B = " ".join(f"token{i}" for i in range(400))  # > 256 tokens, different content
TEXTS = [
    "hello",
    "Ünïcödé façade — naïve café, 東京の天気は晴れです, Ελληνικά, русский 🚀🔥",
    LONG_A,
    "",
    "def f(x):\n    return x ** 2  # code, with\ttabs and newlines\n",
    "Quarterly revenue grew 12.5% to $3.4bn in FY2024 (vs. $3.0bn).",
    LONG_B,
    "   leading and trailing spaces   ",
    "A medium sentence about vector databases, embeddings and retrieval augmented generation.",
    "word",
]


@pytest.fixture(scope="module")
def fast() -> FastDefaultEmbedding:
    return FastDefaultEmbedding()


@pytest.fixture(scope="module")
def reference() -> np.ndarray:
    """Chroma's own default vectors for TEXTS (slow: computed once)."""
    return np.asarray(DefaultEmbeddingFunction()(list(TEXTS)), dtype=np.float32)


def test_matches_chroma_default(fast: FastDefaultEmbedding, reference: np.ndarray) -> None:
    out = fast(list(TEXTS))
    assert isinstance(out, list) and len(out) == len(TEXTS)
    assert all(isinstance(v, np.ndarray) and v.dtype == np.float32 for v in out)
    assert all(v.shape == (384,) for v in out)
    assert float(np.abs(np.asarray(out) - reference).max()) <= 1e-5


def test_order_batches_and_duplicates(fast: FastDefaultEmbedding, reference: np.ndarray) -> None:
    order = [6, 0, 3, 9, 2, 2, 5, 1, 8, 4, 7, 0]
    small_batches = FastDefaultEmbedding(batch_size=3).embed([TEXTS[i] for i in order])
    assert small_batches.shape == (len(order), 384)
    assert float(np.abs(small_batches - reference[order]).max()) <= 1e-5
    one_by_one = np.stack([fast.embed([TEXTS[i]])[0] for i in order])
    assert float(np.abs(one_by_one - reference[order]).max()) <= 1e-5
    assert np.array_equal(small_batches[4], small_batches[5])  # duplicate texts, same vector
    norms = np.linalg.norm(small_batches, axis=1)
    assert np.allclose(norms, 1.0, atol=1e-5)


def test_empty_input(fast: FastDefaultEmbedding) -> None:
    empty = fast.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert fast.token_counts([]) == []
    # Chroma's EmbeddingFunction wrapper rejects an empty result for both implementations.
    with pytest.raises(ValueError):
        fast([])
    with pytest.raises(ValueError):
        DefaultEmbeddingFunction()([])


def test_token_counts_and_truncation(fast: FastDefaultEmbedding) -> None:
    counts = fast.token_counts(TEXTS)
    assert counts[0] == 3  # [CLS] hello [SEP]
    assert counts[3] == 2  # empty text: [CLS] [SEP]
    assert counts[2] > MAX_TOKENS and counts[6] > MAX_TOKENS
    assert all(c <= MAX_TOKENS for i, c in enumerate(counts) if i not in (2, 6))
    assert fast.count_truncated(TEXTS) == 2
    assert fast.max_tokens() == MAX_TOKENS == DefaultEmbeddingFunction().max_tokens()
    # Text past the limit does not change the vector: truncation works as in Chroma.
    extended = fast.embed([LONG_A, LONG_A + " completely different tail " * 50])
    assert float(np.abs(extended[0] - extended[1]).max()) == 0.0


def test_thread_safe_shared_model(fast: FastDefaultEmbedding) -> None:
    expected = fast.embed(TEXTS[:5])
    results: list[np.ndarray] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(FastDefaultEmbedding().embed(TEXTS[:5]))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 4
    assert all(float(np.abs(r - expected).max()) <= 1e-6 for r in results)


def test_protocol_matches_chroma_default(fast: FastDefaultEmbedding) -> None:
    chroma = DefaultEmbeddingFunction()
    assert fast.name() == chroma.name() == "default"
    assert fast.get_config() == chroma.get_config() == {}
    assert fast.default_space() == chroma.default_space()
    assert fast.supported_spaces() == chroma.supported_spaces()
    assert fast.is_legacy() is False
    assert isinstance(FastDefaultEmbedding.build_from_config({}), FastDefaultEmbedding)
    FastDefaultEmbedding.validate_config({})
    # The class-level name keeps Chroma's registry entry "default" untouched.
    assert FastDefaultEmbedding.name() == REGISTRY_NAME != "default"
    clone = pickle.loads(pickle.dumps(fast))
    assert clone.name() == "default" and clone.batch_size == fast.batch_size
    assert clone.candidate_dirs == fast.candidate_dirs
    with pytest.raises(ConfigurationError):
        FastDefaultEmbedding(batch_size=0)


def test_chroma_persists_same_identity_both_ways(fast: FastDefaultEmbedding) -> None:
    # chromadb's annotations expect EmbeddingFunction[Embeddable]; its own default fails them too.
    ef, chroma_default = cast(Any, fast), cast(Any, DefaultEmbeddingFunction)
    client = chromadb.EphemeralClient()
    suffix = uuid.uuid4().hex[:8]
    created_fast = client.create_collection(f"fast-{suffix}", embedding_function=ef)
    assert created_fast.configuration_json["embedding_function"] == {
        "type": "known",
        "name": "default",
        "config": {},
    }
    assert known_embedding_functions["default"] is DefaultEmbeddingFunction
    client.get_collection(f"fast-{suffix}", embedding_function=chroma_default())
    created_chroma = client.create_collection(
        f"chroma-{suffix}", embedding_function=chroma_default()
    )
    persisted = created_chroma.configuration_json["embedding_function"]
    assert persisted == created_fast.configuration_json["embedding_function"]
    got = client.get_collection(f"chroma-{suffix}", embedding_function=ef)
    got.add(ids=["a", "b"], documents=["hello world", "completely unrelated text"])
    hits = got.query(query_texts=["hello world"], n_results=1)
    assert hits["ids"] == [["a"]]
    assert known_embedding_functions["default"] is DefaultEmbeddingFunction
    client.delete_collection(f"fast-{suffix}")
    client.delete_collection(f"chroma-{suffix}")


def test_missing_model_dir_names_path(tmp_path: Path) -> None:
    missing = tmp_path / "no-model-here"
    ef = FastDefaultEmbedding(model_dir=missing)
    with pytest.raises(ModelNotAvailableError) as info:
        ef(["hello"])
    message = str(info.value)
    assert str(missing) in message and MODEL_DIR_ENV in message and "model.onnx" in message
    assert not isinstance(info.value, httpx.ConnectError)
    assert not missing.exists()  # nothing created, nothing downloaded
    with pytest.raises(ModelNotAvailableError):
        ensure_model_available(ef)
    with pytest.raises(ModelNotAvailableError):
        CachingEmbedder(ef).embed(["hello"])


def test_missing_in_chroma_cache_names_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chroma_dir = tmp_path / "chroma-cache"
    monkeypatch.delenv(MODEL_DIR_ENV, raising=False)
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "DOWNLOAD_PATH", chroma_dir)
    ef = FastDefaultEmbedding()
    with pytest.raises(ModelNotAvailableError) as info:
        ef.embed(["x"])
    assert str(chroma_dir / "onnx") in str(info.value) and MODEL_DIR_ENV in str(info.value)


def test_env_dir_is_used_and_authoritative(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fast: FastDefaultEmbedding
) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(chroma_default_model_dir(), copy)
    monkeypatch.setenv(MODEL_DIR_ENV, str(copy))
    ef = FastDefaultEmbedding()
    assert ef.model_dir == copy.resolve()
    assert float(np.abs(ef.embed(["hello"]) - fast.embed(["hello"])).max()) <= 1e-6
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(MODEL_DIR_ENV, str(empty))  # a wrong setting is an error, not a fallback
    with pytest.raises(ModelNotAvailableError) as info:
        FastDefaultEmbedding().embed(["hello"])
    assert str(empty) in str(info.value)


def test_corrupt_model_file(tmp_path: Path) -> None:
    folder = tmp_path / "corrupt"
    shutil.copytree(chroma_default_model_dir(), folder)
    (folder / "model.onnx").write_bytes(b"this is not an onnx model")
    with pytest.raises(ModelNotAvailableError) as info:
        FastDefaultEmbedding(model_dir=folder).embed(["hello"])
    assert str(folder / "model.onnx") in str(info.value)


def test_ensure_model_available_for_chroma_default(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "empty-download-path"
    empty.mkdir()
    onnx = ONNXMiniLM_L6_V2()
    onnx.DOWNLOAD_PATH = empty
    with pytest.raises(ModelNotAvailableError) as info:
        ensure_model_available(onnx)
    assert str(empty / "onnx") in str(info.value)
    assert list(empty.iterdir()) == []  # no download was started

    class OfflineONNX(ONNXMiniLM_L6_V2):
        DOWNLOAD_PATH = empty

    with pytest.raises(ModelNotAvailableError):
        ensure_model_available(OfflineONNX())

    ensure_model_available(DefaultEmbeddingFunction())  # files present: no error
    ensure_model_available(ONNXMiniLM_L6_V2())
    monkeypatch.setattr(ONNXMiniLM_L6_V2, "DOWNLOAD_PATH", empty)
    with pytest.raises(ModelNotAvailableError):
        ensure_model_available(DefaultEmbeddingFunction())
    # The embedder checks first, so Chroma's downloader (httpx.ConnectError offline) never runs.
    with pytest.raises(ModelNotAvailableError):
        CachingEmbedder(DefaultEmbeddingFunction(), digest="x", dimension=384).embed(["hello"])
    assert list(empty.iterdir()) == []


def test_ensure_model_available_ignores_other_functions() -> None:
    class Other:
        def __call__(self, input: list[str]) -> list[np.ndarray]:
            return [np.ones(3, dtype=np.float32) for _ in input]

    ensure_model_available(Other())
    ensure_model_available(FastDefaultEmbedding())
