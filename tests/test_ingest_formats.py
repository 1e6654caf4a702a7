"""File formats in, every file accounted for (issue 23, items 3-4).

Real files of every supported format (made here: gzip by :mod:`gzip`, HTML text, PDF, DOCX and
PPTX by tests/document_files.py), a real Chroma server, real Flux executions, the real CLI
and the real default model. Bad input is real too: a sparse 200 MB file, a gzip bomb, a
symlink loop, a FIFO, a file rewritten while it is read.
"""

from __future__ import annotations

import codecs
import gzip
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from cli_inproc import run_cli
from document_files import make_docx, make_pdf, make_pptx
from user_shell import code_blocks, section

from flux_chroma.ingest import run_ingest
from flux_chroma.ingest.convert import Converted, Skipped, default_globs, read_file
from flux_chroma.ingest.plan import build_plan, iter_chunks, read_batch
from flux_chroma.ingest.spec import IngestJob
from flux_chroma.ingest.splitter import heading_paths

HANG_GUARD = 300  # seconds; only stops a broken test from hanging
TESTS = Path(__file__).parent

HTML = """<!DOCTYPE html><html><head><title>Pump Manual</title>
<style>body {visibility: visible} ul.no-bullet {list-style: none}</style>
<script>trackVisitor("secret-tracker")</script></head>
<body lang="en"><div class="nav-panel"><p>Next: Install, Previous: Top</p></div><div class="header"><p>Up: Pumps [Index]</p></div>
<nav><a href="index.html">Home</a> | <a href="toc.html">Contents</a></nav>
<main><h1>Priming the pump<a class="headerlink" href="#priming">¶</a></h1><p>Open the <a href="valve.html">bleed valve</a> and fill the chamber with water.</p>
<ul><li>Close the valve</li><li>Start the motor</li></ul><h2 id="max"><a class="header" href="#max">PUMP_MAX_FLOW</a></h2><p>Set PUMP_MAX_FLOW in litres.</p></main>
<footer role="contentinfo">Copyright boilerplate footer</footer></body></html>"""


def make_corpus(root: Path) -> Path:
    """One file of every supported format, in nested folders."""
    (root / "guide" / "setup").mkdir(parents=True)
    (root / "guide" / "setup" / "offline.md").write_text("# Offline install\n\nCopy the wheel to the air-gapped host.\n", encoding="utf-8")
    (root / "notes.txt").write_text("Plain notes about the quarterly audit.\n", encoding="utf-8")
    (root / "README").write_text("This package ships the pump controller firmware.\n", encoding="utf-8")
    (root / "guide" / "README.Debian").write_text("Debian packaging notes for the pump controller.\n", encoding="utf-8")
    (root / "guide" / "changelog.Debian.gz").write_bytes(gzip.compress(b"pump (1.2-1) unstable; urgency=low\n\n  * Fix the priming timeout.\n"))
    (root / "guide" / "manual.html").write_text(HTML, encoding="utf-8")
    (root / "guide" / "api.html.gz").write_bytes(gzip.compress(b"<html><head><title>API</title></head><body><p>The flow endpoint returns litres per minute.</p></body></html>"))
    make_pdf(root / "guide" / "race.pdf", [["The tortoise started the race early."], ["The hare slept under a tree on page two."]], title="Race Notes")
    make_docx(root / "handbook.docx", "Staff Handbook", [("Heading1", "Leave"), ("", "Employees take twenty days of leave."), ("Heading2", "Sick leave"), ("", "Call the office before nine.")])
    make_pptx(root / "deck.pptx", "Roadmap Deck", [("Roadmap", "Ship the converter in the third quarter"), ("Risks", "Scanned documents carry no text")])
    (root / "image.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(64))  # matches no default glob
    return root


def job_for(tenant: str, folder: Path, **source: Any) -> dict[str, Any]:
    return {"tenant": tenant, "collection": "formats", "sources": [{"kind": "files", "path": str(folder), **source}], "cleanup": "full"}


def records(raw_client: Any, tenant: str, **get: Any) -> dict[str, tuple[str, dict[str, Any]]]:
    got = raw_client.get_collection(f"{tenant}__formats").get(include=["documents", "metadatas"], **get)
    return {rid: (doc, meta) for rid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)}


def by_path(recs: dict[str, tuple[str, dict[str, Any]]]) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for doc, meta in recs.values():
        out.setdefault(meta["path"], []).append((doc, meta))
    return out


# --------------------------------------------------------------------------- formats


