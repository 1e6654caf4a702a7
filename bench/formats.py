"""Documents per second per file format, and a whole-folder ingestion that accounts for every file.

Conversion rate (the default): every file the default globs take under ``--root`` (default
``/usr/share/doc``: the OS's own READMEs, copyright files, gzipped changelogs, HTML manuals and
PDFs), plus DOCX and PPTX files made by ``tests/document_files.py`` (``--made N`` of each; no
such files ship with the OS), read and converted once each by
:func:`flux_chroma.ingest.convert.read_file`. Per format: files, skipped files, input MiB,
output characters, seconds, docs/s and MiB/s. Conversion only: no chunking, no embedding.

``--ingest``: runs a real ingestion job (a Chroma server started here, Flux state in a temp
folder) over the whole ``--root`` with the default globs and prints the report's counts: docs,
chunks, skipped files with their reasons, files no glob matched, and the wall time. The
``bench-hash`` stand-in embeds (this mode measures reading, converting, planning and writing,
not the model), so chunks are sized by the character fallback of a function without a tokenizer.

    python bench/formats.py                      # docs/s per format over /usr/share/doc
    python bench/formats.py --ingest             # ingest all of /usr/share/doc, every file accounted for
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _made_documents(folder: Path, count: int) -> None:
    """``count`` DOCX and PPTX files of a few paragraphs each (the OS ships none)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from document_files import make_docx, make_pptx

    words = ["the", "pump", "controller", "primes", "the", "chamber", "before", "the", "motor", "starts", "and", "logs", "each", "run"]
    for i in range(count):
        paragraphs = [("Heading1", f"Section {i}")] + [("", " ".join(words[(i + j) % 7 :] * 4)) for j in range(12)]
        make_docx(folder / f"made-{i:03d}.docx", f"Made document {i}", paragraphs)
        make_pptx(folder / f"made-{i:03d}.pptx", f"Made deck {i}", [(f"Slide {j}", " ".join(words[j % 5 :])) for j in range(6)])


def conversion_rates(root: Path, made: int) -> dict[str, Any]:
    """Convert every default-glob file under ``root`` (plus made DOCX/PPTX) and time each format."""
    from flux_chroma.ingest.convert import Converted, format_of, read_file
    from flux_chroma.ingest.sources import file_census, normalize_source

    jobs: list[tuple[Path, str]] = []
    census = file_census(normalize_source({"kind": "files", "path": str(root)}, 0))
    jobs += [(root / rel, rel) for rel in census.matched]
    with tempfile.TemporaryDirectory(prefix="flux-chroma-formats-") as tmp:
        if made:
            _made_documents(Path(tmp), made)
            jobs += [(p, p.name) for p in sorted(Path(tmp).iterdir())]
        rows: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        reasons: Counter[str] = Counter()
        for path, rel in jobs:
            fmt, gz = format_of(rel)
            size = os.stat(path).st_size if os.path.isfile(path) else 0
            started = time.perf_counter()
            result = read_file(str(path), rel)
            fmt = result.format if isinstance(result, Converted) else fmt  # changelog.1 is text, not a man page
            row = rows[f"{fmt}.gz" if gz else fmt]
            row["seconds"] += time.perf_counter() - started
            row["files"] += 1
            row["input_mib"] += size / 2**20
            if isinstance(result, Converted):
                row["chars"] += len(result.text)
            else:
                row["skipped"] += 1
                reasons[result.reason.split(" (")[0].split(";")[0][:60]] += 1
    table = {}
    for key, row in sorted(rows.items()):
        seconds = max(row["seconds"], 1e-9)
        table[key] = {
            "files": int(row["files"]),
            "skipped": int(row["skipped"]),
            "input_mib": round(row["input_mib"], 2),
            "output_chars": int(row["chars"]),
            "seconds": round(seconds, 2),
            "docs_per_s": round(row["files"] / seconds, 1),
            "mib_per_s": round(row["input_mib"] / seconds, 2),
        }
    return {"root": str(root), "unmatched_files": census.unmatched, "formats": table, "skip_reasons": dict(reasons.most_common())}


def ingest_all(root: Path) -> dict[str, Any]:
    """Ingest everything the default globs take under ``root`` into a fresh Chroma server."""
    with tempfile.TemporaryDirectory(prefix="flux-chroma-formats-") as tmp:
        work = Path(tmp)
        os.environ["FLUX_HOME"] = str(work / "flux")
        os.environ["FLUX_DATABASE_URL"] = f"sqlite:///{work / 'flux' / 'flux.db'}"
        os.environ["FLUX_CHROMA_CACHE_DIR"] = str(work / "cache")
        (work / "flux").mkdir()
        import bench.stand_in  # noqa: F401 - registers bench-hash with chromadb
        from flux_chroma import ChromaServer
        from flux_chroma.ingest import run_ingest

        job = {
            "tenant": "bench",
            "collection": "os-docs",
            "sources": [{"kind": "files", "path": str(root)}],
            "embedding_function": {"name": "bench-hash"},
            "options": {"cache": False},
        }
        with ChromaServer(work / "chroma", port=0) as server:
            os.environ["FLUX_CHROMA_URL"] = server.url
            started = time.perf_counter()
            ctx = run_ingest(job)
            seconds = time.perf_counter() - started
        if not ctx.has_succeeded:
            return {"failed": str(ctx.output)}
        report = ctx.output
        listed = report["docs"] + report["skipped_file_count"]
        return {
            "root": str(root),
            "seconds": round(seconds, 1),
            "files_taken_by_the_globs": listed,
            "docs": report["docs"],
            "chunks": report["chunks"],
            "added": report["added"],
            "skipped_file_count": report["skipped_file_count"],
            "unmatched_files": report["unmatched_files"],
            "skipped_files": report["skipped_files"],
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", type=Path, default=Path("/usr/share/doc"), help="folder to read (default /usr/share/doc)")
    parser.add_argument("--made", type=int, default=20, help="DOCX and PPTX files to make (each)")
    parser.add_argument("--ingest", action="store_true", help="ingest the whole folder instead (bench-hash embeddings)")
    args = parser.parse_args(argv)
    result = ingest_all(args.root) if args.ingest else conversion_rates(args.root, args.made)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
