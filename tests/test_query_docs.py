"""docs/retrieval.md's example runs verbatim and prints what the page says it prints."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

from test_readme_snippet import run_python
from user_shell import code_blocks, section
from workflows import ingest_wf

ROOT = Path(__file__).resolve().parent.parent


def test_retrieval_page_example_runs_and_prints_the_documented_output(url: str, tmp_path: Path) -> None:
    page = (ROOT / "docs" / "retrieval.md").read_text()
    blocks = code_blocks(section(page, "Modes"), "python")
    assert len(blocks) == 1
    printed = re.search(r"It prints `(\{.*?\})`", page)
    assert printed is not None, "the page says what the example prints"
    (tmp_path / ".flux").mkdir()
    (tmp_path / "hybrid_demo.py").write_text(blocks[0])
    done = run_python(tmp_path, "hybrid_demo.py", env={"FLUX_CHROMA_URL": url})
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert ast.literal_eval(last) == ast.literal_eval(printed.group(1)), done.stdout


def test_the_search_ef_of_an_older_collection_is_raised_as_the_page_says(url: str, tenant: str, raw_client: Any) -> None:
    """The vector index section: ``modify`` sets ``ef_search`` and the collection keeps its pin."""
    (block,) = code_blocks(section((ROOT / "docs" / "retrieval.md").read_text(), "The vector index"), "python")
    first = ingest_wf.run({"tenant": tenant, "collection": "docs", "docs": [{"id": "a", "text": "an older collection"}]})
    assert first.has_succeeded, first.output
    raw_client.get_collection(f"{tenant}__docs", embedding_function=None).modify(configuration={"hnsw": {"ef_search": 100}})
    port = url.rsplit(":", 1)[1]
    exec(block.replace('host="localhost", port=8000', f'host="127.0.0.1", port={port}').replace('"acme__docs"', f'"{tenant}__docs"'), {})  # noqa: S102
    collection = raw_client.get_collection(f"{tenant}__docs", embedding_function=None)
    assert collection.configuration["hnsw"]["ef_search"] == 400 and collection.metadata["fc_tenant"] == tenant
    asked = ingest_wf.run({"tenant": tenant, "collection": "docs", "docs": [{"id": "b", "text": "written after the change"}]})
    assert asked.has_succeeded, asked.output  # the pin still holds