def test_every_format_is_ingested_as_text_with_its_metadata(tmp_path: Path, tenant: str, url: str, raw_client: Any) -> None:
    folder = make_corpus(tmp_path / "docs")
    ctx = run_ingest(job_for(tenant, folder))
    assert ctx.has_succeeded, ctx.output
    report = ctx.output
    assert report["skipped_file_count"] == 0 and report["skipped_files"] == []
    assert report["unmatched_files"] == 1  # image.png
    files = by_path(records(raw_client, tenant))
    assert sorted(files) == sorted(
        ["README", "deck.pptx", "guide/README.Debian", "guide/api.html.gz", "guide/changelog.Debian.gz", "guide/manual.html",
         "guide/race.pdf", "guide/setup/offline.md", "handbook.docx", "notes.txt"]
    )  # fmt: skip
    fmt = {path: chunks[0][1]["fc_format"] for path, chunks in files.items()}
    assert fmt == {
        "README": "txt", "deck.pptx": "pptx", "guide/README.Debian": "txt", "guide/api.html.gz": "html",
        "guide/changelog.Debian.gz": "txt", "guide/manual.html": "html", "guide/race.pdf": "pdf",
        "guide/setup/offline.md": "md", "handbook.docx": "docx", "notes.txt": "txt",
    }  # fmt: skip
    html = " ".join(doc for doc, _ in files["guide/manual.html"])
    assert "Priming the pump" in html and "bleed valve" in html and "Start the motor" in html
    # word for word (no `\_`): full-text search finds it; the heading's link (mdBook's class="header") is kept
    assert "## PUMP_MAX_FLOW" in html and "Set PUMP_MAX_FLOW in" in html
    for noise in ("<", "visibility", "secret-tracker", "Previous: Top", "Up: Pumps", "Contents", "boilerplate", "valve.html", "¶"):
        assert noise not in html, noise
    meta = files["guide/manual.html"][0][1]
    assert meta["fc_title"] == "Pump Manual" and meta["fc_dir"] == "guide" and meta["fc_dirs"] == ["guide"]
    assert meta["fc_conv"].startswith("bs4 ")
    assert files["guide/api.html.gz"][0][1]["fc_conv"].startswith("gzip+bs4 ")
    assert files["guide/changelog.Debian.gz"][0][1]["fc_conv"] == "gzip"
    assert "priming timeout" in files["guide/changelog.Debian.gz"][0][0]
    assert "fc_dirs" not in files["README"][0][1] and files["README"][0][1]["fc_dir"] == ""
    assert files["guide/setup/offline.md"][0][1]["fc_dirs"] == ["guide", "guide/setup"]
    pdf = sorted(files["guide/race.pdf"], key=lambda c: c[1]["fc_start"])
    assert pdf[0][1]["fc_title"] == "Race Notes" and pdf[0][1]["fc_conv"].startswith("pdfminer.six ")
    assert "tortoise" in " ".join(d for d, _ in pdf) and "hare" in " ".join(d for d, _ in pdf)
    assert files["handbook.docx"][0][1]["fc_title"] == "Staff Handbook"
    assert "twenty days of leave" in " ".join(d for d, _ in files["handbook.docx"])
    deck = " ".join(d for d, _ in files["deck.pptx"])
    assert files["deck.pptx"][0][1]["fc_title"] == "Roadmap Deck" and "third quarter" in deck and "Slide number" not in deck
    # the prefix filter on list metadata, on the real server (chromadb 1.5: $contains on a list)
    under = by_path(records(raw_client, tenant, where={"fc_dirs": {"$contains": "guide/setup"}}))
    assert sorted(under) == ["guide/setup/offline.md"]
    assert len(by_path(records(raw_client, tenant, where={"fc_dirs": {"$contains": "guide"}}))) == 6


def test_pdf_pages_and_slides_give_page_offsets(tmp_path: Path) -> None:
    pdf = read_file(str(make_pdf(tmp_path / "p.pdf", [["first page words"], ["second page words"], ["third page words"]])), "p.pdf")
    assert isinstance(pdf, Converted) and len(pdf.page_starts) == 3 and "\f" not in pdf.text
    assert [pdf.text[i:].split("\n")[0] for i in pdf.page_starts] == ["first page words", "second page words", "third page words"]
    # Justified prose: 5 points more per space made markitdown 0.1.9 lay each line out as a
    # Markdown table of word groups, and drop the page breaks (so every chunk was on page 1).
    lines = ["The pump must be primed before the motor starts or", "the seals run dry and fail within minutes."]
    justified = read_file(str(make_pdf(tmp_path / "j.pdf", [lines, lines], word_spacing=5)), "j.pdf")
    assert isinstance(justified, Converted) and "|" not in justified.text and len(justified.page_starts) == 2
    assert " ".join(justified.text.split()).count(" ".join(lines)) == 2
    deck = read_file(str(make_pptx(tmp_path / "d.pptx", "D", [("One", "alpha"), ("Two", "beta")])), "d.pptx")
    assert isinstance(deck, Converted) and [deck.text[i:].split("\n")[0] for i in deck.page_starts] == ["# One", "# Two"]


def test_pdf_running_headers_and_page_numbers_are_dropped(tmp_path: Path) -> None:
    """A chapter title over each page and the page numbers (valgrind's, nettle's and bzip2's
    manuals) cut every passage running over a page break; lines that merely recur stay."""
    pages = []
    for n in range(1, 6):
        lines = ["Chapter 2: Pumps and valves", "", f"Paragraph {n} of the pump chapter holds its own words.", f"Step {n}: check the seal."]
        lines += ["", "See also:"] if n % 2 else []  # at the same edge of pages 1, 3 and 5: not consecutive
        pages.append([*lines, "", f"Page {n + 10} of 15"])
    doc = read_file(str(make_pdf(tmp_path / "manual.pdf", pages)), "manual.pdf")
    assert isinstance(doc, Converted) and "Chapter 2" not in doc.text and "of 15" not in doc.text
    assert [doc.text[i:].split("\n", 2)[1] for i in doc.page_starts] == [f"Paragraph {n} of the pump chapter holds its own words." for n in range(1, 6)]
    assert doc.text.count("See also:") == 3 and all(f"Step {n}: check the seal." in doc.text for n in range(1, 6))


