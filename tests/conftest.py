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
    os.environ.setdefault("FLUX_CHROMA_EMBED_THREADS", str(max(1, len(os.sched_getaffinity(0)) // _WORKERS)))

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


# Modules that start a Flux fleet (a Flux server, workers and, for most, a PostgreSQL): long,
# and mostly waiting on servers and processes. They are handed out first, and the CPU-heavy tests
# of a minute or more next (xdist hands out units in collection order), so the long units start
# at once and the many short tests fill the gaps, instead of one long test starting last and
# running alone. Fleets do run beside each other on the three workers: grouping them on one
# worker made that worker's share (about 530 s of the suite's 1,350 s) the whole run's length.
FLEET_MODULES = frozenset(
    {
        "test_deployment_fleet",
        "test_distributed",
        "test_docs_cluster",
        "test_ingest_cluster",
        "test_ingest_cluster_restarts",
        "test_scheduled_sync",
        "test_serving_runner",
        "test_telemetry_cluster",
        "test_watch_cluster",
    }
)
FIRST_MODULES = ("test_bench_smoke", "test_quality_docs", "test_readme_docs", "test_ingest_memory")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests that use the session's Chroma server `server`; start the fleet tests and the
    longest modules first (whole modules move, so module fixtures start once)."""
    for item in items:
        if "chroma_server" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.server)

    def rank(item: pytest.Item) -> int:
        stem = item.path.stem
        if stem in FLEET_MODULES:
            return 0
        return 1 + FIRST_MODULES.index(stem) if stem in FIRST_MODULES else len(FIRST_MODULES) + 1

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
