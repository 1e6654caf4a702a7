"""Shared fixtures: a real `chroma run` server on a free loopback port, Flux state in a temp dir.

Nothing here mocks chromadb, Flux or the server. If the server cannot start or Chroma's
default model is missing, the session fails loudly; it never skips.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Flux and flux-chroma read these lazily; set them before anything imports flux.
_STATE = Path(tempfile.mkdtemp(prefix="flux-chroma-tests-"))
os.environ["FLUX_HOME"] = str(_STATE / "flux-home")
os.environ["FLUX_DATABASE_URL"] = f"sqlite:///{_STATE / 'flux-home' / 'flux.db'}"
os.environ["FLUX_CHROMA_CACHE_DIR"] = str(_STATE / "embedding-cache")
(_STATE / "flux-home").mkdir(parents=True, exist_ok=True)
# Under pytest-xdist N worker processes embed at once on C cores: as docs/deployment.md
# ("Embedding threads") tells users who run N embedding processes, each gets C // N ONNX
# threads (the vectors are the same; oversubscribed threads only burn CPU). Tests of the
# thread setting itself set or clear the variable with monkeypatch.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    from flux_chroma.embedding.onnx_session import EMBED_THREADS_ENV, threads_per_process

    os.environ.setdefault(EMBED_THREADS_ENV, str(threads_per_process(_WORKERS)))

import pytest

from flux_chroma import ChromaServer
from flux_chroma.embedding import chroma_default_model_dir

STATE_DIR = _STATE


def pytest_sessionstart(session: pytest.Session) -> None:
    model = chroma_default_model_dir() / "model.onnx"
    if not model.exists():
        raise pytest.UsageError(
            f"Chroma's default model is missing ({model}). Run the README test command, which "
            "copies it from ../shared/models, or let Chroma download it once."
        )


# Every module of 12 s or more, longest first (the seconds its tests took in one full run of
# scripts/test.sh). scripts/test.sh runs `-n 3 --dist loadscope --no-loadscope-reorder`: each
# module is one unit of work (its module fixtures, e.g. a Flux fleet, start once) handed out in
# this order, so the long units start at once and the short modules fill the gaps at the end.
# A long module left to the end runs alone: test_telemetry, mostly waiting on exporter
# timeouts, was last and left the cores idle for its last 20 s.
LONGEST_MODULES = (
    "test_bench_smoke",  # 205
    "test_ingest_cluster",  # 133
    "test_ingest_cluster_restarts",  # 112
    "test_quality_docs",  # 105
    "test_docs_cluster",  # 65
    "test_ingest_memory",  # 50
    "test_reliability_faults",  # 37
    "test_watch_cluster",  # 28
    "test_chunking_tokens",  # 26
    "test_distributed",  # 25
    "test_cli_interrupts",  # 24
    "test_telemetry",  # 23
    "test_deployment_fleet",  # 22
    "test_scheduled_sync",  # 20
    "test_ingest_crash",  # 18
    "test_readme_snippet",  # 17
    "test_reliability_load",  # 17
    "test_erasure",  # 14
    "test_embed_memory",  # 13
    "test_query_hybrid",  # 13
    "test_examples",  # 12
    "test_ingest_formats",  # 12
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests that use the session's Chroma server `server`; hand out the longest modules
    first."""
    for item in items:
        if "chroma_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.server)

    def rank(item: pytest.Item) -> int:
        stem = item.path.stem
        return LONGEST_MODULES.index(stem) if stem in LONGEST_MODULES else len(LONGEST_MODULES)

    items.sort(key=rank)  # stable: each module's tests keep their order


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    shutil.rmtree(_STATE, ignore_errors=True)


@pytest.fixture(scope="session")
def chroma_server() -> Iterator[ChromaServer]:
    """One real Chroma server for the session; FLUX_CHROMA_URL points at it."""
    server = ChromaServer(_STATE / "chroma-data", port=0)
    server.start()
    os.environ["FLUX_CHROMA_URL"] = server.url
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def url(chroma_server: ChromaServer) -> str:
    """The session server's URL."""
    return chroma_server.url


_counter = iter(range(1, 10**9))


@pytest.fixture
def tenant(chroma_server: ChromaServer) -> str:
    """A fresh tenant id per test, so tests never see each other's data."""
    return f"t{os.getpid()}-{next(_counter)}"


@pytest.fixture
def raw_client(chroma_server: ChromaServer):  # type: ignore[no-untyped-def]
    """A plain chromadb HttpClient to inspect the server's real state."""
    import chromadb

    return chromadb.HttpClient(host="127.0.0.1", port=chroma_server.port)