def test_pdf_ligatures_become_letters(tmp_path: Path) -> None:
    """TeX-made manuals (bzip2's, zlib's, fontconfig's: 500 words under /usr/share/doc) set "fi"
    and "fl" as one glyph; pdfminer gave "ﬁle", which a search for "file" did not match."""
    pdf = make_pdf(tmp_path / "manual.pdf", [["The compressed file flows in blocks."]], ligatures=True)
    doc = read_file(str(pdf), "manual.pdf")
    assert isinstance(doc, Converted) and "The compressed file flows in blocks." in doc.text


def test_a_pdf_gives_the_same_text_at_every_conversion(tmp_path: Path) -> None:
    """zlib's crc-doc.1.0.pdf.gz: pdfminer's default grouping breaks ties between equally distant
    text boxes by their id(), so a code listing came out in another order from one conversion to
    the next, and an ingest failed with "source changed" when a batch re-read the file. This is
    that listing's layout (line numbers beside code), scaled from 8 to 12 points. Boxes are now
    read in page order: top to bottom by their lower edge, then left to right."""
    listing = [(115.3, 456.8, "10 Crc CrcWordByWord Word data,"), *[(115.3, round(456.8 - 9.47 * i, 1), str(10 + i)) for i in range(1, 18)]]
    listing += [(154.6, 305.3, "// K-1-k times B plus D equals W over 8 minus 1 minus byte"), (155.4, 295.9, "for"), (201.2, 295.9, "i = 0;")]
    pdf = make_pdf(tmp_path / "crc.pdf", [[(x * 1.5, y * 1.5, text) for x, y, text in listing]])
    texts = set()
    for n in range(24):  # a copy per conversion: read_file keeps the last two conversions of a file
        copy = shutil.copy(pdf, tmp_path / f"crc{n}.pdf")
        doc = read_file(str(copy), "crc.pdf")
        assert isinstance(doc, Converted)
        texts.add(doc.text)
    assert len(texts) == 1, "the same file gave different texts"
    words = texts.pop().split()
    assert sorted(words) == sorted(" ".join(text for _, _, text in listing).split())
    assert words.index("//") < words.index("for") < words.index("i")  # boxes top to bottom, then left to right


def test_pdf_dot_leaders_and_their_page_numbers_are_dropped(tmp_path: Path) -> None:
    """A contents or index line's dot leader (bzip2's, nettle's, valgrind's manuals: 14% of the
    chunks of the PDFs under /usr/share/doc were more than 30% dots); dots in prose stay."""
    contents = ["Contents", "1. Introduction . . . . . . . . . . . . . . . 1", "2.3. DESCRIPTION", ". . . . . . . . . 3",
                "Valgrind FAQ ........................................ clxxviii", "sha512_update. . . . . . . . . 10"]
    prose = ["The pump waits..... then starts. Press . . . . . to step through.", "Versions 1.2.3.4.5 and ... work."]
    doc = read_file(str(make_pdf(tmp_path / "manual.pdf", [contents, prose])), "manual.pdf")
    assert isinstance(doc, Converted)
    assert [line for line in doc.text.splitlines() if line.strip()] == [
        "Contents", "1. Introduction", "2.3. DESCRIPTION", "Valgrind FAQ", "sha512_update", *prose,
    ]  # fmt: skip


def test_pdf_chunks_have_no_heading_path_from_lines_that_look_like_markdown(tmp_path: Path) -> None:
    """pdfminer's text has no headings, but it is split as Markdown: a line above a lone "=" (an
    equation in zlib's crc-doc) or a listing's "# comment" (valgrind's manual) was taken for a
    title and became the heading path of the chunks after it."""
    make_pdf(tmp_path / "manual.pdf", [["The sum of the two terms", "=", "x plus y, as shown.", "", "# make install", "Then run the tests."]])
    doc = read_file(str(tmp_path / "manual.pdf"), "manual.pdf")
    assert isinstance(doc, Converted) and heading_paths(doc.text)[1]  # Markdown would see headings
    chunks = [c for _, c in iter_chunks(IngestJob.from_dict(job_for("acme", tmp_path)))]
    assert chunks and [c.metadata.get("fc_heading") for c in chunks] == [None] * len(chunks)


def test_the_documents_extra_converts_offline(tmp_path: Path) -> None:
    """PDF, DOCX and PPTX convert in a process that has no network at all (a new network namespace)."""
    folder = make_corpus(tmp_path / "docs")
    script = (
        "import json, sys; from flux_chroma.ingest.convert import read_file\n"
        "out = {n: type(read_file(sys.argv[1] + '/' + n, n)).__name__ for n in ('guide/race.pdf', 'handbook.docx', 'deck.pptx', 'guide/manual.html')}\n"
        "print(json.dumps(out))"
    )
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", script, str(folder)], capture_output=True, text=True, timeout=HANG_GUARD, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"guide/race.pdf": "Converted", "handbook.docx": "Converted", "deck.pptx": "Converted", "guide/manual.html": "Converted"}


