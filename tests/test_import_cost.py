"""``import flux_chroma`` loads nothing heavy: a Flux workflow module that only declares tasks
pays for Flux and flux-chroma, not for chromadb, the ONNX runtime, tokenizers, numpy or
diskcache. Each check runs in a fresh interpreter so this test process's imports do not count.
"""

from __future__ import annotations

import ast
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

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


def _type_checking_names(init: Path) -> set[str]:
    """Names an ``__init__`` imports inside ``if TYPE_CHECKING:`` (what type checkers see)."""
    names: set[str] = set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in ast.walk(node):
                if isinstance(stmt, ast.ImportFrom):
                    names.update(alias.asname or alias.name for alias in stmt.names)
    return names


LAZY_PACKAGES = sorted(
    ".".join(p.relative_to(ROOT).parent.parts)
    for p in (ROOT / "flux_chroma").rglob("__init__.py")
    if "lazy_exports(" in p.read_text()
)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_lazy_names_agree_with_all_and_type_checking_imports(package: str) -> None:
    """The mapping, ``__all__`` and the ``TYPE_CHECKING`` block name the same lazy names."""
    module = importlib.import_module(package)
    lazy = {name for names in module._LAZY.values() for name in names}
    assert lazy <= set(module.__all__), sorted(lazy - set(module.__all__))
    init = ROOT / package.replace(".", "/") / "__init__.py"
    assert _type_checking_names(init) == lazy
    assert lazy <= set(dir(module))
    for home, names in module._LAZY.items():
        source = importlib.import_module(f"{package}.{home}")
        for name in names:
            assert getattr(module, name) is getattr(source, name), f"{package}.{name}"


def test_the_lazy_loader_is_the_only_module_getattr() -> None:
    own = [
        str(p.relative_to(ROOT))
        for p in (ROOT / "flux_chroma").rglob("*.py")
        if "def __getattr__(" in p.read_text() and p.name != "_lazy.py"
    ]
    assert own == [], f"use flux_chroma._lazy.lazy_exports instead of a hand-written __getattr__: {own}"
    assert {"flux_chroma", "flux_chroma.embedding"} <= set(LAZY_PACKAGES)
