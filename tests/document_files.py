"""Real PDF, DOCX and PPTX files made on the spot (helpers for the format tests and bench/formats.py).

* PDF: written object by object (Helvetica text, one content stream per page, a correct
  cross-reference table), so pdfminer/pdfium read it like any other PDF. Variants: a page
  with drawings only (no text layer) and a file whose user password is unknown.
* DOCX: the minimal Office Open XML package (content types, relationships, a document part
  with heading and paragraph styles, core properties with a title), zipped by :mod:`zipfile`.
* PPTX: python-pptx (installed with markitdown's pptx extra).
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from xml.sax.saxutils import escape

__all__ = ["make_pdf", "make_docx", "make_pptx"]


def _pdf_text(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(
    path: Path, pages: list[list[str | tuple[float, float, str]]], *, title: str | None = None, text_layer: bool = True, locked: bool = False, word_spacing: int = 0,
    ligatures: bool = False,
) -> Path:
    """Write a PDF with one page per entry of ``pages`` (each a list of lines).

    Args:
        path: Where to write it.
        pages: Lines of text per page; an ``(x, y, text)`` item is set at that point (in
            points from the bottom left) and the lines after it follow from there.
        title: The document information dictionary's ``/Title``.
        text_layer: False draws rectangles instead of text (a scan-like page without text).
        locked: Adds a standard security handler whose user password is unknown.
        word_spacing: Points added to each space (``Tw``), as justified (set) prose has.
        ligatures: Sets "fi" and "fl" as one glyph each whose text is U+FB01 and U+FB02 (a
            ``ToUnicode`` map), as TeX-made manuals do (bzip2's, zlib's).

    Returns:
        ``path``.
    """
    objects: list[bytes] = []
    kids = []
    for page_lines in pages:
        if text_layer:
            ops = ["BT", "/F1 12 Tf", "14 TL", f"{word_spacing} Tw", "72 720 Td"]
            for item in page_lines:
                x, y, line = item if isinstance(item, tuple) else (None, None, item)
                text = _pdf_text(line)
                if ligatures:
                    text = text.replace("fi", "\\001").replace("fl", "\\002")
                ops.append(f"({text}) Tj T*" if x is None else f"1 0 0 1 {x} {y} Tm ({text}) Tj T*")
            ops.append("ET")
        else:
            ops = [f"{72 + 20 * i} {700 - 20 * i} 100 10 re f" for i in range(len(page_lines))]
        stream = "\n".join(ops).encode("latin-1")
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
        content = len(objects) + 2  # object numbers start at 1; 1 = catalog, 2 = pages come first
        kids.append(content)
    # Layout: 1 catalog, 2 pages, 3 font, 4 info, then (content, page) pairs.
    body: list[bytes] = [b"", b"", b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>", b""]
    page_ids = []
    for stream_obj in objects:
        body.append(stream_obj)
        content_id = len(body)
        body.append(b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % content_id)
        page_ids.append(len(body))
    body[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    body[1] = b"<< /Type /Pages /Kids [" + b" ".join(b"%d 0 R" % p for p in page_ids) + b"] /Count %d >>" % len(page_ids)
    body[3] = b"<< /Title (" + _pdf_text(title or "").encode("latin-1") + b") /Producer (flux-chroma tests) >>"
    if ligatures:
        cmap = b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Ligatures def 1 begincodespacerange <00> <FF> endcodespacerange 2 beginbfchar <01> <FB01> <02> <FB02> endbfchar endcmap CMapName currentdict /CMap defineresource pop end end"
        body.append(b"<< /Length %d >>\nstream\n" % len(cmap) + cmap + b"\nendstream")
        body[2] = body[2][:-2] + b"/ToUnicode %d 0 R >>" % len(body)
    if locked:
        body.append(b"<< /Filter /Standard /V 1 /R 2 /O <" + b"11" * 32 + b"> /U <" + b"22" * 32 + b"> /P -4 >>")
    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, obj in enumerate(body, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + obj + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(body) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    trailer = b"<< /Size %d /Root 1 0 R /Info 4 0 R" % (len(body) + 1)
    if locked:
        trailer += b" /Encrypt %d 0 R /ID [<%s> <%s>]" % (len(body), b"ab" * 16, b"ab" * 16)
    out += b"trailer\n" + trailer + b" >>\nstartxref\n%d\n%%%%EOF\n" % xref
    path.write_bytes(bytes(out))
    return path


_CONTENT_TYPES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/word/document.xml" ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>
<Override PartName="/docProps/core.xml" ContentType="application/vnd.openxmlformats-package.core-properties+xml"/>
</Types>"""
_RELS = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">
<Relationship Id="rId1" Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument" Target="word/document.xml"/>
<Relationship Id="rId2" Type="http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties" Target="docProps/core.xml"/>
</Relationships>"""
_CORE = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<cp:coreProperties xmlns:cp="http://schemas.openxmlformats.org/package/2006/metadata/core-properties" xmlns:dc="http://purl.org/dc/elements/1.1/">
<dc:title>{title}</dc:title></cp:coreProperties>"""
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"


def make_docx(path: Path, title: str, blocks: list[tuple[str, str]]) -> Path:
    """Write a DOCX of ``(style, text)`` paragraphs (style ``"Heading1"``, ``"Heading2"`` or ``""``).

    Args:
        path: Where to write it.
        title: The core properties' ``dc:title``.
        blocks: The paragraphs.

    Returns:
        ``path``.
    """
    paragraphs = []
    for style, text in blocks:
        props = f'<w:pPr><w:pStyle w:val="{style}"/></w:pPr>' if style else ""
        paragraphs.append(f"<w:p>{props}<w:r><w:t xml:space=\"preserve\">{escape(text)}</w:t></w:r></w:p>")
    document = f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document xmlns:w="{_W}"><w:body>{"".join(paragraphs)}</w:body></w:document>'
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        archive.writestr("word/document.xml", document)
        archive.writestr("docProps/core.xml", _CORE.format(title=escape(title)))
    return path


def make_pptx(path: Path, title: str, slides: list[tuple[str, str]]) -> Path:
    """Write a PPTX with one title-and-content slide per ``(heading, body)``.

    Args:
        path: Where to write it.
        title: The core properties' title.
        slides: Slide headings and bodies.

    Returns:
        ``path``.
    """
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = title
    for heading, body in slides:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = heading
        slide.placeholders[1].text = body
    deck.save(str(path))
    return path