def test_without_the_extra_a_pdf_is_a_named_skip_with_the_install_command(tmp_path: Path) -> None:
    folder = make_corpus(tmp_path / "docs")
    script = (
        "import json, sys\n"
        "for name in ('markitdown', 'pdfminer', 'mammoth', 'pptx'): sys.modules[name] = None  # not installed\n"
        "from flux_chroma.ingest.convert import default_globs, read_file\n"
        "print(json.dumps([read_file(sys.argv[1] + '/guide/race.pdf', 'race.pdf').reason, default_globs()]))"
    )
    done = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True, timeout=HANG_GUARD, check=False)
    assert done.returncode == 0, done.stderr
    reason, globs = json.loads(done.stdout)
    assert 'pip install "flux-chroma[documents]"' in reason
    assert "**/*.pdf" not in globs and "**/*.pdf.gz" not in globs and "**/*.html" in globs
    assert "**/*.pdf" in default_globs()  # here the extra is installed


def test_default_globs_take_a_gzipped_pdf_with_its_pages(tmp_path: Path) -> None:
    """Debian ships manuals as ``.pdf.gz`` (valgrind, bzip2, nettle): the default globs took none."""
    folder = tmp_path / "doc"
    folder.mkdir()
    pdf = make_pdf(tmp_path / "manual.pdf", [["first page words"], ["second page words"]])
    (folder / "manual.pdf.gz").write_bytes(gzip.compress(pdf.read_bytes()))
    plan = build_plan(job_for("acme", folder))
    assert plan["docs"] == 1 and plan["unmatched_files"] == 0 and plan["skipped_file_count"] == 0
    doc = read_file(str(folder / "manual.pdf.gz"), "manual.pdf.gz")
    assert isinstance(doc, Converted) and doc.format == "pdf" and doc.converter.startswith("gzip+pdfminer.six")
    assert [doc.text[i:].split("\n")[0] for i in doc.page_starts] == ["first page words", "second page words"]


# --------------------------------------------------------------------------- bad input


def _changing(path: Path) -> subprocess.Popen[bytes]:
    """A process that rewrites the first bytes of ``path`` in place, without pause, until killed."""
    code = "import os, sys\nfd = os.open(sys.argv[1], os.O_WRONLY)\nwhile True:\n    os.pwrite(fd, os.urandom(8).hex().encode(), 0)\n"
    return subprocess.Popen([sys.executable, "-c", code, str(path)])


def make_bad_files(root: Path) -> dict[str, str]:
    """Files that cannot be ingested -> a phrase their skip reason must contain."""
    root.mkdir(parents=True)
    (root / "good.md").write_text("# Good\n\nThis file is fine.\n", encoding="utf-8")
    (root / "long-line.txt").write_bytes(b"x" * 1_000_000 + b"\n")
    with open(root / "huge.txt", "wb") as handle:  # 200 MB, sparse: costs no disk
        handle.truncate(200 * 1024 * 1024)
    with open(root / "bomb.txt.gz", "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb") as bomb:
        block = b"\n" * (1024 * 1024)
        for _ in range(80):  # expands to 80 MiB from about 80 KB
            bomb.write(block)
    os.symlink("loop-b.md", root / "loop-a.md")
    os.symlink("loop-a.md", root / "loop-b.md")
    os.symlink("nowhere.md", root / "dangling.md")
    os.mkfifo(root / "pipe.md")  # opening it for reading would block forever
    (root / "cyrillic.txt").write_bytes("Привет, мир".encode("cp1251"))  # no mark, not Latin script
    (root / "binary.txt").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    (root / "truncated.md.gz").write_bytes(gzip.compress(b"# cut short\n" * 100)[:40])
    make_pdf(root / "scan.pdf", [["a", "b", "c"]], text_layer=False)
    make_pdf(root / "locked.pdf", [["secret"]], locked=True)
    (root / "fake.docx").write_bytes(b"this is not a zip archive")
    make_pptx(root / "blank.pptx", "Blank deck", [])  # no slide, no text
    return {
        "long-line.txt": "run of 1,000,000 characters without whitespace",
        "huge.txt": "too large: 200.0 MiB",
        "bomb.txt.gz": "decompression bomb",
        "loop-a.md": "symlink loop",
        "loop-b.md": "symlink loop",
        "dangling.md": "broken symlink",
        "pipe.md": "not a regular file",
        "cyrillic.txt": "not valid utf-8",
        "binary.txt": "binary",
        "truncated.md.gz": "not a valid gzip file",
        "scan.pdf": "without a text layer",
        "locked.pdf": "encrypted PDF",
        "fake.docx": "not a valid DOCX file",
        "blank.pptx": "a PPTX file without text",
    }


def test_bad_files_are_named_skips_and_the_rest_is_planned(tmp_path: Path) -> None:
    expected = make_bad_files(tmp_path / "bad")
    started = time.monotonic()
    plan = build_plan(job_for("acme", tmp_path / "bad"))
    reasons = {item["path"]: item["reason"] for item in plan["skipped_files"]}
    assert sorted(reasons) == sorted(expected)
    for name, phrase in expected.items():
        assert phrase in reasons[name], (name, reasons[name])
    assert plan["skipped_file_count"] == len(expected) and plan["sources"][0]["skipped_files"] == len(expected)
    assert plan["docs"] == 1 and plan["chunks"] == 1
    assert time.monotonic() - started < HANG_GUARD


