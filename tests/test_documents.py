"""Looking at what is stored: whole documents, a hit with its neighbours, records, listings.

Real server, real Flux executions, a real ingestion job (files source with an explicit id,
small chunks so one document has several overlapping chunks).
"""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import toy_embeddings  # noqa: F401 - registers "toy"
from documents_workflows import doc_steps_wf

from flux_chroma import errors as E
from flux_chroma.ingest import run_ingest
from flux_chroma.ingest.chunking import ChunkingOptions
from flux_chroma.tasks.documents import join_chunks, parse_chunk_id

LONG = (
    "The harbour opens at dawn. Fishing boats leave before the ferries. "
    "A lighthouse keeper logs every ship that passes the northern rocks. "
    "In winter the ferry runs twice a day and the café closes at noon. "
    "Tourists arrive in July, when the water is warm enough to swim."
)
FILES = {"harbour.md": LONG, "notes/short.md": "A single short note about bread.", "recipes/soup.md": "Onion soup needs time, butter and patience."}


# Character chunks (the chunker whose overlap is textual), whichever unit is the default.
CHARS = {"size": 80, "overlap": 30, **({"unit": "chars"} if "unit" in {f.name for f in fields(ChunkingOptions)} else {})}


def ingest(tenant: str, folder: Path, **extra: Any) -> None:
    for rel, text in FILES.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text, encoding="utf-8")
    job = {
        "tenant": tenant,
        "collection": "stored",
        "sources": [{"kind": "files", "path": str(folder), "id": "town"}],
        "chunking": CHARS,
        "embedding_function": {"name": "toy", "config": {"dim": 16}},
        **extra,
    }
    run = run_ingest(job)
    assert run.has_succeeded, run.output


def steps(tenant: str, *calls: tuple[str, list[Any], dict[str, Any]]) -> Any:
    run = doc_steps_wf.run({"tenant": tenant, "steps": [{"task": t, "args": a, "kwargs": k} for t, a, k in calls]})
    return run


def test_a_whole_document_comes_back_in_order_with_its_text(tenant: str, tmp_path: Path) -> None:
    ingest(tenant, tmp_path / "town")
    run = steps(tenant, ("get_document", ["stored", "town/harbour.md"], {}), ("list_documents", ["stored"], {}))
    assert run.has_succeeded, run.output
    doc, listing = run.output
    assert doc["document_id"] == "town/harbour.md" and doc["complete"] is True
    assert len(doc["chunks"]) == doc["total_chunks"] >= 4
    assert [c["index"] for c in doc["chunks"]] == list(range(len(doc["chunks"])))
    assert doc["text"] == " ".join(LONG.split())  # overlaps written once, nothing lost
    assert all(not k.startswith("fc_") for c in doc["chunks"] for k in c["metadata"])
    assert listing == [
        {"document_id": "town/harbour.md", "path": "harbour.md", "chunks": doc["total_chunks"]},
        {"document_id": "town/notes/short.md", "path": "notes/short.md", "chunks": 1},
        {"document_id": "town/recipes/soup.md", "path": "recipes/soup.md", "chunks": 1},
    ]


def test_a_hit_comes_back_with_its_neighbours(tenant: str, tmp_path: Path) -> None:
    ingest(tenant, tmp_path / "town")
    whole = steps(tenant, ("get_document", ["stored", "town/harbour.md"], {})).output[0]
    ids = [c["id"] for c in whole["chunks"]]
    middle = ids[2]
    run = steps(
        tenant,
        ("expand_hit", ["stored", middle], {"window": 1}),
        ("expand_hit", ["stored", middle], {"window": 0}),
        ("expand_hit", ["stored", ids[0]], {"window": 1}),
        ("get_records", ["stored", [ids[1], "nope", ids[0]]], {}),
    )
    assert run.has_succeeded, run.output
    around, alone, first, records = run.output
    assert [c["id"] for c in around["chunks"]] == ids[1:4] and around["hit_id"] == middle
    assert around["document_id"] == "town/harbour.md" and around["complete"] is False
    assert around["text"] in whole["text"] and whole["chunks"][2]["document"] in around["text"]
    assert [c["id"] for c in alone["chunks"]] == [middle] and alone["text"] == whole["chunks"][2]["document"]
    assert [c["id"] for c in first["chunks"]] == ids[0:2]
    assert [r["id"] for r in records] == [ids[1], ids[0]] and records[0]["index"] == 1


