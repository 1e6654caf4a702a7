"""``import flux_chroma`` loads nothing heavy: a Flux workflow module that only declares tasks
pays for Flux and flux-chroma, not for chromadb, the ONNX runtime, tokenizers, numpy or
diskcache. Each check runs in a fresh interpreter so this test process's imports do not count.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("chromadb", "onnxruntime", "tokenizers", "numpy", "diskcache")


def _loaded_after(code: str) -> list[str]:
    probe = f"import sys, json\n{code}\nprint(json.dumps(sorted(m for m in {list(HEAVY)!r} if m in sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    loaded: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize(
    "code",
    [
        "import flux_chroma",
        "from flux_chroma import embed_and_add, query, list_collections, ChromaTask",
        "import flux_chroma.ingest, flux_chroma.embedding, flux_chroma.embedding.identity",
        "from flux_chroma.ingest import ingest_steps, ingest_job",
    ],
    ids=["package", "tasks", "subpackages", "ingestion-workflows"],
)
def test_importing_loads_no_heavy_dependency(code: str) -> None:
    assert _loaded_after(code) == []


def test_heavy_names_still_resolve_on_first_use() -> None:
    loaded = _loaded_after(
        "import flux_chroma\n"
        "assert flux_chroma.FastDefaultEmbedding.__name__ == 'FastDefaultEmbedding'\n"
        "assert flux_chroma.EmbeddingCache.__name__ == 'EmbeddingCache'\n"
        "from flux_chroma.embedding import CachingEmbedder, compute_fingerprint\n"
        "assert 'FastDefaultEmbedding' in dir(flux_chroma.embedding)"
    )
    assert "chromadb" in loaded and "diskcache" in loaded


def test_unknown_attribute_is_still_an_attribute_error() -> None:
    import flux_chroma
    import flux_chroma.embedding

    with pytest.raises(AttributeError, match="no_such_name"):
        _ = flux_chroma.no_such_name  # type: ignore[attr-defined]
    with pytest.raises(AttributeError, match="no_such_name"):
        _ = flux_chroma.embedding.no_such_name