def test_a_byte_order_mark_names_the_encoding(tmp_path: Path) -> None:
    """UTF-16 as Windows tools write it (Notepad's "Unicode", PowerShell's ``>``) is text, not binary."""
    (tmp_path / "ps.txt").write_bytes("Backups run nightly at two.\r\n".encode("utf-16"))  # BOM, little-endian
    (tmp_path / "be.md").write_bytes(codecs.BOM_UTF16_BE + "# Restore\n\nAsk the on-call admin.\n".encode("utf-16-be"))
    (tmp_path / "page.html").write_bytes("<html><head><title>Wide</title></head><body><p>Saved as UTF-16.</p></body></html>".encode("utf-16"))
    (tmp_path / "sig.txt").write_bytes(codecs.BOM_UTF8 + b"UTF-8 with a signature.")
    (tmp_path / "zero.txt").write_bytes(b"looks like text\x00then a NUL")  # no mark: still binary
    job = IngestJob.from_dict(job_for("acme", tmp_path))
    plan = build_plan(job)
    assert [(s["path"], s["reason"][:6]) for s in plan["skipped_files"]] == [("zero.txt", "binary")]
    texts = {chunk.metadata["path"]: (chunk.text, chunk.metadata.get("fc_title")) for _, chunk in iter_chunks(job)}
    assert texts == {
        "ps.txt": ("Backups run nightly at two.", None),
        "be.md": ("# Restore\n\nAsk the on-call admin.", None),
        "page.html": ("Saved as UTF-16.", "Wide"),
        "sig.txt": ("UTF-8 with a signature.", None),
    }


def test_a_legacy_latin_file_is_read_as_windows_1252(tmp_path: Path) -> None:
    """Not UTF-8 but mostly ASCII, as Debian's older changelogs are: read, and said so in fc_conv."""
    entry = "ed (0.2-20) unstable; urgency=low\n\n  * Thanks to Fran\xe7ois Pinard and J\xfcrgen.\n"
    (tmp_path / "AUTHORS").write_bytes(entry.encode("latin-1"))
    (tmp_path / "changelog.gz").write_bytes(gzip.compress(entry.encode("cp1252") + b"  * \x93quoted\x94\n"))
    (tmp_path / "ok.txt").write_text("Already UTF-8: Jürgen.\n", encoding="utf-8")
    job = IngestJob.from_dict(job_for("acme", tmp_path))
    assert build_plan(job)["skipped_files"] == []
    got = {c.metadata["path"]: (c.text, c.metadata.get("fc_conv")) for _, c in iter_chunks(job)}
    assert got["AUTHORS"] == (entry.strip(), "cp1252")
    assert got["changelog.gz"] == (entry + "  * \u201cquoted\u201d", "gzip+cp1252")
    assert got["ok.txt"] == ("Already UTF-8: Jürgen.", None)
    explicit = IngestJob.from_dict(job_for("acme", tmp_path, encoding="latin-1"))
    assert {c.metadata["path"]: c.metadata.get("fc_conv") for _, c in iter_chunks(explicit)}["AUTHORS"] is None


def test_markdown_front_matter_gives_the_title_and_is_not_a_chunk(tmp_path: Path) -> None:
    """Jekyll/Hugo pages (systemd's docs): no chunk of `layout:` lines, and no key line read as a heading."""
    intro = "Many components take runtime parameters from the environment. " * 30
    jekyll = f"---\ntitle: Known Environment Variables\ncategory: Interfaces\nlayout: default\n---\n\n{intro}\n"
    (tmp_path / "ENVIRONMENT.md.gz").write_bytes(gzip.compress(jekyll.encode()))
    (tmp_path / "hugo.md").write_text('+++\ntitle = "Hugo Page"\ndraft = false\n+++\nBody of the page.\n', encoding="utf-8")
    (tmp_path / "rule.md").write_text("---\n\nA page that opens with a rule.\n\n---\n\nMore.\n", encoding="utf-8")
    chunks = [c for _, c in iter_chunks(IngestJob.from_dict(job_for("acme", tmp_path)))]
    first = {c.metadata["path"]: c for c in reversed(chunks)}
    assert first["ENVIRONMENT.md.gz"].text.startswith("Many components")
    assert {c.metadata.get("fc_heading") for c in chunks if c.metadata["path"] == "ENVIRONMENT.md.gz"} == {None}
    assert first["ENVIRONMENT.md.gz"].metadata["fc_title"] == "Known Environment Variables"
    assert (first["hugo.md"].text, first["hugo.md"].metadata["fc_title"]) == ("Body of the page.", "Hugo Page")
    assert first["rule.md"].text.startswith("---\n\nA page") and "fc_title" not in first["rule.md"].metadata
    assert not any("layout: default" in c.text for c in chunks)


def _info_manual(nodes: list[tuple[str, str]]) -> bytes:
    """A GNU Info file as makeinfo writes it: preamble, ``\\x1f``-separated nodes, tag table."""
    out = "This is pump.info, produced by makeinfo version 6.8 from pump.texi.\n\nINFO-DIR-SECTION Tools\n"
    for name, body in nodes:
        out += f"\n\x1f\nFile: pump.info,  Node: {name},  Next: Other,  Up: (dir)\n\n{body}\n"
    return (out + "\n\x1f\nTag Table:\nNode: Top\x7f100\n\x1f\nEnd Tag Table\n").encode()


RST = """\
==========
User Guide
==========

.. note:: Sphinx's own directives stay as they are.

Running pumps
=============

Prime the pump with ``pumpctl prime``; see :ref:`priming`.

Offline use
-----------

=====  =====
flag   means
=====  =====
-n     dry run
=====  =====

Short underline
-----

Stopping
========

Press stop.
"""


