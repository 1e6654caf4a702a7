"""Token-exact, structure-aware chunking and citation metadata (issue 23, items 1-2).

Real documents the project did not write (/usr/share/doc), the real default model's
tokenizer, a real Chroma server and real Flux executions for the re-chunking test.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import toy_embeddings  # noqa: F401 - registers "toy", a function that declares no tokenizer
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.utils.embedding_functions import register_embedding_function
from cli_inproc import run_cli
from ingest_workflows import assert_stored_exactly

from flux_chroma.errors import ConfigurationError
from flux_chroma.ingest import IngestJob, run_ingest
from flux_chroma.ingest.chunking import ChunkingOptions
from flux_chroma.ingest.plan import build_plan, chunks_of, iter_chunks
from flux_chroma.ingest.sources import Unit
from flux_chroma.ingest.splitter import (
    SECTION_RUN,
    Chunker,
    chunker_for,
    heading_paths,
    section_runs,
)
from flux_chroma.ingest.tokens import default_model_tokens

HANG_GUARD = 300  # seconds; only stops a broken test from hanging
DOC_ROOT = Path("/usr/share/doc")


def real_text_files(every: int = 10) -> list[tuple[Path, str]]:
    """Every ``every``-th plain UTF-8 text file of /usr/share/doc (sorted, no .gz, no markup)."""
    out = []
    for path in sorted(DOC_ROOT.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.suffix in (".gz", ".html", ".htm", ".js", ".css", ".xml", ".svg"):
            continue
        if not 200 <= path.stat().st_size <= 200_000:
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            out.append((path, data.decode("utf-8")))
        except UnicodeDecodeError:
            continue
    return out[::every]


MARKDOWN = """Guide
=====

Intro paragraph of the guide.

## Install

Run the installer.

### Offline

Copy the wheel files first.

```sh
# this is a shell comment, not a heading
pip install --no-index --find-links wheels flux-chroma
```

## Usage

