"""A model's tokenizer and token limit, for sizing chunks in the model's own tokens.

The default model's comes from the ``tokenizer.json`` of its folder (``$FLUX_CHROMA_MODEL_DIR``
first, then Chroma's download folder; 256 tokens). Any other embedding function may declare a
``tokenizer()`` method (a :class:`tokenizers.Tokenizer`) and ``max_tokens`` (an int or a method
returning one, special tokens included); one that declares nothing gets ``None`` and the chunker
falls back to characters. The tokenizer is copied without truncation or padding, and
:attr:`ModelTokens.specials` is subtracted from the limit: a chunk of
:attr:`ModelTokens.capacity` tokens plus the special ones is exactly what the model reads.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from stat import S_ISREG
from typing import Any

from flux_chroma.embedding.model_files import (
    MAX_TOKENS,
    MODEL_DIR_ENV,
    MODEL_NAME,
    chroma_default_model_dir,
    model_not_available_error,
)
from flux_chroma.errors import ConfigurationError, ModelNotAvailableError

__all__ = ["ModelTokens", "tokens_for_spec", "default_model_tokens", "DEFAULT_NAMES"]

DEFAULT_NAMES = ("default", "flux-chroma-default")
"""Embedding-function names that mean the default model (all-MiniLM-L6-v2)."""
COUNT_SLICE = 512
"""Texts :meth:`ModelTokens.counts` encodes at once (memory, not speed, sets it)."""


@dataclass(frozen=True)
class ModelTokens:
    """A model's tokenizer and how many tokens it reads.

    Args:
        tokenizer: A :class:`tokenizers.Tokenizer` without truncation or padding.
        max_tokens: Tokens the model reads, special tokens included (256 for the default).
        specials: Special tokens the tokenizer adds to every text (2: ``[CLS]``, ``[SEP]``).
        model: A readable model name for messages.
        identity: ``"<model> tokenizer sha256:<16 hex>"``: changes when the tokenizer does.
    """

    tokenizer: Any
    max_tokens: int
    specials: int
    model: str
    identity: str

    @property
    def capacity(self) -> int:
        """Tokens of text a chunk may hold: ``max_tokens - specials``."""
        return self.max_tokens - self.specials

    def counts(self, texts: Sequence[str]) -> list[int]:
        """Token count of each text as the model sees it (special tokens included).

        Encodes :data:`COUNT_SLICE` texts at a time: an encoding holds its tokens, offsets and
        masks, so the 17,205 chunks of one 6.4 MB changelog encoded at once peaked at 650 MB.
        """
        out: list[int] = []
        for start in range(0, len(texts), COUNT_SLICE):
            part = list(texts[start : start + COUNT_SLICE])
            out += [len(e.ids) for e in self.tokenizer.encode_batch(part, add_special_tokens=True)]
        return out


def _prepared(tokenizer: Any, max_tokens: Any, model: str, digest: str) -> ModelTokens:
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 8:
        raise ConfigurationError(
            f"embedding function {model!r} declares max_tokens={max_tokens!r}; it must be an integer of at "
            "least 8 (tokens the model reads, special tokens included)."
        )
    tokenizer.no_truncation()
    tokenizer.no_padding()
    specials = len(tokenizer.encode("", add_special_tokens=True).ids)
    if max_tokens - specials < 8:
        raise ConfigurationError(f"embedding function {model!r} reads {max_tokens} tokens, {specials} of them special: too few to chunk.")
    return ModelTokens(tokenizer, max_tokens, specials, model, f"{model} tokenizer sha256:{digest}")


@cache
def _load_file(path: Path, mtime_ns: int, size: int) -> ModelTokens:
    """The default model's tokenizer file, loaded once per version (modification time, size)."""
    from tokenizers import Tokenizer

    data = path.read_bytes()
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:
        raise ModelNotAvailableError(
            f"the tokenizer file {path} could not be loaded ({type(exc).__name__}: {exc}). Replace the "
            "model folder with an intact copy."
        ) from exc
    return _prepared(tokenizer, MAX_TOKENS, MODEL_NAME, hashlib.sha256(data).hexdigest()[:16])


def default_model_tokens() -> ModelTokens:
    """The default model's tokenizer (all-MiniLM-L6-v2, 256 tokens).

    Raises:
        ModelNotAvailableError: No folder holds ``tokenizer.json`` (the message names each).
    """
    folders = [Path(os.environ[MODEL_DIR_ENV])] if os.environ.get(MODEL_DIR_ENV) else []
    folders.append(chroma_default_model_dir())
    for folder in folders:
        path = folder / "tokenizer.json"
        # Asked once per document while planning: one stat() per call, no resolve() (an lstat per
        # path component), so a 20,000-record plan does not spend a third of its time here.
        try:
            stat = path.stat()
        except OSError:
            continue
        if S_ISREG(stat.st_mode):
            return _load_file(path, stat.st_mtime_ns, stat.st_size)
    looked = [(folder, ["tokenizer.json"]) for folder in folders]
    raise model_not_available_error("chunking (token counts)", looked)


def _name(embedding_function: Any) -> str:
    name = getattr(embedding_function, "name", None)
    try:
        value = name() if callable(name) else name
    except Exception:  # noqa: BLE001 - a legacy function without a name
        value = None
    return value if isinstance(value, str) else type(embedding_function).__name__


def tokens_for_spec(spec: dict[str, Any] | None) -> ModelTokens | None:
    """The tokens of the model a job's ``embedding_function`` spec names.

    The default model's are read from its ``tokenizer.json`` (nothing is built); another
    function is built from chromadb's registry and asked what it declares (``tokenizer()``,
    ``max_tokens``); Chroma's default model and flux-chroma's fast build of it are recognised
    by name. ``None``: the function declares no tokenizer.

    Raises:
        ModelNotAvailableError: The default model's tokenizer file is missing.
        ConfigurationError: The function is not registered, or declares a bad limit.
    """
    if spec is None or (spec.get("name") in DEFAULT_NAMES and not spec.get("config")):
        return default_model_tokens()
    from flux_chroma.ingest.spec import embedding_from_spec

    ef = embedding_from_spec(spec)
    make = getattr(ef, "tokenizer", None)
    if callable(make):
        limit = getattr(ef, "max_tokens", None)
        limit = limit() if callable(limit) else limit
        tokenizer = make()
        digest = hashlib.sha256(tokenizer.to_str().encode("utf-8")).hexdigest()[:16]
        return _prepared(tokenizer, limit, _name(ef), digest)
    if _name(ef) in DEFAULT_NAMES + ("onnx_mini_lm_l6_v2",):
        return default_model_tokens()
    return None
