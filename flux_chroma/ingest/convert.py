"""File formats: one file's bytes -> its text (Markdown for converted formats), or a named skip.

Text and Markdown are read as they are; ``.gz`` files are decompressed (up to
:data:`MAX_EXPANDED_MB`) and converted by their inner name; HTML becomes its main text as
Markdown (BeautifulSoup + markdownify), a GNU Info manual its nodes' text with headings, a man
page its text as ``man`` shows it (rendered by groff, when installed); PDF becomes its text by
pdfminer.six (page numbers and running headers dropped), DOCX and PPTX go through
``markitdown`` (both in the ``flux-chroma[documents]`` extra). A file that cannot be read or
converted never stops a job: :func:`read_file` returns a :class:`Skipped` with a reason a
person can act on. All offline.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import gzip
import io
import itertools
import os
import re
import shutil
import stat
import subprocess
import zipfile
import zlib
from dataclasses import dataclass, replace
from functools import cache, lru_cache
from importlib.metadata import PackageNotFoundError, version
from importlib.util import find_spec
from pathlib import PurePosixPath
from typing import Any

__all__ = [
    "Converted", "Skipped", "read_file", "format_of", "default_globs", "documents_available",
    "MAX_FILE_MB", "MAX_EXPANDED_MB", "MAX_RUN", "LEGACY_MAX_NON_ASCII", "PLAIN_NAMES", "INSTALL_HINT",
]  # fmt: skip

MAX_FILE_MB = 64
"""A file larger than this (on disk) is skipped: ``too large``."""
MAX_EXPANDED_MB = 64
"""A ``.gz`` file, or a DOCX/PPTX archive, that expands past this is skipped: a decompression bomb."""
LEGACY_MAX_NON_ASCII = 0.3
"""With ``utf-8`` (the default), a text that is not valid UTF-8 is read as Windows-1252 (Latin-1's
superset: old changelogs, Windows notes) when at most this share of its bytes is non-ASCII, as
in Latin-script text; with more, it is another script (Cyrillic, CJK) and is skipped."""
MAX_RUN = 20_000
"""A text with a run of more characters than this without whitespace is skipped (encoded or binary data, not prose)."""
INSTALL_HINT = 'pip install "flux-chroma[documents]"'
PLAIN_NAMES = (
    "README", "NEWS", "CHANGELOG", "ChangeLog", "changelog", "CHANGES", "HISTORY", "COPYING",
    "LICENSE", "LICENCE", "copyright", "AUTHORS", "CONTRIBUTORS", "CREDITS", "THANKS", "INSTALL",
    "TODO", "BUGS", "FAQ", "NOTICE",
)  # fmt: skip
"""Extension-less file names read as plain text, also with a suffix (``README.Debian``, ``changelog.Debian.gz``)
or a variant after ``-`` or ``_`` (``LICENSE-MIT``, ``ChangeLog-2013.gz``, ``README_MISSING_SYSCALL_OR_IOCTL``)."""

_FORMATS = {
    ".md": "md", ".markdown": "md", ".txt": "txt", ".text": "txt", ".rst": "rst", ".html": "html",
    ".htm": "html", ".xhtml": "html", ".info": "info", ".pdf": "pdf", ".docx": "docx", ".pptx": "pptx",
}  # fmt: skip
_DOCUMENTS = ("pdf", "docx", "pptx")
_DROP_TAGS = ("script", "style", "noscript", "template", "nav", "aside", "form", "iframe", "svg", "button", "head")
_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")  # content, whatever their classes say
_IN_PAGE = re.compile("^#")  # a link to an anchor of its own page
_GLYPH = re.compile(r"[^\w\s]")  # one symbol: a permalink's ¶ (Sphinx), § (rustdoc), # (Node.js)
_NAV_CLASS = re.compile(r"(^|[-_\s])nav|^(header|footer)$", re.IGNORECASE)  # texinfo: nav-panel, header
_REFRESH: dict[str, Any] = {"http-equiv": re.compile(r"^\s*refresh\s*$", re.IGNORECASE), "content": re.compile(r"\burl\s*=", re.IGNORECASE)}
_REDIRECT_TEXT = 1000  # characters: a page this short with a refresh to a URL is a redirect (rustdoc's: under 200)
_LONG_RUN = re.compile(rf"\S{{{MAX_RUN + 1}}}")
_MIB = 1024 * 1024
_FRONT_MATTER = re.compile(r"\A(---|\+\+\+)[ \t]*\r?\n(.{0,8192}?)\r?\n\1[ \t]*(?:\r?\n|\Z)", re.DOTALL)
_FRONT_KEY = re.compile(r"^[A-Za-z_][\w.-]*[ \t]*[:=]", re.MULTILINE)
_FRONT_TITLE = re.compile(r"""^title[ \t]*[:=][ \t]*(["']?)(.*?)\1[ \t]*$""", re.MULTILINE)
_SLIDE = re.compile(r"<!-- Slide number: \d+ -->\n?")
_INFO_PART = re.compile(r"\.info-\d+$", re.IGNORECASE)  # a split manual's parts: find.info-1, find.info-2
_INFO_INDEX = b"\x00\x08[index\x00\x08]"
_INFO_MARKER = re.compile(rb"\x00\x08\[[^\x00]{0,4096}\x00\x08\]")  # Texinfo's index and image markers
_INFO_NODE = re.compile(r"\A\n?File: [^\n]*?Node: ?([^,\n]*)[^\n]*\n")
_INFO_TITLE = re.compile(r"^([^\n]*\S)[ \t]*\n(([*=.-])\3+)[ \t]*$", re.MULTILINE)  # a title, its underline, its character
_RST_TITLE = re.compile(  # reStructuredText: a blank line, an optional overline, the title, its underline
    r"(?:\A|(?<=\n\n))(?:([!-/:-@\[-`{-~])\1{2,}[ \t]*\n)?([^\n]*\S)[ \t]*\n(([!-/:-@\[-`{-~])\4{2,})[ \t]*(?=\n|\Z)"
)
_INFO_LEVELS = {"*": "#", "=": "##", "-": "###", ".": "####"}
_EDGE_LINES = 2  # lines at each edge of a PDF page that may be a running header, footer or page number
_FURNITURE_PAGES = 3  # consecutive pages with a line at the same edge that make it furniture
_LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl", "\ufb05": "st", "\ufb06": "st"})
_LEADER = re.compile(r"[ \t]*(?:\.[ \t]?){5,}[ \t]*(?:\d{1,4}|(?i:[ivxlc]{1,8}))?[ \t]*(?=[\n\f]|\Z)")  # " . . . . 12"
_PAGE_NUMBER = re.compile(r"(?i:page )?\d{1,4}(?: ?(?:/|of) ?\d{1,4})?|[ivxlc]{1,6}")  # 12, Page 3 of 9, xiv
_MAN_SUFFIX = re.compile(r"\.[1-9][a-z]{0,8}$")  # a man page's section: ls.1, CA.pl.1ssl, Carp.3perl
_ROFF = re.compile(rb"^(?:\.(?:TH|Dd|so)\s|\.\\\"|'\\\")", re.MULTILINE)  # .TH (man), .Dd (mdoc), .so, comments
_ROFF_ALIAS = re.compile(rb"\A(?:\.\\\"[^\n]*\n)*\.so\s")  # a page that only includes another
_MAN_SUBSECTION = re.compile(r" {3}\S")  # groff indents subsection titles 3 columns, text 7
# groff as man runs it, for reading: no hyphenation, ragged right, one line per paragraph
_GROFF = ("-mandoc", "-t", "-Tutf8", "-Kutf-8", "-P-cbou", "-rHY=0", "-dAD=l", "-rLL=2000n")


@dataclass(frozen=True)
class Converted:
    """A file read and converted to text.

    Args:
        text: The document text (Markdown for HTML, Info, man pages, PDF, DOCX and PPTX).
        format: ``"md"``, ``"txt"``, ``"html"``, ``"info"``, ``"man"``, ``"pdf"``, ``"docx"`` or
            ``"pptx"`` (a ``.gz`` file's inner format).
        converter: What produced the text and its version, e.g. ``"gzip+markitdown 0.1.9"``
            (``""`` for text read as it is): part of the document's identity.
        title: The document's own title, if any.
        page_starts: Character offsets in ``text`` where each page (or slide) starts, else ``()``.
    """

    text: str
    format: str
    converter: str = ""
    title: str | None = None
    page_starts: tuple[int, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """A file left out of the job; ``reason`` says why and what to do about it."""

    reason: str


class _Skip(Exception):
    """Raised inside this module; :func:`read_file` returns it as a :class:`Skipped`."""


@cache
def documents_available() -> bool:
    """Whether the ``flux-chroma[documents]`` extra is installed (checked without importing it)."""
    return all(find_spec(name) is not None for name in ("markitdown", "pdfminer", "mammoth", "pptx"))


def default_globs() -> list[str]:
    """The ``glob`` of a ``files`` source that names none.

    Markdown, text, reStructuredText, HTML, GNU Info and man pages, PDF/DOCX/PPTX when
    :func:`documents_available` (each also gzipped), a split Info manual's parts, and the names
    of :data:`PLAIN_NAMES`.
    """
    documents = documents_available()
    readable = [s for s, fmt in _FORMATS.items() if documents or fmt not in _DOCUMENTS]
    globs = [f"**/*{s}{gz}" for gz in ("", ".gz") for s in readable]  # Debian gzips manuals: valgrind's .pdf.gz
    globs += ["**/*.info-[0-9]*", "**/*.[1-9]", "**/*.[1-9].gz", "**/*.[1-9][a-z]*"]  # Info parts, man pages
    for name in PLAIN_NAMES:
        globs += [f"**/{name}", f"**/{name}.*", f"**/{name}[-_]*"]
    return globs


def format_of(name: str) -> tuple[str, bool]:
    """``(format, gzipped)`` of a file name; an unknown suffix is ``"txt"`` (skipped if binary).

    Example:
        >>> format_of("doc/changelog.Debian.gz")
        ('txt', True)
    """
    gzipped = name.lower().endswith(".gz")
    inner = name[:-3] if gzipped else name
    if _INFO_PART.search(inner):
        return "info", gzipped
    if _MAN_SUFFIX.search(inner):
        return "man", gzipped
    return _FORMATS.get(PurePosixPath(inner).suffix.lower(), "txt"), gzipped


def _size(n: int) -> str:
    return f"{n / _MIB:.1f} MiB" if n >= _MIB else f"{n:,} bytes"


def _read_bytes(path: str) -> bytes:
    """Read a regular file whole, refusing what would block, loop or change under the read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Skip("a symlink loop (too many levels of symbolic links)") from None
        if exc.errno == errno.ENOENT:
            raise _Skip("a broken symlink" if os.path.islink(path) else "disappeared while the job ran") from None
        if exc.errno == errno.EACCES:
            raise _Skip("permission denied: give the job's user read access") from None
        raise _Skip(f"cannot be opened ({exc.strerror})") from None
    with os.fdopen(fd, "rb") as handle:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode):
            raise _Skip("not a regular file (a FIFO, socket or device)")
        if before.st_size > MAX_FILE_MB * _MIB:
            raise _Skip(f"too large: {_size(before.st_size)}, over the {MAX_FILE_MB} MiB limit per file; split it")
        data = handle.read(MAX_FILE_MB * _MIB + 1)
        after = os.fstat(fd)
    if len(data) > MAX_FILE_MB * _MIB:
        raise _Skip(f"too large: over the {MAX_FILE_MB} MiB limit per file (it grew while it was read)")
    if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns) or len(data) != after.st_size:
        raise _Skip("changed while it was read (a file still being written?); run the job again when it is complete")
    return data


def _gunzip(data: bytes) -> bytes:
    limit = MAX_EXPANDED_MB * _MIB
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(data)) as stream:
            while block := stream.read(1 * _MIB):
                out.write(block)
                if out.tell() > limit:
                    raise _Skip(f"a decompression bomb: expands past the {MAX_EXPANDED_MB} MiB limit (from {_size(len(data))})")
    except (OSError, EOFError, zlib.error) as exc:
        raise _Skip(f"not a valid gzip file ({exc})") from None
    return out.getvalue()


_ASCII = bytes(range(128))
_BOMS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"), (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def _bom_encoding(data: bytes) -> str | None:
    """The encoding a UTF-16/UTF-32 byte-order mark names (Notepad, PowerShell's ``>``), else ``None``."""
    return next((name for bom, name in _BOMS if data.startswith(bom)), None)


def _decode(data: bytes, encoding: str) -> tuple[str, str]:
    """``(text, converter)``; the converter is ``"cp1252"`` for a legacy file, else ``""``."""
    marked = _bom_encoding(data)  # the file's own mark outweighs the source's encoding
    if marked is not None:
        with contextlib.suppress(UnicodeDecodeError):
            return data.decode(marked), ""
    try:
        name = codecs.lookup(encoding).name  # one spelling: "UTF8", "latin-1" -> "utf-8", "iso8859-1"
    except LookupError:
        raise _Skip(f"unknown encoding {encoding!r}") from None
    nul = data.find(b"\x00", 0, 65536)
    if nul >= 0 and name in ("utf-8", "iso8859-1", "ascii"):
        raise _Skip(f"binary (a NUL byte at byte {nul}); exclude it, or convert it to text")
    try:
        return data.decode(name, errors="strict").removeprefix("\ufeff"), ""
    except UnicodeDecodeError as exc:
        if name == "utf-8" and len(data.translate(None, _ASCII)) <= LEGACY_MAX_NON_ASCII * len(data):
            return data.decode("cp1252", errors="replace"), "cp1252"
        raise _Skip(f"not valid {encoding} ({exc.reason} at byte {exc.start}); convert it, or set 'encoding' on the source") from None


def _front_matter(text: str) -> tuple[str, str | None]:
    """Markdown without its YAML (``---``) or TOML (``+++``) front matter, and the ``title`` it gives.

    Jekyll, Hugo and MkDocs pages start with one (systemd's docs do); left in, it is a chunk of
    ``layout: default`` lines, and CommonMark reads its closing ``---`` as a heading underline.
    """
    match = _FRONT_MATTER.match(text)
    if match is None or not _FRONT_KEY.search(match.group(2)):
        return text, None
    title = _FRONT_TITLE.search(match.group(2))
    return text[match.end() :].lstrip("\r\n"), (title.group(2).strip() or None) if title else None


def _info_heading(match: re.Match[str]) -> str:
    title, underline, char = match.groups()
    if abs(len(underline) - len(title)) > 2:  # a rule under a line, not a title's underline
        return match.group(0)
    return f"{_INFO_LEVELS[char]} {title.strip()}"


def _info(data: bytes, encoding: str) -> tuple[str, str, str | None]:
    """A GNU Info manual (makeinfo's output): ``(Markdown, converter, title)``.

    Each node's text, its underlined titles as headings. The preamble, node headers (``File:
    ..., Node: ..., Next: ...``), menus, index nodes and the tag table guide the ``info``
    reader and are dropped; Texinfo marks index nodes and images with NUL bytes, so the file
    would otherwise look binary. A file without nodes is read as text.
    """
    if b"\x1f" not in data:
        return *_decode(data, encoding), None
    nodes = [node for node in data.split(b"\x1f")[1:] if _INFO_INDEX not in node]
    text, decoded = _decode(_INFO_MARKER.sub(b"", b"\x1f".join(nodes)), encoding)
    parts, title = [], None
    for node in text.split("\x1f"):
        header = _INFO_NODE.match(node)
        if header is None:  # the tag table, a split manual's table of parts, local variables
            continue
        body = _INFO_TITLE.sub(_info_heading, node[header.end() :].split("\n* Menu:", 1)[0]).strip("\n")
        if header.group(1).strip() == "Top" and body.startswith("# "):
            title = body.split("\n", 1)[0][2:]
        parts.append(body)
    return "\n\n".join(parts), "+".join(filter(None, (decoded, "info"))), title


def _rst(text: str) -> tuple[str, str | None]:
    """reStructuredText's section titles as Markdown headings: ``(text, first title)``.

    A title is underlined (and maybe overlined) with one punctuation character repeated, as
    long as the title or at least 4 times; each style (character, with or without an
    overline) is a level in the order the document first uses it, as docutils decides. The
    rest stays as it is: Sphinx's directives and roles (``.. code-block::``, ``:ref:``) stay
    text, where docutils, which does not know them, would report errors.
    """
    levels: dict[tuple[str, bool], int] = {}
    titles: list[str] = []

    def heading(match: re.Match[str]) -> str:
        over, title, underline, char = match.groups()
        inset = title != title.lstrip()
        short = len(underline) < min(len(title.strip()), 4)  # docutils: a warning from 4 characters, else text
        if (over and over != char) or short or (inset and not over) or title.lstrip().startswith(".. "):
            return match.group(0)
        level = levels.setdefault((char, bool(over)), min(len(levels) + 1, 6))
        titles.append(title.strip())
        return f"{'#' * level} {title.strip()}"

    text = _RST_TITLE.sub(heading, text)
    return text, titles[0] if titles else None


@cache
def _groff() -> tuple[str, str] | None:
    """groff's path and ``"groff <version>"`` (part of a man page's converter), or ``None``."""
    path = shutil.which("groff")
    if path is None:
        return None
    done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False)
    return path, "groff " + (done.stdout.split("\n", 1)[0].rsplit(" ", 1)[-1] or "unknown")


def _man(data: bytes, encoding: str) -> tuple[str, str, str | None]:
    """A man page rendered as ``man`` shows it: ``(Markdown, converter, title)``.

    groff renders it; the running header and footer are dropped, section titles (``NAME``,
    ``DESCRIPTION``: groff's only unindented lines) become ``##`` headings and subsection
    titles ``###``. The title is the NAME line (``ls - list directory contents``). A page that
    only includes another (``.so``) has no text of its own, as a split Info manual's main file.
    """
    if _ROFF_ALIAS.match(data):  # .so man1/other.1: like a link, its text is another page's
        return "", "man .so", None
    groff = _groff()
    if groff is None:
        raise _Skip("a man page: rendering it needs groff (e.g. apt install groff-base)")
    text, decoded = _decode(data, encoding)
    try:
        done = subprocess.run([groff[0], *_GROFF], input=text.encode(), capture_output=True, timeout=60, check=False)
    except subprocess.TimeoutExpired:
        raise _Skip("groff took more than 60 s to render this man page") from None
    lines = done.stdout.decode("utf-8", "replace").strip("\n").splitlines()[1:-1]  # header and footer
    if done.returncode != 0 or not "".join(lines).strip():
        raise _Skip(f"groff could not render it: {done.stderr.decode(errors='replace').strip()[:200] or 'no text'}")
    body = [
        "## " + line.strip() if line[:1].strip() else "### " + line.strip() if _MAN_SUBSECTION.match(line)
        else line.rstrip().removeprefix(" " * 7) for line in lines
    ]  # fmt: skip
    title = next((line.strip() for line in body if line.strip() and not line.startswith("#")), None)
    return "\n".join(body).strip("\n"), "+".join(filter(None, (decoded, groff[1]))), title


def _check_prose(text: str) -> str:
    match = _LONG_RUN.search(text)
    if match is not None:
        run = len(re.match(r"\S*", text[match.start() :]).group(0))  # type: ignore[union-attr]
        raise _Skip(
            f"a run of {run:,} characters without whitespace at character {match.start():,} (encoded or binary "
            f"data, not prose; the limit is {MAX_RUN:,}); exclude it"
        )
    return text


@cache
def _version(dist: str) -> str:
    try:
        return version(dist)
    except PackageNotFoundError:
        return "?"


def _html(data: bytes) -> tuple[str, str | None, bool]:
    """``(Markdown, title, whether the page is a redirect)``: a ``<meta http-equiv="refresh">``
    to a URL and under :data:`_REDIRECT_TEXT` characters of text of its own."""
    from bs4 import BeautifulSoup, Tag
    from markdownify import MarkdownConverter

    soup = BeautifulSoup(data, "html.parser")
    title = soup.title.get_text(" ", strip=True) if soup.title else None
    refresh = soup.find("meta", attrs=_REFRESH) is not None
    for tag in soup.find_all(_DROP_TAGS):
        tag.decompose()
    navigation = [
        t for t in soup.find_all(True) if isinstance(t, Tag) and (
            t.get("role") in ("navigation", "banner", "contentinfo")
            or any(_NAV_CLASS.search(c) for c in (t.get("class") or []))
        ) and not (t.name in _HEADINGS or t.find_parent(_HEADINGS))  # mdBook: <h2><a class="header">
    ]  # fmt: skip
    for tag in navigation:
        if not tag.decomposed:
            tag.decompose()
    main = soup.find("main") or soup.find(None, {"role": "main"}) or soup.find("body") or soup
    for link in main.find_all("a", href=_IN_PAGE):  # permalinks
        if isinstance(link, Tag) and _GLYPH.fullmatch(link.get_text(strip=True)):
            link.decompose()
    text = MarkdownConverter(heading_style="ATX", strip=["a", "img"], bullets="-", escape_underscores=False).convert_soup(main)
    text = re.sub(r"\n{3,}", "\n\n", re.sub(r"[ \t]+\n", "\n", text)).strip()
    text = re.sub(r"\A(?:-{3,}\s*)+", "", text)  # a rule left where the navigation was
    return text, title or None, refresh and len(text) < _REDIRECT_TEXT


def _office_title(data: bytes, what: str) -> str | None:
    """The ``dc:title`` of a DOCX/PPTX, refusing one that is not a zip or expands past the limit."""
    import defusedxml.ElementTree as SafeTree

    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise _Skip(
            f"not a valid {what} file (not a zip archive; an old binary .doc/.ppt, or encrypted?)"
        ) from None
    with archive:
        total = sum(info.file_size for info in archive.infolist())
        if total > MAX_EXPANDED_MB * _MIB:
            raise _Skip(
                f"a decompression bomb: its parts expand to {_size(total)}, over the "
                f"{MAX_EXPANDED_MB} MiB limit"
            )
        try:
            root = SafeTree.fromstring(archive.read("docProps/core.xml"))
        except (KeyError, zipfile.BadZipFile, SafeTree.ParseError):
            return None
    node = root.find("{http://purl.org/dc/elements/1.1/}title")
    return (node.text or "").strip() or None if node is not None else None


def _pdf_title(data: bytes) -> str | None:
    """The ``Title`` of a PDF, refusing an encrypted or broken one."""
    import pypdfium2

    try:
        document = pypdfium2.PdfDocument(data)
    except pypdfium2.PdfiumError as exc:
        if "password" in str(exc).lower():
            raise _Skip("an encrypted PDF (it needs a password); decrypt it first") from None
        raise _Skip(f"not a valid PDF ({exc})") from None
    try:
        return str(document.get_metadata_dict().get("Title") or "").strip() or None
    finally:
        document.close()


@cache
def _markitdown() -> Any:
    from markitdown import MarkItDown

    return MarkItDown(enable_plugins=False)


def _document_text(data: bytes, fmt: str) -> tuple[str, str | None, str]:
    """The text, title (if the converter finds one) and converter of a PDF, DOCX or PPTX file.

    A PDF's text is pdfminer's, pages separated by form feeds: not markitdown's PDF converter,
    which since 0.1.4 lays out a page as a Markdown table when its words sit in columns, as
    justified prose does (61% of libtasn1's 127,000-character manual became one- or two-word
    cells), and then joins the pages without their separators. A page's text boxes are read
    top to bottom, left to right (``boxes_flow=None``): pdfminer's default grouping breaks
    ties between equally distant boxes by their ``id()``, so a code listing's boxes came out
    in another order from one conversion to the next (zlib's ``crc-doc.1.0.pdf.gz``), and the
    batch that re-read the file found it "changed since planned".
    """
    if fmt == "pdf":
        from pdfminer.high_level import extract_text
        from pdfminer.layout import LAParams

        text = extract_text(io.BytesIO(data), laparams=LAParams(boxes_flow=None))
        return text, None, f"pdfminer.six {_version('pdfminer.six')}"
    from markitdown import StreamInfo

    result = _markitdown().convert_stream(io.BytesIO(data), stream_info=StreamInfo(extension=f".{fmt}"))
    return str(result.markdown or ""), result.title, f"markitdown {_version('markitdown')}"


def _without_furniture(pages: list[str]) -> list[str]:
    """``pages`` without their running headers, footers and page numbers.

    A line among a page's first or last :data:`_EDGE_LINES` non-empty ones is furniture when
    it is at the same edge of :data:`_FURNITURE_PAGES` consecutive pages, this one included
    (every page number counts as the same line): ``12``, ``Page 3 of 9``, ``Chapter 3:
    Reference`` over each page of its chapter. Left in, they cut a passage that runs over a
    page break in two, and a running title makes every page's chunks look alike.
    """
    split = [page.split("\n") for page in pages]
    edges: list[dict[int, tuple[str, str]]] = []  # per page: line index -> (edge, shape)
    for lines in split:
        filled = [i for i, line in enumerate(lines) if line.strip()]
        marks = {i: ("bottom", _shape(lines[i])) for i in filled[-_EDGE_LINES:]}
        marks.update({i: ("top", _shape(lines[i])) for i in filled[:_EDGE_LINES]})
        edges.append(marks)
    where: dict[tuple[str, str], set[int]] = {}
    for n, marks in enumerate(edges):
        for key in marks.values():
            where.setdefault(key, set()).add(n)
    out = []
    for n, (page, lines, marks) in enumerate(zip(pages, split, edges, strict=True)):
        drop = {i for i, key in marks.items() if _in_run(n, where[key])}
        out.append("\n".join(line for i, line in enumerate(lines) if i not in drop) if drop else page)
    return out


def _in_run(n: int, pages: set[int]) -> bool:
    """Whether page ``n`` is one of :data:`_FURNITURE_PAGES` consecutive ``pages``."""
    return any(all(m in pages for m in range(start, start + _FURNITURE_PAGES)) for start in range(n - _FURNITURE_PAGES + 1, n + 1))


def _shape(line: str) -> str:
    """A line with its spacing normalised; every page number is one shape."""
    text = " ".join(line.split())
    return "#" if _PAGE_NUMBER.fullmatch(text) else text


def _document(data: bytes, fmt: str) -> tuple[str, str | None, tuple[int, ...], str]:
    if not documents_available():
        raise _Skip(f"a {fmt.upper()} file: converting it needs the documents extra ({INSTALL_HINT})")
    own_title = _pdf_title(data) if fmt == "pdf" else _office_title(data, fmt.upper())
    try:
        text, title, converter = _document_text(data, fmt)
    except Exception as exc:  # noqa: BLE001 - the converters and their parsers raise many types; each is a skip
        raise _Skip(f"{fmt.upper()} conversion failed ({type(exc).__name__}: {str(exc).strip()[:200]})") from None
    pages: tuple[int, ...] = ()
    if fmt == "pdf":  # typeset ligatures as letters: "ﬁle" matched neither "file" nor the model's vocabulary;
        # a contents or index line's dot leader and page number go: 14% of the chunks of the seven PDFs
        # under /usr/share/doc were more than 30% dots (bzip2's 28%, nettle's 30%)
        text = _LEADER.sub("", text.translate(_LIGATURES))
        if "\f" in text:  # pdfminer separates pages with form feeds: keep offsets, drop the character
            parts = _without_furniture(text.split("\f"))
            if len(parts) > 1 and not parts[-1].strip():
                last = parts.pop()
                parts[-1] += "\n" + last
            pages = tuple(itertools.accumulate((len(part) + 1 for part in parts[:-1]), initial=0))
            text = "\n".join(parts)
    if fmt == "pptx":  # markitdown marks slides with comments: slide offsets are the pages
        parts = _SLIDE.split(text)
        text, starts = "", []
        for part in parts[1:] if len(parts) > 1 else parts:
            starts.append(len(text))
            text += part.strip("\n") + "\n\n"
        pages = tuple(starts) if len(parts) > 1 else ()
    if not text.strip():
        raise _Skip(
            "a PDF without a text layer (scanned pages?); OCR it first" if fmt == "pdf"
            else f"a {fmt.upper()} file without text (only pictures, or empty?)"
        )  # fmt: skip
    return text, title or own_title, pages, converter


def _convert(data: bytes, fmt: str, encoding: str) -> Converted:
    if fmt == "man" and not _ROFF.search(data, 0, 4096):
        fmt = "txt"  # a numbered file that is no man page: changelog.1
    if fmt in ("md", "txt", "rst"):
        text, converter = _decode(data, encoding)
        text, title = _front_matter(text) if fmt == "md" else _rst(text) if fmt == "rst" else (text, None)
        return Converted(_check_prose(text), fmt, converter, title)
    if fmt in ("info", "man"):
        text, converter, title = (_info if fmt == "info" else _man)(data, encoding)
        return Converted(_check_prose(text), fmt, converter, title)
    if fmt == "html":
        if b"\x00" in data[:65536] and _bom_encoding(data) is None:  # BeautifulSoup reads the mark
            raise _Skip("binary (NUL bytes in an HTML file)")
        text, title, redirect = _html(data)
        if redirect:  # like a link: its text is another page's
            return Converted("", fmt, "html redirect")
        return Converted(_check_prose(text), fmt, f"bs4 {_version('beautifulsoup4')}/markdownify {_version('markdownify')}", title)
    text, title, pages, converter = _document(data, fmt)
    return Converted(_check_prose(text), fmt, converter, title, pages)


def _read(path: str, name: str, encoding: str, identity: tuple[int, ...] | None) -> Converted:
    """Raises :class:`_Skip`, so a skip is never cached; ``identity`` only keys :data:`_recent`."""
    fmt, gzipped = format_of(name)
    data = _read_bytes(path)
    if gzipped:
        data = _gunzip(data)
    converted = _convert(data, fmt, encoding)
    if gzipped:
        converted = replace(converted, converter="+".join(filter(None, ("gzip", converted.converter))))
    return converted


_recent = lru_cache(maxsize=2)(_read)
"""Conversions kept per process: a batch starts with the file the previous batch ended with."""


def read_file(path: str, name: str, encoding: str = "utf-8") -> Converted | Skipped:
    """Read and convert one file, or say why it is skipped.

    ``name`` (its relative path) decides the format (:func:`format_of`); ``encoding`` is that
    of text and Markdown. The last two conversions are kept per process, keyed by the file's
    identity, size and times: consecutive batches sharing a long file convert it once.
    """
    try:
        info = os.stat(path)
        identity = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)
    except OSError:
        identity = None
    try:
        return (_read if identity is None else _recent)(path, name, encoding, identity)
    except _Skip as skip:
        return Skipped(str(skip))
