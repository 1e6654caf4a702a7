"""Known-item questions over the GNU Info manuals of this machine (/usr/share/info).

Copies every ``*.info*.gz`` there to ``OUT/corpus`` and writes ``OUT/labels.jsonl``: passages
chosen as ``make_known_items.py`` chooses them, from every 10 nodes of each manual (index nodes
left out), asked back word for word; relevant: every manual file whose text holds the passage.
The nodes are cut from the raw files here, at their ``\\x1f`` separators: no converter
flux-chroma has used.

    python examples/eval/info_known_items.py info-items
    flux-chroma ingest info-items/corpus -c infoitems --source-id info --tenant quality-demo
    flux-chroma eval info-items/labels.jsonl -c infoitems --tenant quality-demo
"""

from __future__ import annotations

import gzip
import shutil
import sys
from pathlib import Path

from make_known_items import _normal, asked_back

INFO = Path("/usr/share/info")
NODES_PER_FILE = 10


def main(out: Path) -> None:
    corpus, nodes = out / "corpus", out / "nodes"
    shutil.rmtree(out, ignore_errors=True)
    corpus.mkdir(parents=True)
    texts = {}
    for manual in sorted(INFO.glob("*.info*.gz")):
        shutil.copy(manual, corpus / manual.name)
        raw = gzip.decompress(manual.read_bytes()).decode("utf-8", errors="replace")
        texts[f"info/{manual.name}"] = _normal(raw)
        body = [n.split("\n", 2)[-1] for n in raw.split("\x1f")[1:] if n.lstrip("\n").startswith("File:") and "\x00\x08[index" not in n]
        for start in range(0, len(body), NODES_PER_FILE):
            (nodes / manual.name).mkdir(parents=True, exist_ok=True)
            (nodes / manual.name / f"{start:04d}.txt").write_text("\n".join(body[start : start + NODES_PER_FILE]), encoding="utf-8")
    asked = asked_back(nodes, "nodes", texts, out / "labels.jsonl")
    print(f"{asked} questions from {len(texts)} Info files in {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
