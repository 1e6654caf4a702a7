"""Chunking, ids, job specs, plans and batch references: pure functions, no server."""

from __future__ import annotations

import itertools
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from flux_chroma.errors import ConfigurationError, InvalidDocumentError, SourceChangedError
from flux_chroma.ingest import (
    ChunkingOptions,
    IngestJob,
    build_plan,
    chunk_id,
    ingest_execution_id,
    read_batch,
    register_loader,
    split_text,
)
from flux_chroma.ingest import plan as plan_module
from flux_chroma.ingest.plan import iter_chunks, submitted_plans, take_plan

TEXT = " ".join(f"w{i}" + "x" * (i % 7) for i in range(400))


def test_chunks_are_word_aligned_bounded_and_overlapping() -> None:
    opts = ChunkingOptions(size=60, overlap=15)
    chunks = split_text(TEXT, opts)
    words = TEXT.split()
    assert all(len(c) <= 60 for c in chunks)
    assert all(c.split()[0] in words and c.split()[-1] in words for c in chunks)  # no cut words
    for prev, nxt in itertools.pairwise(chunks):
        assert nxt.split()[0] in prev.split()[1:] or prev.split()[-1] == words[words.index(nxt.split()[0]) - 1]
    covered = [w for c in chunks for w in c.split()]
    assert sorted(set(covered), key=words.index) == words  # every word lands in some chunk
    assert split_text(TEXT, opts) == chunks  # deterministic


def test_zero_overlap_and_hard_split_of_long_words() -> None:
    assert split_text("aaa bbb ccc ddd", ChunkingOptions(size=16, overlap=0)) == ["aaa bbb ccc ddd"]
    assert split_text("y" * 40 + " z", ChunkingOptions(size=16, overlap=0)) == ["y" * 16, "y" * 16, "y" * 8 + " z"]
    assert split_text(" \n\t ", ChunkingOptions()) == []


def test_chunk_ids_are_stable_constants() -> None:
    # A golden value: the same input gives this id on every run and every machine.
    assert chunk_id("docs/a.md", 0, "hello") == "docs/a.md#0:2cf24dba5fb0"
    long = "d" * 500
    assert chunk_id(long, 3, "x").startswith("h-") and len(chunk_id(long, 3, "x")) < 80


def _docs(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "a.md").write_text(TEXT)
    (root / "sub").mkdir()
    (root / "sub" / "b.txt").write_text(TEXT[::-1])
    (root / "skip.json").write_text("not matched by the default globs")
    return root


def _job(path: Path, **extra: Any) -> IngestJob:
    return IngestJob.from_dict(
        {"tenant": "acme", "collection": "docs", "sources": [{"kind": "files", "path": str(path), "id": "docs"}], "chunking": {"size": 80, "overlap": 10}, "batch_size": 7, **extra}
    )


def test_plan_is_deterministic_and_independent_of_the_directory_location(tmp_path: Path) -> None:
    first = _docs(tmp_path / "one")
    plan = build_plan(_job(first))
    second = tmp_path / "elsewhere" / "two"
    shutil.copytree(first, second)
    moved = build_plan(_job(second))
    assert plan["digest"] == moved["digest"] and plan["batches"] == moved["batches"]
    ids = [c.id for _, c in iter_chunks(_job(first))]
    assert ids == [c.id for _, c in iter_chunks(_job(second))]
    assert {i.split("#")[0] for i in ids} == {"docs/a.md", "docs/sub/b.txt"}
    assert sum(b["count"] for b in plan["batches"]) == plan["chunks"] == len(ids)
    assert all(b["count"] <= 7 for b in plan["batches"])
    assert build_plan(_job(first), max_batch=5)["batch_size"] == 5  # the server's limit caps batches
    plan_json = json.dumps(plan)
    assert "w1x" not in plan_json  # references and digests only, never text


def test_read_batch_detects_a_changed_source(tmp_path: Path) -> None:
    root = _docs(tmp_path / "docs")
    job = _job(root)
    refs = build_plan(job)["batches"]
    assert [c.id for ref in refs for c in read_batch(job, ref)] == [c.id for _, c in iter_chunks(job)]
    reversed_text = TEXT[::-1]
    at = reversed_text.rfind("w")  # near the end of b.txt: inside the last batch
    (root / "sub" / "b.txt").write_text(reversed_text[:at] + "W" + reversed_text[at + 1 :])
    last = refs[-1]
    with pytest.raises(SourceChangedError, match="batch .* no longer matches"):
        read_batch(job, last)
    assert read_batch(job, refs[0])  # slices that did not change still read fine
    (root / "a.md").unlink()
    with pytest.raises(SourceChangedError):
        read_batch(job, refs[0])


