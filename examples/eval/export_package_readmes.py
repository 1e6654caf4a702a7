"""Write the long descriptions (READMEs) of this Python environment's installed packages.

Every installed distribution carries its README as the body of its ``METADATA`` file
(``importlib.metadata``). They are real documents nobody in this project wrote, under each
package's own licence, so they are not copied into the repository: this script rebuilds the
corpus from the environment that runs it.

    python examples/eval/export_package_readmes.py /tmp/package-readmes
    flux-chroma ingest /tmp/package-readmes -c readmes --source-id readmes --tenant acme

Document ids are then ``readmes/<distribution>.md`` (lower case, ``-`` and ``.`` as ``_``).
Only descriptions of 1,500 to 15,000 characters are written (short stubs say nothing; long
manuals would dominate the corpus), and never flux-chroma's own. The labelled set
``readmes-natural.jsonl`` was written against flux-chroma's locked environment; a
distribution missing here is reported by ``flux-chroma eval`` as an unknown document.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

MIN_CHARS = 1_500
MAX_CHARS = 15_000
_SKIP = {"flux_chroma"}


def doc_name(distribution: str) -> str:
    """The file name a distribution's README is written under (``"PyYAML"`` -> ``"pyyaml.md"``)."""
    return re.sub(r"[-.]+", "_", distribution.lower()) + ".md"


def export(folder: Path) -> list[Path]:
    """Write ``<distribution>.md`` for every qualifying installed distribution; return the paths."""
    folder.mkdir(parents=True, exist_ok=True)
    texts: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        body = dist.metadata.get_payload()  # the description, after the headers
        if not name or not isinstance(body, str):
            continue
        file = doc_name(name)
        text = body.strip()
        if file[:-3] in _SKIP or not MIN_CHARS <= len(text) <= MAX_CHARS:
            continue
        texts[file] = text + "\n"
    written = []
    for file in sorted(texts):
        path = folder / file
        path.write_text(texts[file], encoding="utf-8")
        written.append(path)
    return written


def main() -> None:
    """Entry point: ``export_package_readmes.py FOLDER``."""
    if len(sys.argv) != 2:
        sys.exit("usage: export_package_readmes.py FOLDER")
    written = export(Path(sys.argv[1]))
    print(f"wrote {len(written)} package READMEs to {sys.argv[1]}")


if __name__ == "__main__":
    main()
