"""The docs stay in step with the code: every public name, option, variable and page."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import flux_chroma
from flux_chroma.tasks.options import ChromaOptions
from flux_chroma.tasks.task import FLUX_OPTION_NAMES

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def test_api_page_has_an_entry_for_every_public_name() -> None:
    api = (DOCS / "api.md").read_text()
    headings = set(re.findall(r"^### `([^`]+)`", api, flags=re.MULTILINE))
    missing = sorted(set(flux_chroma.__all__) - headings)
    assert not missing, f"docs/api.md lacks a '### `NAME`' entry for {missing}"


def test_configuration_page_lists_every_option_and_environment_variable() -> None:
    page = (DOCS / "configuration.md").read_text()
    for field in dataclasses.fields(ChromaOptions):
        assert f"`{field.name}`" in page, f"ChromaOptions.{field.name} is not documented"
    for option in FLUX_OPTION_NAMES:
        assert f"`{option}`" in page, f"Flux task option {option} is not documented"
    used = set()
    for source in (ROOT / "flux_chroma").rglob("*.py"):
        used |= set(re.findall(r"FLUX_CHROMA_[A-Z_]+", source.read_text()))
    assert used, "no FLUX_CHROMA_* variables found: the scan is broken"
    missing = sorted(v for v in used if f"`{v}`" not in page)
    assert not missing, f"docs/configuration.md lacks {missing}"


def test_every_nav_page_exists_and_every_docs_page_is_in_the_nav() -> None:
    nav = re.findall(r":\s+(\S+\.md)\s*$", (ROOT / "mkdocs.yml").read_text(), flags=re.MULTILINE)
    assert "index.md" in nav
    on_disk = {p.name for p in DOCS.glob("*.md")}
    assert sorted(set(nav) - on_disk) == [], "mkdocs.yml names pages that do not exist"
    assert sorted(on_disk - set(nav)) == [], "docs/ has pages missing from mkdocs.yml nav"


def test_relative_links_between_docs_pages_resolve() -> None:
    broken = []
    for page in DOCS.glob("*.md"):
        for target in re.findall(r"\]\(([^)#:\s]+\.md)(?:#[^)]*)?\)", page.read_text()):
            if not (page.parent / target).exists():
                broken.append(f"{page.name} -> {target}")
    assert broken == []


def test_every_cli_command_is_documented() -> None:
    from flux_chroma.cli import app

    commands = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    assert commands >= {"server", "ingest", "query", "collections", "doctor", "demo", "docs", "show", "eval"}
    page = (DOCS / "configuration.md").read_text() + (DOCS / "index.md").read_text()
    for command in commands:
        assert f"`{command}" in page, f"flux-chroma {command} is not documented"
