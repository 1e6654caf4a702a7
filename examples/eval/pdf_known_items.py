"""Known-item questions over real PDF manuals: does a passage of a PDF page come back?

Copies the two PDF manuals Debian ships here (libtasn1-doc's and shared-mime-info's) to
``OUT/corpus``, with libtasn1's HTML reference beside them (the same functions, documented
twice), and writes ``OUT/labels.jsonl``: from every page of each PDF, up to 3 sentences or
6-word phrases chosen as ``make_known_items.py`` chooses them, asked back word for word;
relevant: the PDF, and any page of the corpus with the same passage. A page's text is read by
pdfium (``pypdfium2``), in the order the page draws it: no converter flux-chroma has used.

    python examples/eval/pdf_known_items.py pdf-items
    flux-chroma ingest pdf-items/corpus -c pdfitems --source-id pdf --tenant quality-demo
    flux-chroma eval pdf-items/labels.jsonl -c pdfitems --tenant quality-demo
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pypdfium2
from bs4 import BeautifulSoup
from make_known_items import _normal, asked_back, candidates

PDFS = ("/usr/share/doc/libtasn1-doc/libtasn1.pdf", "/usr/share/doc/shared-mime-info/shared-mime-info-spec.pdf")
HTML = "/usr/share/gtk-doc/html/libtasn1"


def main(out: Path) -> None:
    corpus, pages = out / "corpus", out / "pages"
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(HTML, corpus / "libtasn1-reference")
    texts = {f"pdf/libtasn1-reference/{p.name}": _normal(BeautifulSoup(p.read_bytes(), "html.parser").get_text(" ")) for p in sorted((corpus / "libtasn1-reference").glob("*.html"))}
    for pdf in map(Path, PDFS):
        shutil.copy(pdf, corpus / pdf.name)
        document = pypdfium2.PdfDocument(pdf.read_bytes())
        text = [document[i].get_textpage().get_text_range().replace("\r\n", "\n") for i in range(len(document))]
        texts[f"pdf/{pdf.name}"] = _normal(" ".join(text))
        for number, page in enumerate(text, 1):  # one folder per PDF, one file per page
            if candidates(page):
                (pages / pdf.stem).mkdir(parents=True, exist_ok=True)
                (pages / pdf.stem / f"{number:03d}.txt").write_text(page, encoding="utf-8")
    asked = asked_back(pages, "pages", texts, out / "labels.jsonl")
    print(f"{asked} questions from {len(list(pages.rglob('*.txt')))} PDF pages in {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