def test_jsonl_cursor_and_duplicates_inside_one_file(tmp_path: Path) -> None:
    data = tmp_path / "rows.jsonl"
    rows = [{"id": f"r{i % 6}", "text": f"row {i} " * 3, "metadata": {"n": i}} for i in range(9)]
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    job = IngestJob.from_dict({"tenant": "acme", "collection": "rows", "sources": [{"kind": "jsonl", "path": str(data)}], "batch_size": 2, "duplicates": "last_wins"})
    plan = build_plan(job)
    assert plan["chunks"] == 6 and plan["duplicate_count"] == 3
    read = {c.id.split("#")[0]: c.metadata["n"] for ref in plan["batches"] for c in read_batch(job, ref)}
    assert read == {"r0": 6, "r1": 7, "r2": 8, "r3": 3, "r4": 4, "r5": 5}  # the last occurrence wins


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"options": {"token": "s3cret"}}, "must not carry"),
        ({"options": {"colour": "red"}}, "unknown key"),
        ({"cleanup": "everything"}, "cleanup="),
        ({"duplicates": "first_wins"}, "duplicates="),
        ({"batch_size": 0}, "batch_size"),
        ({"chunking": {"size": 100, "overlap": 60}}, "overlap"),
        ({"sources": []}, "sources is empty"),
        ({"sources": [{"kind": "files", "path": "a", "id": "x"}, {"kind": "jsonl", "path": "b.jsonl", "id": "x"}]}, "unique"),
        ({"sources": [{"kind": "files"}]}, "needs 'path'"),
        ({"sources": [{"kind": "files", "path": "a", "id": "bad#id"}]}, "without '#'"),
        ({"documents": [{"id": "1", "text": "x"}]}, "unknown field"),
        ({"sources": [{"kind": "files", "path": "a", "glob": "../*.md"}]}, "stay inside"),
    ],
    ids=["secret-option", "unknown-option", "cleanup", "duplicates", "batch-size", "overlap", "no-sources", "source-ids", "no-path", "hash-in-id", "documents-in-spec", "glob-escape"],
)
def test_job_spec_validation(change: dict[str, Any], match: str) -> None:
    spec = {"tenant": "acme", "collection": "docs", "sources": [{"kind": "files", "path": "docs"}], **change}
    with pytest.raises(ConfigurationError, match=match):
        IngestJob.from_dict(spec)


def test_job_key_and_execution_ids_are_deterministic(tmp_path: Path) -> None:
    job = _job(tmp_path)
    again = IngestJob.from_dict(json.loads(json.dumps(job.to_dict())))
    assert again == job and again.job_key == job.job_key
    assert ingest_execution_id(job, 2) == ingest_execution_id(again, 2) == ingest_execution_id(job, 1)[:-1] + "2"
    assert IngestJob.from_dict({**job.to_dict(), "key": "nightly"}).job_key == "nightly"
    assert _job(tmp_path, cleanup="full").job_key != job.job_key


def test_custom_loader_and_bad_records(tmp_path: Path) -> None:
    @register_loader("test-list")
    def load(params: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"id": f"{params['prefix']}{i}", "text": f"text {i}"} for i in range(5)]

    job = IngestJob.from_dict({"tenant": "acme", "collection": "c01", "sources": [{"kind": "test-list", "id": "l", "prefix": "p"}], "batch_size": 2})
    assert [c.id.split("#")[0] for _, c in iter_chunks(job)] == ["p0", "p1", "p2", "p3", "p4"]
    assert [c.id for c in read_batch(job, build_plan(job)["batches"][1])] == [c.id for _, c in list(iter_chunks(job))[2:4]]

    unknown = IngestJob.from_dict({"tenant": "acme", "collection": "c01", "sources": [{"kind": "nope", "id": "n"}]})
    with pytest.raises(ConfigurationError, match="unknown kind 'nope'"):
        build_plan(unknown)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "ok", "text": "fine"}\n{"id": "x", "metadata": {"a": 1}}\n')
    job = IngestJob.from_dict({"tenant": "acme", "collection": "c01", "sources": [{"kind": "jsonl", "path": str(bad)}]})
    with pytest.raises(InvalidDocumentError, match=r"bad\.jsonl byte 29 \(id 'x'\) has no string 'text'"):
        build_plan(job)


def test_reading_progress_counts_every_file_and_a_submitted_plan_is_taken_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    job = _job(_docs(tmp_path / "docs"))
    (tmp_path / "docs" / "bad.md").write_bytes(b"\xff\xfe not utf-8 \x00")  # read, then skipped
    monkeypatch.setattr(plan_module, "READING_PROGRESS_EVERY", 0.0)
    seen: list[dict[str, Any]] = []
    with submitted_plans([job], seen.append) as (digest,):
        assert take_plan(job, None, "another digest") is None  # taken, but not for that corpus
    with submitted_plans([job], seen.append) as (again,):
        plan = take_plan(job, None, digest)
        assert plan is not None and plan == build_plan(job) and again == digest
        assert take_plan(job, None, digest) is None  # once
    with submitted_plans([job]):
        pass
    assert take_plan(job, None, digest) is None  # what the block did not take is dropped
    first = seen[: len(seen) // 2]
    reads = [v["read"] for v in first]
    assert reads == sorted(reads) and reads[0] == 1 and reads[-1] == 3 and {v["of"] for v in first} == {3}
    assert first[-1]["chunks"] == plan["chunks"] > first[0]["chunks"] and first[-1]["phase"] == "reading"
    assert (first[0]["tenant"], first[0]["collection"]) == ("acme", "docs")

