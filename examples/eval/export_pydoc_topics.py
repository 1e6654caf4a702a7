"""Write Python's own documentation topics (``pydoc_data.topics``) as one text file each.

The topics are the Python Language Reference pages that ``help("with")`` shows, shipped
inside every CPython installation (standard library package ``pydoc_data``; PSF licence).
They are a real corpus nobody in this project wrote, present on every machine that runs
flux-chroma, so the labelled sets next to this script can be measured anywhere:

    python examples/eval/export_pydoc_topics.py /tmp/pydoc-topics
    flux-chroma ingest /tmp/pydoc-topics -c pydoc --source-id pydoc --tenant acme

Document ids are then ``pydoc/<topic>.txt`` (the ``--source-id`` makes them the same on
every machine). Only the text decides the files: re-running writes the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path


def export(folder: Path) -> list[Path]:
    """Write ``<topic>.txt`` for every topic into ``folder`` (created); return the paths."""
    from pydoc_data.topics import topics

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name in sorted(topics):
        path = folder / f"{name}.txt"
        path.write_text(topics[name].strip() + "\n", encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    """Entry point: ``export_pydoc_topics.py FOLDER``."""
    if len(sys.argv) != 2:
        sys.exit("usage: export_pydoc_topics.py FOLDER")
    written = export(Path(sys.argv[1]))
    print(f"wrote {len(written)} topics of Python {sys.version.split()[0]} to {sys.argv[1]}")


if __name__ == "__main__":
    main()
