"""A fast, drop-in replacement for Chroma's default embedding function.

Chroma's ``DefaultEmbeddingFunction`` builds a new ONNX session on every call and pads every
text to 256 tokens. :class:`FastDefaultEmbedding` runs the same model, tokenizer and pooling but
loads the session once per process and pads each length-sorted batch to its longest text:
vectors equal Chroma's within ~1e-7, and ``name()`` is ``"default"``. It never downloads.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings

from flux_chroma.embedding.model_files import (
    MAX_TOKENS,
    MODEL_DIR_ENV,
    MODEL_FILES,
    REQUIRED_FILES,
    chroma_default_model_dir,
    missing_files,
    model_not_available_error,
)
from flux_chroma.embedding.onnx_session import (
    load_session,
    load_tokenizers,
    pool,
    run_sizes,
    validate_threads,
)
from flux_chroma.errors import ConfigurationError, ModelNotAvailableError

__all__ = [
    "MAX_TOKENS",
    "MODEL_DIR_ENV",
    "MODEL_FILES",
    "REGISTRY_NAME",
    "FastDefaultEmbedding",
    "chroma_default_model_dir",
    "ensure_model_available",
    "local_model_dir",
]


def local_model_dir(ef: Any) -> Path | None:
    """Return the model folder of a local all-MiniLM-L6-v2 embedding function, else None."""
    if isinstance(ef, FastDefaultEmbedding):
        try:
            return ef.ensure_available()
        except ModelNotAvailableError:
            return ef.candidate_dirs[0]
    try:
        from chromadb.api.types import DefaultEmbeddingFunction
        from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2
    except (ImportError, AttributeError):  # pragma: no cover - chromadb layout changed
        return None
    if isinstance(ef, ONNXMiniLM_L6_V2):
        return Path(ef.DOWNLOAD_PATH) / ef.EXTRACTED_FOLDER_NAME
    if isinstance(ef, DefaultEmbeddingFunction):
        return chroma_default_model_dir()
    return None


def ensure_model_available(ef: Any) -> None:
    """Fail fast when a local ONNX model's files are missing (other functions pass unchecked).

    Chroma's default downloads missing files on first use; offline that is an
    ``httpx.ConnectError``, which looks transient and is retried forever.
    """
    if isinstance(ef, FastDefaultEmbedding):
        ef.ensure_available()
    elif (folder := local_model_dir(ef)) is not None:
        missing = missing_files(folder, MODEL_FILES)  # Chroma downloads when ANY of six is missing
        if missing:
            raise model_not_available_error(type(ef).__name__, [(folder, missing)])


REGISTRY_NAME = "flux_chroma_fast_default"
"""The name under which Chroma's registry files this class (never ``"default"``)."""


class _Name:
    """``name()``: ``"default"`` on instances, :data:`REGISTRY_NAME` on the class.

    Chroma persists the instances' name; the class's keeps ``create_collection`` (which registers
    ``type(ef)``) from replacing ``DefaultEmbeddingFunction`` in Chroma's process-wide registry.
    """

    def __get__(self, obj: object, owner: type | None = None) -> Callable[[], str]:
        value = "default" if obj is not None else REGISTRY_NAME
        return lambda: value