Call the task from a workflow.
"""


def test_no_chunk_is_longer_than_the_model_reads_on_real_documents() -> None:
    files = real_text_files()
    assert len(files) > 100
    tokens = default_model_tokens()
    new = chunker_for(ChunkingOptions(), None)
    old = chunker_for(ChunkingOptions(unit="chars", size=1000, overlap=100), None)
    texts: list[str] = []
    for path, text in files:
        for piece in new.pieces(text, markdown=path.suffix == ".md"):
            assert text[piece.start : piece.end] == piece.text and piece.text.strip()
            texts.append(piece.text)
    counts = tokens.counts(texts)
    assert max(counts) <= tokens.max_tokens == 256  # [CLS] and [SEP] included
    assert new.over_limit(texts) == 0
    assert max(counts) > 200  # chunks are filled, not tiny
    old_texts = [p.text for path, text in files for p in old.pieces(text, markdown=False)]
    assert (old.over_limit(old_texts) or 0) > len(old_texts) // 10  # the old chunker truncated many


def test_markdown_keeps_structure_and_heading_paths() -> None:
    offsets, paths = heading_paths(MARKDOWN)
    assert paths == ["Guide", "Guide > Install", "Guide > Install > Offline", "Guide > Usage"]
    assert [MARKDOWN[o : o + 9] for o in offsets] == ["Guide\n===", "## Instal", "### Offli", "## Usage\n"]
    small = Chunker(ChunkingOptions(size=40), default_model_tokens())
    pieces = small.pieces(MARKDOWN, markdown=True)
    code = MARKDOWN[MARKDOWN.index("```sh") : MARKDOWN.rindex("```") + 3]
    holding = [p for p in pieces if "pip install" in p.text]
    assert len(holding) == 1 and code in holding[0].text  # the code block is kept whole
    assert holding[0].heading == "Guide > Install > Offline"
    usage = [p for p in pieces if "Call the task" in p.text]
    assert len(usage) == 1 and usage[0].heading == "Guide > Usage"
    assert all(MARKDOWN[p.start : p.end] == p.text for p in pieces)
    assert not any(p.heading.endswith("shell comment, not a heading") for p in pieces)
    plain = small.pieces(MARKDOWN, markdown=False)
    assert all(p.heading == "" for p in plain)  # plain text has no headings


def test_token_counts_of_many_texts_are_those_of_each_text() -> None:
    """``counts`` encodes in slices (bounded memory); the counts are the same."""
    from flux_chroma.ingest.tokens import COUNT_SLICE

    tokens = default_model_tokens()
    texts = [("word " * (i % 300)).strip() or "x" for i in range(2 * COUNT_SLICE + 7)]
    one_by_one = [len(tokens.tokenizer.encode(t, add_special_tokens=True).ids) for t in texts]
    assert tokens.counts(texts) == one_by_one and max(one_by_one) > tokens.max_tokens
    assert tokens.counts([]) == []


def test_a_long_markdown_document_is_cut_in_runs_of_whole_sections() -> None:
    """The Markdown splitter gets at most about SECTION_RUN characters of sections at once."""
    assert section_runs([], 900_000) == [(0, 900_000)]
    assert section_runs([0, 5_000], SECTION_RUN) == [(0, SECTION_RUN)]  # a short document: whole
    assert section_runs([0, 10_000, 20_000, 30_000, 70_000], 80_000) == [
        (0, 10_000), (10_000, 20_000), (20_000, 30_000), (30_000, 70_000), (70_000, 80_000)
    ]
    words = ["connection", "pooling", "reuses", "sockets", "between", "requests", "and", "keeps", "latency", "low"]
    sections = [
        f"## Release {n}\n\n" + "\n".join(f"* {' '.join(words[(n + i) % 5 :])} ({n}.{i})" for i in range(30)) + "\n"
        for n in range(40)
    ]
    text = "# Changelog\n\n" + "\n".join(sections)
    assert len(text) > 4 * SECTION_RUN
    offsets, _ = heading_paths(text)
    runs = section_runs(offsets, len(text))
    assert len(runs) > 4 and all(lo in offsets for lo, _ in runs[1:]) and runs[-1][1] == len(text)
    chunker = Chunker(ChunkingOptions(), default_model_tokens())
    pieces = chunker.pieces(text, markdown=True)
    assert all(text[p.start : p.end] == p.text for p in pieces)
    assert not any(lo < p.start < hi < p.end for p in pieces for lo, hi in runs)  # none spans two runs
    assert chunker.over_limit([p.text for p in pieces]) == 0
    last = next(p for p in pieces if "(39.29)" in p.text)
    assert last.heading == "Changelog > Release 39"
    assert chunker.identity["section_run"] == SECTION_RUN  # part of the plan digest


def test_headings_and_code_fences_are_not_chunks_alone_when_they_fit_beside_a_neighbour() -> None:
    """The splitter cuts before a first paragraph that does not fit beside its heading; the
    heading then joins that chunk when both fit in what the model reads (0 of 942 such
    heading-only chunks left in 40,000 chunks of /usr/share/doc), and stays alone when not."""
    tokens = default_model_tokens()
    paragraph = " ".join(f"step{i} copies the package to the host" for i in range(60))
    for size in (200, tokens.capacity):
        words = paragraph.split()
        while tokens.counts([" ".join(words)])[0] - tokens.specials > size - 2:
            words.pop()
        body = " ".join(words)  # fits alone, not beside its heading
        text = f"# Install\n\nRun it.\n\n## Offline host setup\n\n{body}\n"
        chunker = Chunker(ChunkingOptions(size=size), tokens)
        pieces = chunker.pieces(text, markdown=True)
        assert all(text[p.start : p.end] == p.text for p in pieces) and chunker.over_limit([p.text for p in pieces]) == 0
        lone = [p.text for p in pieces if p.text == "## Offline host setup"]
        assert lone == ([] if size == 200 else ["## Offline host setup"]), (size, [p.text[:30] for p in pieces])
    chained = f"# Guide\n\n## Offline host setup\n\n{body}\n"  # two lone headings in a row
    pieces = Chunker(ChunkingOptions(size=200), tokens).pieces(chained, markdown=True)
    assert pieces[0].text.startswith("# Guide\n\n## Offline host setup\n\nstep0") and pieces[0].heading == "Guide"
    code = "\n".join(f"const value{i} = compute({i}, options);" for i in range(120))
    fenced = f"## Example\n\nCall it like this:\n\n```js\n{code}\n```\n\nThat is all.\n"
    pieces = Chunker(ChunkingOptions(size=200), tokens).pieces(fenced, markdown=True)
    assert len(pieces) > 2 and not [p.text for p in pieces if p.text.strip("`js \n") == ""]  # no fence alone
    assert "".join(fenced[p.start : p.end] for p in pieces).count("```") == 2
    assert chunker.identity["stubs"]  # part of the plan digest


def test_chunk_metadata_carries_offsets_heading_and_page() -> None:
    job = IngestJob.from_dict({"tenant": "acme", "collection": "docs", "sources": [{"kind": "files", "path": "docs"}], "chunking": {"size": 40}})
    text = MARKDOWN
    pages = (0, text.index("## Install"), text.index("## Usage"))
    unit = Unit("docs/guide.md", text, {"path": "guide.md"}, 0, "guide.md", page_starts=pages)
    chunks = chunks_of(unit, job)
    assert len(chunks) > 3
    for chunk in chunks:
        meta = chunk.metadata
        assert text[meta["fc_start"] : meta["fc_end"]] == chunk.text
        assert meta["path"] == "guide.md"
        expected_page = 1 + sum(1 for p in pages[1:] if p <= meta["fc_start"])
        assert meta["fc_page"] == expected_page
    usage = next(c for c in chunks if "Call the task" in c.text)
    assert usage.metadata["fc_heading"] == "Guide > Usage" and usage.metadata["fc_page"] == 3
    no_pages = chunks_of(Unit("docs/a.txt", "plain words " * 5, {"path": "a.txt"}), job)
    assert "fc_page" not in no_pages[0].metadata and "fc_heading" not in no_pages[0].metadata


@pytest.mark.parametrize(
    ("chunking", "match"),
    [
        ({"size": 300}, r"chunking.size=300 tokens is more than all-MiniLM-L6-v2 reads: 256 tokens including 2 special"),
        ({"unit": "words"}, r"chunking.unit='words'"),
        ({"size": 100, "overlap": 50}, r"chunking.overlap=50"),
        ({"size": 4}, r"chunking.size=4 is too small"),
    ],
    ids=["over-the-model", "unknown-unit", "overlap-too-big", "too-small"],
)
def test_bad_chunking_is_a_typed_error_naming_the_limit(tmp_path: Path, chunking: dict[str, Any], match: str) -> None:
    (tmp_path / "a.md").write_text("hello world")
    with pytest.raises(ConfigurationError, match=match):
        build_plan({"tenant": "acme", "collection": "docs", "sources": [{"kind": "files", "path": str(tmp_path)}], "chunking": chunking})


@register_embedding_function
class SmallWindowEmbedding(EmbeddingFunction[Documents]):
    """A toy model that declares the default tokenizer and a 64-token window."""

    max_tokens = 64

    def __init__(self) -> None:
        pass

    def __call__(self, input: Documents) -> Embeddings:
        return [np.full(4, float(len(t) % 7 + 1), dtype=np.float32) for t in input]

    def tokenizer(self) -> Any:
        from tokenizers import Tokenizer

        return Tokenizer.from_str(default_model_tokens().tokenizer.to_str())

    @staticmethod
    def name() -> str:
        return "small-window-test"

    def get_config(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> SmallWindowEmbedding:
        return SmallWindowEmbedding()


def test_a_declared_tokenizer_sizes_chunks_and_silence_falls_back_to_characters(tmp_path: Path) -> None:
    _path, text = real_text_files(every=50)[1]
    (tmp_path / "doc.txt").write_text(text)
    base = {"tenant": "acme", "collection": "docs", "sources": [{"kind": "files", "path": str(tmp_path)}]}
    declared = IngestJob.from_dict({**base, "embedding_function": {"name": "small-window-test"}})
    plan = build_plan(declared)
    assert plan["chunker"]["size"] == 62 and plan["chunker"]["max_tokens"] == 64 and plan["truncated"] == 0
    counts = default_model_tokens().counts([c.text for _, c in iter_chunks(declared)])
    assert max(counts) <= 64
    silent = build_plan({**base, "embedding_function": {"name": "toy"}, "chunking": {"size": 100}})
    assert silent["truncated"] is None
    assert silent["chunker"]["unit"] == "chars" and silent["chunker"]["size"] == 200 and "fallback" in silent["chunker"]


def _job(tenant: str, root: Path, chunking: dict[str, Any]) -> dict[str, Any]:
    return {"tenant": tenant, "collection": "kbase", "sources": [{"kind": "files", "path": str(root), "id": "kb"}], "chunking": chunking, "cleanup": "full"}


@pytest.mark.timeout(HANG_GUARD)
def test_changing_the_chunk_size_rechunks_and_cleanup_removes_the_old_chunks(
    tmp_path: Path, tenant: str, url: str, raw_client: Any
) -> None:
    root = tmp_path / "kb"
    root.mkdir()
    (root / "guide.md").write_text(MARKDOWN * 3)
    (_path, text) = real_text_files(every=50)[2]
    (root / "notes.txt").write_text(text[:6000])
    first_job = _job(tenant, root, {"size": 120})
    first = run_ingest(first_job)
    assert first.has_succeeded, first.output
    assert first.output["truncated"] == 0 and first.output["chunker"]["size"] == 120
    spec = IngestJob.from_dict(first_job)
    old = {c.id: c for _, c in iter_chunks(spec)}
    assert_stored_exactly(raw_client, f"{tenant}__kbase", old, spec.sources[0])

    second_job = _job(tenant, root, {"size": 60})
    assert IngestJob.from_dict(second_job).job_key != spec.job_key  # a new job, not a replay
    second = run_ingest(second_job)
    assert second.has_succeeded, second.output
    spec2 = IngestJob.from_dict(second_job)
    new = {c.id: c for _, c in iter_chunks(spec2)}
    assert len(new) > len(old)
    assert_stored_exactly(raw_client, f"{tenant}__kbase", new, spec2.sources[0])
    assert second.output["deleted"] == len(set(old) - set(new)) > 0
    again = run_ingest(second_job)  # the same settings: nothing to do
    assert again.has_succeeded and again.output["added"] == again.output["deleted"] == 0


@pytest.mark.timeout(HANG_GUARD)
def test_the_cli_summary_counts_truncated_chunks(tmp_path: Path, tenant: str, url: str) -> None:
    root = tmp_path / "dense"
    root.mkdir()
    (root / "ids.txt").write_text(" ".join(f"{i:x}" for i in range(4000)))  # hex: many tokens per character
    common = ["ingest", str(root), "--url", url, "--tenant", tenant]
    old = run_cli(*common, "-c", "old", "--chunk-unit", "chars")
    assert old.returncode == 0, old.stderr
    assert ", truncated " in old.stdout and ", truncated 0" not in old.stdout
    new = run_cli(*common, "-c", "new", "--json")
    assert new.returncode == 0, new.stderr
    report = json.loads(new.stdout)
    assert report["truncated"] == 0 and report["chunker"]["unit"] == "tokens"
