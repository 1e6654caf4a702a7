"""Helpers for the ingestion tests: a counting embedding function and a child-process runner.

``CountingEmbedding`` is a real chromadb embedding function (registered as
``counting-default``) that computes the real default model's vectors and appends every batch
of texts it embeds to the file named by ``FC_EMBED_LOG``. It can also block forever on its
N-th call (``FC_BLOCK_EMBED_CALL``) after writing ``FC_MARKER``, so a test can SIGKILL a
process in the middle of a batch's embedding.

Run as a script (``python tests/ingest_workflows.py job.json``), it runs ``run_ingest`` on
the job in this process and prints one JSON line ``{"execution_id", "succeeded", "output"}``.
With ``FC_BLOCK_AFTER_BATCH=k`` it blocks when batch ``k`` reports it has written and
verified its chunks (before Flux checkpoints the batch), again after writing ``FC_MARKER``.
No workflows are defined here, so Flux never re-executes this module.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function

from flux_chroma.embedding import CANARY_TEXTS, FastDefaultEmbedding

_lock = threading.Lock()
_calls = 0
_CANARIES = set(CANARY_TEXTS)


def _block_forever() -> None:
    marker = os.environ.get("FC_MARKER")
    if marker:
        Path(marker).write_text(str(os.getpid()))
    while True:
        time.sleep(60)


@register_embedding_function
class CountingEmbedding(EmbeddingFunction[Documents]):
    """The default model's vectors, with every embedded text logged (see module doc)."""

    def __init__(self) -> None:
        self._inner = FastDefaultEmbedding()

    @staticmethod
    def name() -> str:
        return "counting-default"

    def __call__(self, input: Documents) -> Embeddings:
        global _calls
        texts = list(input)
        if not set(texts) <= _CANARIES:
            with _lock:
                _calls += 1
                log = os.environ.get("FC_EMBED_LOG")
                if log:
                    with open(log, "a", encoding="utf-8") as handle:
                        handle.write(json.dumps({"pid": os.getpid(), "thread": threading.current_thread().name, "texts": texts}) + "\n")
                block_at = int(os.environ.get("FC_BLOCK_EMBED_CALL") or 0)
                if block_at and _calls == block_at:
                    _block_forever()
        return self._vectors(texts)

    def _vectors(self, texts: list[str]) -> Embeddings:
        return list(self._inner.embed(texts))

    def get_config(self) -> dict[str, Any]:
        return {}

    @classmethod
    def build_from_config(cls, config: dict[str, Any]) -> CountingEmbedding:
        return cls()

    @staticmethod
    def validate_config(config: dict[str, Any]) -> None:
        return None

    def validate_config_update(self, old: dict[str, Any], new: dict[str, Any]) -> None:
        return None


@register_embedding_function
class CountingToyEmbedding(CountingEmbedding):
    """:class:`CountingEmbedding`'s log with the toy model's vectors (fast: for cluster tests).

    Config ``{"delay": s}`` sleeps ``s`` seconds per call, so a test can kill a unit mid-way.
    """

    def __init__(self, delay: float = 0.0) -> None:
        from toy_embeddings import ToyEmbedding

        self._toy = ToyEmbedding(8)
        self.delay = float(delay)

    @staticmethod
    def name() -> str:
        return "counting-toy"

    def _vectors(self, texts: list[str]) -> Embeddings:
        time.sleep(self.delay)
        return self._toy(texts)

    def get_config(self) -> dict[str, Any]:
        return {"delay": self.delay} if self.delay else {}

    @classmethod
    def build_from_config(cls, config: dict[str, Any]) -> CountingToyEmbedding:
        return cls(float(config.get("delay", 0.0)))


def embedded_texts(log: Path) -> list[tuple[int, str]]:
    """``(pid, text)`` for every text logged by :class:`CountingEmbedding`."""
    if not log.exists():
        return []
    out = []
    for line in log.read_text(encoding="utf-8").splitlines():
        entry = json.loads(line)
        out.extend((entry["pid"], text) for text in entry["texts"])
    return out


# --- corpus helpers shared by the ingestion tests ---------------------------------------


def write_docs(root: Path, names: list[str], words: int = 70) -> None:
    """Write one markdown file per name with deterministic, distinct words."""
    root.mkdir(parents=True, exist_ok=True)
    for n, name in enumerate(names):
        body = " ".join(f"{name}-word{i}-{(i * 7 + n) % 13}" for i in range(words))
        (root / f"{name}.md").write_text(f"# {name}\n\n{body}\n")


def files_job(tenant: str, root: Path, **extra: Any) -> dict[str, Any]:
    """A small multi-batch job over ``root`` embedded by :class:`CountingEmbedding`."""
    return {
        "tenant": tenant,
        "collection": "notes",
        "sources": [{"kind": "files", "path": str(root), "id": "notes"}],
        "chunking": {"size": 120, "overlap": 20},
        "batch_size": 8,
        "embedding_function": {"name": "counting-default"},
        **extra,
    }


def stored(raw_client: Any, tenant: str, name: str = "notes") -> dict[str, tuple[str, dict[str, Any]]]:
    """``{id: (document, metadata)}`` of a tenant's collection, read with a plain client."""
    got = raw_client.get_collection(f"{tenant}__{name}").get(include=["documents", "metadatas"])
    return {rid: (doc, meta) for rid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)}


def assert_stored_exactly(raw_client: Any, physical: str, expected: dict[str, Any], source: dict[str, Any]) -> None:
    """The collection holds exactly the ``expected`` chunks (``{id: Chunk}``): ids, texts, metadata.

    ``source`` is the job's normalized source (``IngestJob.sources[i]``): its id and location
    are stored with every chunk.
    """
    from flux_chroma.ingest.sources import source_location
    from flux_chroma.tasks.writer import content_hash

    got = raw_client.get_collection(physical).get(include=["documents", "metadatas"])
    assert sorted(got["ids"]) == sorted(expected)
    for rid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True):
        chunk = expected[rid]
        assert doc == chunk.text
        assert meta == {
            **chunk.metadata,
            "fc_source": source["id"],
            "fc_loc": source_location(source),
            "fc_hash": content_hash(chunk.document()),
        }


def _main(spec_path: str) -> int:
    from flux_chroma.ingest import run_ingest

    job = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    block_after = int(os.environ.get("FC_BLOCK_AFTER_BATCH") or -1)

    def on_progress(value: Any) -> None:
        if value.get("phase") == "batch" and value.get("status") == "done" and value.get("batch") == block_after:
            _block_forever()

    ctx = run_ingest(job, on_progress=on_progress)
    output = ctx.output if ctx.has_succeeded else f"{type(ctx.output).__name__}: {ctx.output}"
    print(json.dumps({"execution_id": ctx.execution_id, "succeeded": ctx.has_succeeded, "output": output}), flush=True)
    return 0 if ctx.has_succeeded else 1


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
