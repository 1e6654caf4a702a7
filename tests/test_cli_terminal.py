"""The commands at 80 columns, ``--wide``, and help text a newcomer can read.

Each command runs in a real pseudo-terminal 80 columns wide (see ``cli_terminal.py``);
no line of what it shows (stdout and stderr, progress bar redraws included) may pass 80
characters. ``--wide`` shows every value whole. Help shows real metavars, ``server --help``
names ``--path``, and counts read "1 doc", "1 batch".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli_terminal import run_in_pty
from test_cli import as_json, cli

LONG_ID = "handbook/" + "chapter-" * 8 + "refunds-and-returns-policy"
LONG_TEXT = ("Refunds are accepted within thirty days of delivery for every order placed online. " * 6).strip()
LONG_META = {"department": "billing and customer happiness", "owner": "a.very.long.name@example.com", "year": 2026}


@pytest.fixture(scope="module")
def long_records(chroma_server, tmp_path_factory: pytest.TempPathFactory) -> str:  # type: ignore[no-untyped-def]
    """A tenant whose ``policies`` collection holds records with long ids, texts, metadata."""
    tenant = "wide-cols"
    folder = tmp_path_factory.mktemp("long")
    records = [
        {"id": LONG_ID, "text": LONG_TEXT, "metadata": LONG_META},
        {"id": "short", "text": "Shipping takes five working days.", "metadata": {"topic": "shipping"}},
    ]
    (folder / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    done = cli("ingest", str(folder / "records.jsonl"), "-c", "policies", "--chunk-unit", "chars", "--chunk-size", "2000",
               "--url", chroma_server.url, "--tenant", tenant)
    assert done.returncode == 0, done.stderr
    return tenant


def _fits(run_text: str, longest: int) -> None:
    assert longest <= 80, "a line passes 80 columns:\n" + run_text


def test_query_fits_80_columns_and_wide_shows_everything(url: str, long_records: str, tmp_path: Path) -> None:
    args = ["query", "what is the refund policy?", "-c", "policies", "--url", url, "--tenant", long_records]
    narrow = run_in_pty(*args)
    assert narrow.returncode == 0, narrow.text
    _fits(narrow.text, narrow.longest())
    assert "…" in narrow.text and LONG_ID not in narrow.text  # the long id is cut with an ellipsis
    assert len(narrow.text.splitlines()) < 30  # one long hit no longer fills a screen

    wide = run_in_pty(*args, "--wide")
    assert wide.returncode == 0, wide.text
    assert LONG_ID in wide.text
    assert LONG_TEXT in wide.text
    assert json.dumps(LONG_META, sort_keys=True) in wide.text


def test_collections_fit_80_columns_and_wide_shows_the_fingerprint(url: str, long_records: str, tmp_path: Path) -> None:
    args = ["collections", "--url", url, "--tenant", long_records]
    fingerprint = as_json(cli(*args, "--json"))["collections"][0]["pin"]["fingerprint"]
    narrow = run_in_pty(*args)
    assert narrow.returncode == 0, narrow.text
    _fits(narrow.text, narrow.longest())
    assert "policies" in narrow.text and fingerprint not in narrow.text
    wide = run_in_pty(*args, "--wide")
    assert wide.returncode == 0 and fingerprint in wide.text


def test_ingest_fits_80_columns_with_its_live_progress_bar(url: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(5):
        (docs / f"note-{n}.md").write_text(f"Note {n}: Flux persists every state transition. " * 3)
    tenant = "narrow-ingest-" + "x" * 30
    run = run_in_pty("ingest", str(docs), "-c", "a-rather-long-collection-name-for-notes", "--batch-size", "2",
                     "--url", url, "--tenant", tenant, "--flux-home", str(tmp_path / "flux"))
    assert run.returncode == 0, run.text
    _fits(run.text, run.longest())
    assert "ingested 5 docs (5 chunks)" in run.text and "in 3 batches" in run.text


def test_doctor_fits_80_columns(url: str, long_records: str, tmp_path: Path) -> None:
    run = run_in_pty("doctor", "--url", url, "--tenant", long_records, "--project", str(tmp_path),
                     "--data-dir", str(tmp_path), "--flux-home", str(tmp_path / "flux"))
    assert run.returncode in (0, 4), run.text
    _fits(run.text, run.longest())
    assert "server" in run.text
    wide = run_in_pty("doctor", "--url", url, "--tenant", long_records, "--project", str(tmp_path), "--wide")
    assert wide.returncode in (0, 4), wide.text
    checks = [c["name"] for c in as_json(cli("doctor", "--url", url, "--tenant", long_records,
                                             "--project", str(tmp_path), "--json"))["checks"]]
    assert all(f"  {name}: " in wide.text for name in checks)  # one whole line per check


@pytest.mark.parametrize("command", ["server", "ingest", "query", "collections", "doctor", "demo"])
def test_help_shows_real_metavars(command: str) -> None:
    done = cli(command, "--help", env={"COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    assert not re.search(r"\{[a-z_.]+\}|<(str|int|path|list\[\w+\])>", done.stdout, flags=re.IGNORECASE), done.stdout
    assert max(len(line) for line in done.stdout.splitlines()) <= 80


def test_help_names_the_real_options() -> None:
    server = " ".join(cli("server", "--help").stdout.split())
    assert "owns --path DIR" in server and "--path DIR" in server
    ingest = " ".join(cli("ingest", "--help").stdout.split())
    assert "flux-chroma ingest [OPTIONS] PATH..." in ingest
    assert "--glob PATTERN" in ingest and "-c, --collection NAME" in ingest


def test_counts_read_naturally(url: str, tenant: str, tmp_path: Path) -> None:
    (tmp_path / "one.md").write_text("Exactly one document.")
    done = cli("ingest", str(tmp_path / "one.md"), "-c", "single", "--url", url, "--tenant", tenant)
    assert done.returncode == 0, done.stderr
    assert f"ingested 1 doc (1 chunk) into {tenant}/single in 1 batch:" in done.stdout
    assert f"planned {tenant}/single: 1 chunk in 1 batch" in done.stderr
