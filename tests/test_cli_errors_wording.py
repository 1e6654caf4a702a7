"""CLI errors a newcomer can act on: no silent no-op, CLI words, did-you-mean.

* An ingest whose folder matches none of the globs fails (exit 2) naming the globs and a
  ``--glob`` that would match, instead of "ingested 0 docs".
* Messages speak the command line: ``--tenant acme``, not ``task.with_options(tenant=...)``;
  no ``retry_max_attempts`` advice (the commands run with no retries).
* A misspelt collection gets "did you mean ...?".
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_cli import as_json, cli, closed_port_url, seed

from flux_chroma.cli.support import ExitCode, cli_wording


def test_a_folder_matching_no_glob_is_an_error_naming_the_globs(url: str, tenant: str, tmp_path: Path) -> None:
    licenses = tmp_path / "licenses"
    for name in ("zlib", "expat", "bsd"):
        (licenses / name).mkdir(parents=True)
        (licenses / name / "terms").write_text(f"{name} license text")  # a name no default glob takes
    done = cli("ingest", str(licenses), "-c", "licenses", "--url", url, "--tenant", tenant)
    assert done.returncode == ExitCode.USAGE, done.stdout + done.stderr
    assert "matches the default globs" in done.stderr
    assert "3 files there" in done.stderr
    assert "hint: pass --glob" in done.stderr and "--glob '**/terms'" in done.stderr
    assert "ingested" not in done.stdout

    custom = cli("ingest", str(licenses), "-c", "licenses", "--glob", "**/*.rst", "--url", url, "--tenant", tenant)
    assert custom.returncode == ExitCode.USAGE and "--glob '**/*.rst'" in custom.stderr

    fixed = cli("ingest", str(licenses), "-c", "licenses", "--glob", "**/terms", "--url", url, "--tenant", tenant)
    assert fixed.returncode == 0, fixed.stderr
    assert "ingested 3 docs" in fixed.stdout


def test_an_empty_folder_is_an_error_too(url: str, tenant: str, tmp_path: Path) -> None:
    done = cli("ingest", str(tmp_path), "-c", "notes", "--url", url, "--tenant", tenant)
    assert done.returncode == ExitCode.USAGE
    assert "holds no files to ingest" in done.stderr and "symlinked" not in done.stderr

    empty, target = tmp_path / "pkg-doc", tmp_path / "html"
    empty.mkdir()
    target.mkdir()
    (target / "index.html").write_text("<p>The API pages.</p>", encoding="utf-8")
    (empty / "reference").symlink_to(target, target_is_directory=True)  # all there is: a link
    linked = cli("ingest", str(empty), "-c", "notes", "--url", url, "--tenant", tenant)
    assert linked.returncode == ExitCode.USAGE
    assert f"its symlinked folders ('{empty / 'reference'}') are not entered" in linked.stderr
    assert "give a symlinked folder as a PATH of its own" in linked.stderr
    assert cli("ingest", str(empty / "reference"), "-c", "notes", "--url", url, "--tenant", tenant).returncode == 0


def test_a_missing_tenant_names_the_option() -> None:
    done = cli("collections")
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert "with_options" not in done.stderr
    assert "error: no tenant given" in done.stderr and "--tenant acme" in done.stderr


def test_an_unreachable_server_gives_no_retry_advice(tenant: str) -> None:
    done = cli("query", "x", "-c", "handbook", "--url", closed_port_url(), "--tenant", tenant)
    assert done.returncode == ExitCode.UNREACHABLE, done.stderr
    assert "retry_max_attempts" not in done.stderr
    assert "unreachable" in done.stderr and "--url" in done.stderr


def test_a_misspelt_collection_gets_did_you_mean(url: str, tenant: str) -> None:
    seed(url, tenant)
    done = cli("query", "x", "-c", "handbok", "--url", url, "--tenant", tenant)
    assert done.returncode == ExitCode.FAILED, done.stderr
    assert "hint: did you mean 'handbook'?" in done.stderr
    assert "embed_and_add" not in done.stderr and "flux-chroma ingest" in done.stderr
    other = as_json(cli("query", "x", "-c", "zzzzzz", "--url", url, "--tenant", tenant, "--json"))
    assert other["error"]["type"] == "CollectionNotFoundError"
    assert other["error"]["hint"].startswith(f"tenant '{tenant}' has 'handbook'")


@pytest.mark.parametrize(
    ("library", "cli_text"),
    [
        ("bound to one tenant. Use task.with_options(tenant='acme').", "bound to one tenant. Use --tenant acme."),
        ("Check that it is up; the task is retried when it has retry_max_attempts > 0.", "Check that it is up."),
        ("Ingest into it first (embed_and_add), or check the name.",
         "Ingest into it first (flux-chroma ingest PATH -c NAME), or check the name."),
        ("Run the job again (run_ingest): committed batches are replayed.",
         "Run the same command again: committed batches are replayed."),
        ("Point url= / FLUX_CHROMA_URL at a `chroma run` server.", "Point --url / FLUX_CHROMA_URL at a `chroma run` server."),
    ],
    ids=["with-options", "retry-advice", "embed-and-add", "run-ingest", "url-option"],
)
def test_library_advice_is_reworded_for_the_command_line(library: str, cli_text: str) -> None:
    assert cli_wording(library) == cli_text