@pytest.mark.parametrize(
    ("task", "args", "kwargs", "error", "words"),
    [
        ("get_document", ["stored", "town/missing.md"], {}, E.InvalidQueryError, "no document 'town/missing.md'"),
        ("get_document", ["stored", ""], {}, E.InvalidQueryError, "document_id must be a non-empty string"),
        ("expand_hit", ["stored", "town/harbour.md#99:000000000000"], {}, E.InvalidQueryError, "no record"),
        ("expand_hit", ["stored", "x"], {"window": -1}, E.InvalidQueryError, "window must be an integer >= 0"),
        ("get_records", ["stored", []], {}, E.InvalidQueryError, "ids must be a list of 1 to 5000"),
        ("get_document", ["absent", "a"], {}, E.CollectionNotFoundError, "absent"),
    ],
    ids=["missing-document", "empty-id", "missing-hit", "negative-window", "no-ids", "missing-collection"],
)
def test_bad_requests_fail_with_typed_errors(tenant: str, tmp_path: Path, task: str, args: list[Any], kwargs: dict[str, Any], error: type[Exception], words: str) -> None:
    ingest(tenant, tmp_path / "town")
    run = steps(tenant, (task, args, kwargs))
    assert run.has_failed and type(run.output) is error, run.output
    assert words in str(run.output)


def test_a_relative_path_as_query_results_show_it_names_its_document(tenant: str, tmp_path: Path) -> None:
    """``flux-chroma show notes/short.md`` works; a path two sources hold is named, not guessed."""
    ingest(tenant, tmp_path / "town")
    run = steps(tenant, ("get_document", ["stored", "notes/short.md"], {}))
    assert run.has_succeeded, run.output
    assert (run.output[0]["document_id"], run.output[0]["text"]) == ("town/notes/short.md", FILES["notes/short.md"])
    (tmp_path / "city" / "notes").mkdir(parents=True)
    (tmp_path / "city" / "notes" / "short.md").write_text("Another short note, about rain.", encoding="utf-8")
    sources = [{"kind": "files", "path": str(tmp_path / name), "id": name} for name in ("town", "city")]
    assert run_ingest({"tenant": tenant, "collection": "stored", "sources": sources, "chunking": CHARS, "embedding_function": {"name": "toy", "config": {"dim": 16}}}).has_succeeded
    run = steps(tenant, ("get_document", ["stored", "notes/short.md"], {}))
    assert run.has_failed and type(run.output) is E.InvalidQueryError, run.output
    assert "Documents with that path: city/notes/short.md, town/notes/short.md." in str(run.output)


def test_records_that_are_not_chunks_come_back_alone(tenant: str, tmp_path: Path) -> None:
    from fault_tools import steps_wf

    added = steps_wf.run({"tenant": tenant, "hash_dim": 16, "steps": [{"task": "embed_and_add", "args": ["plain", [{"id": "faq-1", "text": "Opening hours: 9 to 5."}]]}]})
    assert added.has_succeeded, added.output
    run = steps(tenant, ("get_document", ["plain", "faq-1"], {}), ("expand_hit", ["plain", "faq-1"], {"window": 3}))
    assert run.has_succeeded, run.output
    doc, hit = run.output
    assert doc["text"] == hit["text"] == "Opening hours: 9 to 5." and doc["chunks"][0]["index"] is None


def test_join_uses_offsets_when_chunks_carry_them() -> None:
    text = "alpha beta gamma delta epsilon"
    rows = [("alpha beta gamma", {"fc_start": 0, "fc_end": 16}), ("gamma delta", {"fc_start": 11, "fc_end": 22}), ("epsilon", {"fc_start": 23, "fc_end": 30})]
    assert join_chunks(rows) == text
    assert join_chunks([(d, {}) for d, _ in rows]) == text
    assert parse_chunk_id("a#b/c.md#12:0123456789ab") == ("a#b/c.md", 12)


def test_default_chunks_with_offsets_rebuild_the_exact_text(tenant: str, tmp_path: Path) -> None:
    """The default chunker stores fc_start/fc_end: the rebuilt text keeps every character's
    offset (whitespace between chunks, which no chunk stores, comes back as spaces)."""
    folder = tmp_path / "pep"
    folder.mkdir()
    text = "\n\n".join(f"Paragraph {i}: " + " ".join(f"word{i}x{j}" for j in range(60)) for i in range(8)) + "\n"
    (folder / "long.txt").write_text(text, encoding="utf-8")
    job = {
        "tenant": tenant,
        "collection": "offsets",
        "sources": [{"kind": "files", "path": str(folder), "id": "pep"}],
        "embedding_function": {"name": "toy", "config": {"dim": 16}},
    }
    assert run_ingest(job).has_succeeded
    run = steps(tenant, ("get_document", ["offsets", "pep/long.txt"], {}))
    assert run.has_succeeded, run.output
    doc = run.output[0]
    assert doc["total_chunks"] >= 3
    rebuilt = doc["text"]
    assert " ".join(rebuilt.split()) == " ".join(text.split())
    if "unit" in {f.name for f in fields(ChunkingOptions)}:  # the token chunker stores offsets
        start = text.index(rebuilt[:40])
        assert len(rebuilt) == len(text.rstrip()) - start  # offsets kept: same length as the source span