def test_restructuredtext_section_titles_are_headings(tmp_path: Path) -> None:
    """pip's, setuptools' and CPython's docs under /usr/share/doc (93 files, 471 titles): a title
    is underlined, maybe overlined, and each style is a level in the order of first use."""
    (tmp_path / "guide.rst.gz").write_bytes(gzip.compress(RST.encode()))
    doc = read_file(str(tmp_path / "guide.rst.gz"), "guide.rst.gz")
    assert isinstance(doc, Converted) and (doc.format, doc.title) == ("rst", "User Guide")
    assert heading_paths(doc.text)[1] == [
        "User Guide", "User Guide > Running pumps", "User Guide > Running pumps > Offline use", "User Guide > Running pumps > Short underline", "User Guide > Stopping",
    ]  # fmt: skip
    assert "=====  =====\nflag   means\n" in doc.text and ".. note::" in doc.text  # a simple table is no title
    chunks = [c for _, c in iter_chunks(IngestJob.from_dict(job_for("acme", tmp_path)))]
    assert [c.metadata.get("fc_heading") for c in chunks] == ["User Guide"] and chunks[0].metadata["fc_title"] == "User Guide"


def test_a_gnu_info_manual_is_its_nodes_text_with_headings(tmp_path: Path) -> None:
    """/usr/share/info: Texinfo's NUL-marked index nodes made 5 of 24 manuals look binary."""
    about = " ".join(["This manual documents the pump."] * 32)  # a chunk of its own
    top = f"Pump manual\n***********\n\n{about}\n\n* Menu:\n\n* Priming::  How to prime it."
    priming = "1.1 Priming\n===========\n\nOpen the valve before the pump starts; the gauge must read zero.\n\n     pump --prime"
    index = "Index\n*****\n\n\x00\x08[index\x00\x08]\n* Menu:\n\n* valve:  Priming.  (line 6)"
    (tmp_path / "pump.info-1.gz").write_bytes(gzip.compress(_info_manual([("Top", top), ("Priming", priming), ("Index", index)])))
    (tmp_path / "pump.info.gz").write_bytes(gzip.compress(b"This is pump.info.\n\x1f\nIndirect:\npump.info-1: 100\n"))
    converted = read_file(str(tmp_path / "pump.info-1.gz"), "pump.info-1.gz")
    assert isinstance(converted, Converted), converted
    assert (converted.format, converted.converter, converted.title) == ("info", "gzip+info", "Pump manual")
    assert converted.text == f"# Pump manual\n\n{about}\n\n" + priming.replace("1.1 Priming\n===========", "## 1.1 Priming")
    plan = build_plan(job_for("acme", tmp_path))  # the default globs take both, nothing is skipped
    assert (plan["docs"], plan["skipped_file_count"], plan["unmatched_files"]) == (2, 0, 0)
    chunks = [c for _, c in iter_chunks(IngestJob.from_dict(job_for("acme", tmp_path)))]
    assert [c.metadata.get("fc_heading") for c in chunks if "valve" in c.text] == ["Pump manual > 1.1 Priming"]


MAN_PAGE = r""".\" pumpctl's manual page
.TH PUMPCTL 1 "March 2026" "pumpctl 1.0" "User Commands"
.SH NAME
pumpctl \- control the water pumps of one station
.SH SYNOPSIS
.B pumpctl
[\fB\-\-max\-flow\fR \fIRATE\fR] \fISTATION\fR
.SH DESCRIPTION
.B pumpctl
starts and stops the pumps of one station.
.SS "Flow limits"
.TP
\fB\-\-max\-flow\fR \fIRATE\fR
Never pump more than RATE litres per second, whatever the station's reservoir holds, the
operator's dashboard shows or the maintenance schedule says about the valves.
"""


def test_a_man_page_is_its_text_as_man_shows_it(tmp_path: Path) -> None:
    """/usr/share/man: a page was read as its roff source (``\\fB\\-\\-max\\-flow\\fR``), so a
    sentence or an option pasted from ``man`` was not found in it."""
    (tmp_path / "man1").mkdir()
    (tmp_path / "man1" / "pumpctl.1.gz").write_bytes(gzip.compress(MAN_PAGE.encode()))
    (tmp_path / "man1" / "pumpd.1").write_text(".so man1/pumpctl.1\n")  # a page that includes another: no chunks
    (tmp_path / "changelog.1").write_text("Version 1: the first release.\n")  # numbered, but no roff
    converted = read_file(str(tmp_path / "man1" / "pumpctl.1.gz"), "man1/pumpctl.1.gz")
    assert isinstance(converted, Converted), converted
    assert (converted.format, converted.converter[:11]) == ("man", "gzip+groff ")
    assert converted.title == "pumpctl - control the water pumps of one station"
    assert converted.text.startswith("## NAME\npumpctl - control the water pumps of one station\n\n## SYNOPSIS\n")
    assert "## DESCRIPTION\npumpctl starts and stops the pumps of one station.\n\n### Flow limits\n--max-flow RATE\n" in converted.text
    assert "Never pump more than RATE litres per second, whatever the station's reservoir holds, the operator's" in converted.text
    assert "PUMPCTL(1)" not in converted.text and "\\f" not in converted.text  # no running header, no roff
    plan = build_plan(job_for("acme", tmp_path))  # the default globs take all three
    assert (plan["docs"], plan["skipped_file_count"], plan["unmatched_files"]) == (3, 0, 0)
    chunks = [c for _, c in iter_chunks(IngestJob.from_dict(job_for("acme", tmp_path)))]
    assert {c.metadata["path"]: c.metadata["fc_format"] for c in chunks} == {"changelog.1": "txt", "man1/pumpctl.1.gz": "man"}
    assert heading_paths(converted.text)[1] == ["NAME", "SYNOPSIS", "DESCRIPTION", "DESCRIPTION > Flow limits"]
    no_groff = tmp_path / "bin"
    no_groff.mkdir()
    script = f"from flux_chroma.ingest.convert import read_file; print(read_file({str(tmp_path / 'man1' / 'pumpctl.1.gz')!r}, 'pumpctl.1.gz'))"
    done = subprocess.run([sys.executable, "-c", script], env={"PATH": str(no_groff)}, capture_output=True, text=True, timeout=HANG_GUARD, check=False)
    assert "rendering it needs groff" in done.stdout, done.stderr  # a machine without groff