class FastDefaultEmbedding(EmbeddingFunction[Documents]):
    """Chroma's default embedding (all-MiniLM-L6-v2, 384 dims), loaded once and batched.

    Args:
        model_dir: Folder holding the model files. Default: ``$FLUX_CHROMA_MODEL_DIR`` if set,
            else Chroma's model cache.
        batch_size: Most texts per ONNX run; runs of long texts hold fewer (4 texts of 256
            tokens, 16 of 128), so peak memory does not follow ``batch_size``.
        threads: Intra-op threads of the ONNX session (not changing the vectors). Default:
            ``$FLUX_CHROMA_EMBED_THREADS`` if set, else every core this process may run on.

    Raises:
        ConfigurationError: ``batch_size`` or ``threads`` (1 to 1024) is invalid.

    The model loads on the first call; an unpickled copy looks it up again in its own process.
    ``default_space()`` and ``supported_spaces()`` are inherited, as by Chroma's default.
    """

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        batch_size: int = 32,
        threads: int | None = None,
    ):
        if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
            raise ConfigurationError(f"batch_size must be a positive integer, got {batch_size!r}.")
        self.batch_size = batch_size
        self.threads = None if threads is None else validate_threads(threads, "threads=")
        self._explicit = None if model_dir is None else str(model_dir)
        if model_dir is not None:
            self._folder = Path(model_dir).expanduser()
        else:
            # An explicit setting is authoritative: a wrong FLUX_CHROMA_MODEL_DIR is an error,
            # never a silent fallback to whatever happens to sit in Chroma's cache.
            env = os.environ.get(MODEL_DIR_ENV, "").strip()
            self._folder = Path(env).expanduser() if env else chroma_default_model_dir()
        self._resolved: Path | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # Re-resolve on unpickling: another worker has its own env and model cache.
        return (FastDefaultEmbedding, (self._explicit, self.batch_size, self.threads))

    def __repr__(self) -> str:
        where = self._resolved or self._folder
        return (
            f"FastDefaultEmbedding(model_dir={str(where)!r}, batch_size={self.batch_size}, "
            f"threads={self.threads})"
        )

    @property
    def candidate_dirs(self) -> tuple[Path, ...]:
        """Folders searched for the model files, in order (one: see ``model_dir=``)."""
        return (self._folder,)

    def ensure_available(self) -> Path:
        """Check that the model files exist, without loading them; return the folder to use.

        Raises:
            ModelNotAvailableError: ``model.onnx`` or ``tokenizer.json`` is missing.
        """
        if self._resolved is not None and not missing_files(self._resolved, REQUIRED_FILES):
            return self._resolved
        missing = missing_files(self._folder, REQUIRED_FILES)
        if missing:
            raise model_not_available_error("FastDefaultEmbedding", [(self._folder, missing)])
        self._resolved = self._folder.resolve()
        return self._resolved

    @property
    def model_dir(self) -> Path:
        """The model folder in use (see :meth:`ensure_available`)."""
        return self.ensure_available()

    def __call__(self, input: Documents) -> Embeddings:
        """Embed documents like Chroma's default: one float32 array (384 values) per text."""
        return cast(Embeddings, list(self.embed(input)))

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed texts into L2-normalised float32 rows, shape ``(len(texts), 384)``, input order.

        Raises:
            ConfigurationError: ``$FLUX_CHROMA_EMBED_THREADS`` is not a valid count.
            ModelNotAvailableError: The model files are missing or unreadable.
            TypeError: An item is not a string.
        """
        folder = self.ensure_available()
        tokenizers = load_tokenizers(folder)
        session = load_session(folder, self.threads)
        items = list(texts)
        for i, text in enumerate(items):
            if not isinstance(text, str):
                raise TypeError(f"text #{i} is a {type(text).__name__}, not a str")
        encodings = tokenizers.truncating.encode_batch(items, add_special_tokens=True)
        lengths = np.array([len(e.ids) for e in encodings], dtype=np.int64)
        order = np.argsort(-lengths, kind="stable")
        dim = int(session.get_outputs()[0].shape[-1])
        out = np.empty((len(items), dim), dtype=np.float32)
        start = 0
        for count in run_sizes(lengths[order].tolist(), self.batch_size):
            rows = order[start : start + count]
            start += count
            width = int(lengths[rows].max())
            ids = np.zeros((len(rows), width), dtype=np.int64)
            for r, idx in enumerate(rows):
                ids[r, : lengths[idx]] = encodings[idx].ids
            # Unpadded encodings attend to every token: the mask is 1 up to each text's length.
            mask = (np.arange(width) < lengths[rows][:, np.newaxis]).astype(np.int64)
            hidden = session.run(
                None,
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )[0]
            out[rows] = pool(hidden, mask)
        return out

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Count each text's tokens before truncation (special tokens included; tokenizer only)."""
        items = list(texts)
        if not items:
            return []
        tokenizers = load_tokenizers(self.ensure_available())
        return [len(e.ids) for e in tokenizers.counting.encode_batch(items)]

    def count_truncated(self, texts: Sequence[str]) -> int:
        """Count the texts truncated to :data:`MAX_TOKENS` tokens when embedded."""
        return sum(n > MAX_TOKENS for n in self.token_counts(texts))

    name = _Name()

    def get_config(self) -> dict[str, Any]:
        """Return ``{}`` (like Chroma's default; the model folder is a local detail)."""
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> FastDefaultEmbedding:
        """Build a default instance from a persisted config (always ``{}``, ignored)."""
        return FastDefaultEmbedding()

    def is_legacy(self) -> bool:
        """Return False: this class implements the full config protocol."""
        return False

    def max_tokens(self) -> int:
        """Return the token limit (256, special tokens included)."""
        return MAX_TOKENS
