"""Where the default model's files are, and the error raised when they are missing (flux-chroma
never downloads a model)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from flux_chroma.errors import ModelNotAvailableError

__all__ = [
    "MAX_TOKENS",
    "MODEL_DIR_ENV",
    "MODEL_FILES",
    "MODEL_NAME",
    "REQUIRED_FILES",
    "chroma_default_model_dir",
    "missing_files",
    "model_not_available_error",
]

MODEL_DIR_ENV = "FLUX_CHROMA_MODEL_DIR"
"""Environment variable naming a folder that holds the six model files."""

MODEL_FILES = (
    "config.json",
    "model.onnx",
    "special_tokens_map.json",
    "tokenizer_config.json",
    "tokenizer.json",
    "vocab.txt",
)
"""The six files of Chroma's ``onnx`` model folder (Chroma downloads when any is missing)."""

MAX_TOKENS = 256
"""Token limit (special tokens included); longer texts are truncated, as Chroma does."""

REQUIRED_FILES = ("model.onnx", "tokenizer.json")  # the files FastDefaultEmbedding reads
MODEL_NAME = "all-MiniLM-L6-v2"


def chroma_default_model_dir() -> Path:
    """Return the folder where Chroma's default embedding function expects its model."""
    try:
        from chromadb.utils.embedding_functions.onnx_mini_lm_l6_v2 import ONNXMiniLM_L6_V2

        return Path(ONNXMiniLM_L6_V2.DOWNLOAD_PATH) / ONNXMiniLM_L6_V2.EXTRACTED_FOLDER_NAME
    except (ImportError, AttributeError):  # pragma: no cover - chromadb layout changed
        return Path.home() / ".cache" / "chroma" / "onnx_models" / MODEL_NAME / "onnx"


def missing_files(folder: Path, names: Sequence[str]) -> list[str]:
    """Return the names in ``names`` that are not files in ``folder``."""
    return [n for n in names if not (folder / n).is_file()]


def model_not_available_error(
    owner: str, looked: Sequence[tuple[Path, Sequence[str]]]
) -> ModelNotAvailableError:
    """Build the error naming every folder looked in and how to fix it.

    Args:
        owner: Which embedding function needed the files, e.g. ``"FastDefaultEmbedding"``.
        looked: Every folder looked in (at least one), each with the file names missing there.
    """
    where = "; ".join(f"{p} (missing: {', '.join(m)})" for p, m in looked)
    target = looked[-1][0]
    return ModelNotAvailableError(
        f"{owner} needs the {MODEL_NAME} ONNX model files, but they are not on this machine. "
        f"Looked in: {where}. Fix one of: (1) copy the six files ({', '.join(MODEL_FILES)}) "
        f"into {target}, e.g. `mkdir -p {target} && cp /path/to/onnx/* {target}/`; "
        f"(2) set {MODEL_DIR_ENV} to a folder holding them; (3) on a machine with internet, "
        "run chromadb's DefaultEmbeddingFunction once so Chroma downloads them, then copy that "
        "folder here. flux-chroma never downloads models, and this error is not retried."
    )