def test_an_html_redirect_page_is_a_document_without_chunks(tmp_path: Path) -> None:
    """The Rust docs under ~/.rustup: 15,626 pages (22 of the book's 462) only redirect, and
    "Redirecting to... ch19-02-refutability.html." came second for "refutability"."""
    (tmp_path / "ch18-02-refutability.html").write_text(
        '<html><head><title>Redirecting...</title><meta http-equiv="refresh" content="0; URL=ch19-02-refutability.html">'
        '</head><body><p>Redirecting to... <a href="ch19-02-refutability.html">ch19-02-refutability.html</a>.</p></body></html>'
    )
    (tmp_path / "macro.old.html.gz").write_bytes(gzip.compress(b"<meta content='0;url=macro.new.html' HTTP-EQUIV=Refresh><p>Redirecting</p>"))
    (tmp_path / "ch19-02-refutability.html").write_text(f"<html><head><title>Refutability</title></head><body><h2>Refutability</h2><p>{'Patterns come in two forms. ' * 3}</p></body></html>")
    (tmp_path / "status.html").write_text(f"<meta http-equiv=\"refresh\" content=\"60; url=status.html\"><p>{'The pumps of station 4 run. ' * 40}</p>")
    assert read_file(str(tmp_path / "macro.old.html.gz"), "macro.old.html.gz") == Converted("", "html", "gzip+html redirect")
    plan = build_plan(job_for("acme", tmp_path))  # no skip: a redirect is like a link
    assert (plan["docs"], plan["skipped_file_count"]) == (4, 0)
    chunks = [c for _, c in iter_chunks(IngestJob.from_dict(job_for("acme", tmp_path)))]
    assert {c.metadata["path"] for c in chunks} == {"ch19-02-refutability.html", "status.html"}  # a long page keeps its text


def test_a_file_rewritten_while_it_is_read_is_skipped(tmp_path: Path) -> None:
    target = tmp_path / "live.txt"
    target.write_bytes(b"word " * (8 * 1024 * 1024))  # 40 MiB: reading it takes a while
    writer = _changing(target)
    try:
        time.sleep(0.5)  # let the writer start
        results = [read_file(str(target), "live.txt") for _ in range(5)]
    finally:
        writer.kill()
        writer.wait()
    assert any(isinstance(r, Skipped) and "changed while it was read" in r.reason for r in results), results
    assert all(isinstance(r, Skipped) and "changed while it was read" in r.reason or isinstance(r, Converted) for r in results)


