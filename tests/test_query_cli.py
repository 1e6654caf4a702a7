"""``flux-chroma query`` at 80 columns reads like search results (in-process, real server).

The command runs in this process through typer's ``CliRunner``; output that is not a terminal
is 80 columns wide for rich, the width these tests hold the output to.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner
from workflows import ingest_wf

from flux_chroma.cli.app import app

LONG = (
    "Chroma keeps a full-text index of every stored document next to the vector index, so a "
    "query can be restricted to records whose text contains a phrase. The index is updated "
    "when a record is written and is used by where_document filters with contains and regex. "
) * 3
HEADER = re.compile(r"^ ?\d+\. \d+\.\d{4}  \S")


def _seed(tenant: str) -> None:
    docs = [{"id": f"handbook/chapter-{n}/" + "section-" * 8 + "index", "text": f"Part {n}. {LONG}",
             "metadata": {"topic": "search"}} for n in range(5)]
    docs += [{"id": f"copy-{n}", "text": "Identical licence text, shipped twice.", "metadata": {"path": f"pkg{n}/copyright"}} for n in range(2)]
    run = ingest_wf.run({"tenant": tenant, "collection": "manual", "docs": docs})
    assert run.has_succeeded, run.output


def test_query_hits_read_like_search_results_at_80_columns(url: str, tenant: str, tmp_path: Path) -> None:
    _seed(tenant)
    runner = CliRunner()
    args = ["query", "how does the full-text index work?", "-c", "manual", "-k", "4", "--url", url,
            "--tenant", tenant]
    done = runner.invoke(app, args)
    assert done.exit_code == 0, done.output
    lines = done.output.rstrip("\n").splitlines()
    assert max(len(line) for line in lines) <= 80, done.output
    assert len(lines) <= 24, done.output  # four hits and the title fit one 24-line screen
    headers = [i for i, line in enumerate(lines) if HEADER.match(line)]
    assert len(headers) == 4, done.output
    for start, end in zip(headers, [*headers[1:], len(lines)], strict=True):
        body = lines[start + 1 : end]
        assert 1 <= len(body) <= 3 and all(line.startswith("    ") for line in body)
    assert lines[headers[0]].endswith("…")  # the long id is cut to the width
    assert lines[headers[0] + 3].endswith("…")  # the long text is cut after three lines

    wide = runner.invoke(app, [*args, "--wide"])
    assert wide.exit_code == 0, wide.output
    assert "handbook/chapter-" + "0/" + "section-" * 8 + "index" in wide.output or "section-" * 8 in wide.output
    assert " ".join(LONG.split()) in wide.output


def test_query_shows_paths_and_folded_copies_and_json_is_unchanged(url: str, tenant: str, tmp_path: Path) -> None:
    _seed(tenant)
    runner = CliRunner()
    base = ["query", "identical licence text", "-c", "manual", "-k", "2", "--url", url, "--tenant", tenant]
    done = runner.invoke(app, base)
    assert done.exit_code == 0, done.output
    first = next(line for line in done.output.splitlines() if HEADER.match(line))
    assert re.search(r"pkg[01]/copyright  \(\+1 copy\)$", first), done.output
    as_json = json.loads(runner.invoke(app, [*base, "--json"]).output)
    assert set(as_json) == {"tenant", "collection", "question", "hits"}
    hit = as_json["hits"][0]
    assert set(hit) == {"id", "document", "metadata", "distance", "duplicates"}
    every = json.loads(runner.invoke(app, [*base, "--all", "--mode", "dense", "--json"]).output)["hits"]
    assert sorted(h["id"] for h in every) == ["copy-0", "copy-1"]