def test_a_skip_decided_at_plan_time_is_replayed_by_the_batch(tmp_path: Path) -> None:
    """A file skipped by the plan stays skipped when a batch re-reads its slice, even once it is fixed."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a.md", "c.md"):
        (folder / name).write_text(f"# {name}\n\nText of {name}.\n", encoding="utf-8")
    (folder / "b.md").write_bytes(b"\x7fELF\x00")  # binary, between the two
    job = IngestJob.from_dict(job_for("acme", folder))
    plan = build_plan(job)
    assert [s["path"] for s in plan["skipped_files"]] == ["b.md"]
    (ref,) = plan["batches"]
    assert ref["exclude"] == [1]
    (folder / "b.md").write_text("# b.md\n\nNow valid.\n", encoding="utf-8")  # fixed after the plan
    assert [c.metadata["path"] for c in read_batch(job, ref)] == ["a.md", "c.md"]  # same digest, b.md unread
    assert [c.metadata["path"] for _, c in iter_chunks(job)] == ["a.md", "b.md", "c.md"]  # the next plan takes it


# --------------------------------------------------------------------------- the CLI


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)  # in-process: what it prints and exits with is under test, not the process


def test_cli_names_skipped_files_and_exits_5(tmp_path: Path, tenant: str, url: str, raw_client: Any) -> None:
    folder = make_corpus(tmp_path / "docs")
    (folder / "guide" / "broken.txt").write_bytes(b"\xff\xfe\x00binary")
    (folder / "guide" / "old.html").write_text("<html><body>superseded page</body></html>", encoding="utf-8")
    (tmp_path / "reference").mkdir()  # Debian's -doc folders link their API pages this way
    (tmp_path / "reference" / "api.md").write_text("# API\n\nLinked, not entered.\n", encoding="utf-8")
    (folder / "guide" / "reference").symlink_to(tmp_path / "reference", target_is_directory=True)
    done = cli("ingest", str(folder), "--collection", "formats", "--tenant", tenant, "--exclude", "**/old.html", "--url", url)
    assert done.returncode == 5, done.stderr
    assert "skipped guide/broken.txt" in done.stderr and "binary" in done.stderr
    assert "not entered guide/reference (docs-" in done.stderr and f"(-> {tmp_path / 'reference'})" in done.stderr
    assert "1 file skipped, 1 matched no glob (e.g. image.png), 1 excluded, 1 symlinked folder not entered" in done.stdout
    paths = {meta["path"] for _, meta in records(raw_client, tenant).values()}
    assert "guide/old.html" not in paths and "guide/broken.txt" not in paths and "guide/race.pdf" in paths
    as_json = cli("ingest", str(folder), "--collection", "formats", "--tenant", tenant, "--exclude", "**/old.html", "--url", url, "--json")
    assert as_json.returncode == 5, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["skipped_files"] == [{"source": report["sources"][0]["id"], "path": "guide/broken.txt", "reason": report["skipped_files"][0]["reason"]}]
    assert report["skipped_file_count"] == 1 and report["unmatched_files"] == 1 and report["excluded_files"] == 1
    assert report["symlinked_folders"] == [{"source": report["sources"][0]["id"], "path": "guide/reference", "target": str(tmp_path / "reference")}]
    assert report["symlinked_folder_count"] == 1 and "guide/reference/api.md" not in paths
    assert report["unmatched_sample"] == ["image.png"]
    (folder / "guide" / "broken.txt").unlink()
    clean = cli("ingest", str(folder), "--collection", "formats", "--tenant", tenant, "--exclude", "**/old.html", "--url", url)
    assert clean.returncode == 0, clean.stderr
    assert "skipped guide/" not in clean.stderr and "file skipped" not in clean.stdout


@pytest.mark.parametrize("name", ["README", "NEWS.Debian.gz", "COPYING", "copyright", "changelog.gz", "TODO.Debian", "LICENSE.txt", "LICENSE-MIT", "ChangeLog-2013.gz", "README_MISSING_SYSCALL_OR_IOCTL"])
def test_default_globs_take_extension_less_names(tmp_path: Path, name: str) -> None:
    folder = tmp_path / "pkg"
    folder.mkdir()
    data = f"Text of {name}.\n".encode()
    (folder / name).write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    plan = build_plan(job_for("acme", folder))
    assert plan["docs"] == 1 and plan["unmatched_files"] == 0 and plan["skipped_file_count"] == 0


def test_the_file_format_examples_of_ingestion_md_run_and_print_what_they_say() -> None:
    """Each ``print(...)  # expected`` line of the file-formats section prints ``expected``."""
    page = (TESTS.parent / "docs" / "ingestion.md").read_text(encoding="utf-8")
    blocks = code_blocks(section(page, "File formats\n"), "python")
    assert len(blocks) == 2
    for block in blocks:
        expected = [line.rsplit("   # ", 1)[1] for line in block.splitlines() if line.startswith("print(")]
        done = subprocess.run([sys.executable, "-c", block], capture_output=True, text=True, timeout=HANG_GUARD, check=False)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines() == expected


@pytest.mark.parametrize(
    ("source", "match"),
    [
        ({"exclude": "/etc/*"}, "exclude .* must stay inside"),
        ({"exclude": ["../x"]}, "exclude .* must stay inside"),
        ({"exclude": [3]}, "exclude must be a pattern or a list of patterns"),
        ({"glob": []}, "glob must be a pattern or a list of patterns"),
    ],
    ids=["absolute-exclude", "dotdot-exclude", "non-string-exclude", "empty-glob"],
)
def test_bad_patterns_are_configuration_errors(tmp_path: Path, source: dict[str, Any], match: str) -> None:
    from flux_chroma.errors import ConfigurationError

    with pytest.raises(ConfigurationError, match=match):
        IngestJob.from_dict(job_for("acme", tmp_path, **source))


def test_files_in_folders_no_pattern_reaches_count_as_unmatched(tmp_path: Path) -> None:
    """``--glob '*'`` takes the top folder only; the files below it are named, not silently dropped."""
    (tmp_path / "lic").mkdir()
    for rel in ("a.md", "lic/Apache-2.0", "lic/GPL-3"):
        (tmp_path / rel).write_text(f"text of {rel}\n", encoding="utf-8")
    plan = build_plan(job_for("acme", tmp_path, glob=["*"]))
    assert (plan["docs"], plan["unmatched_files"], plan["unmatched_sample"]) == (1, 2, ["lic/Apache-2.0", "lic/GPL-3"])
    assert build_plan(job_for("acme", tmp_path, glob=["**/*"]))["docs"] == 3


def test_a_single_named_file_counts_no_unmatched_neighbours(tmp_path: Path) -> None:
    for name in ("a.md", "b.md", "c.bin"):
        (tmp_path / name).write_text(f"text of {name}\n", encoding="utf-8")
    plan = build_plan(job_for("acme", tmp_path, glob=["a.md"]))
    assert plan["docs"] == 1 and plan["unmatched_files"] == 0
    assert build_plan(job_for("acme", tmp_path, glob=["*.md"]))["unmatched_files"] == 1
