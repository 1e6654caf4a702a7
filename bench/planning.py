"""Cutting long Markdown documents: in runs of whole sections (what flux-chroma does) vs whole.

Corpus: the Markdown files (``*.md``) under the given folders (default /usr/share/doc) longer
than :data:`~flux_chroma.ingest.splitter.SECTION_RUN` characters: the documents the runs
change. Both sides use the default model's tokenizer and 200-token chunks, one file at a
time, alternating which side goes first; nothing is cached between them.

Run: ``.venv/bin/python -m bench.planning [FOLDER ...]``; with ``--plan``, instead plan an
ingestion job of the folders (what ``flux-chroma ingest`` does before its first batch) and
print its time and the process's peak RSS.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

from flux_chroma.ingest.chunking import ChunkingOptions
from flux_chroma.ingest.splitter import SECTION_RUN, Chunker, heading_paths
from flux_chroma.ingest.tokens import default_model_tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="*", default=["/usr/share/doc"])
    parser.add_argument("--plan", action="store_true", help="plan a job of the folders; print time and peak RSS")
    args = parser.parse_args()
    if args.plan:
        plan_only(args.folders)
        return
    files = sorted(
        p for folder in args.folders for p in Path(folder).rglob("*.md")
        if p.is_file() and not p.is_symlink() and p.stat().st_size > SECTION_RUN
    )
    tokens = default_model_tokens()
    rows = []
    for i, path in enumerate(files):
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) <= SECTION_RUN:
            continue
        chunker = Chunker(ChunkingOptions(), tokens)  # a fresh one: no remembered cuts
        whole_splitter = chunker._splitters[0]

        def runs(text: str = text, chunker: Chunker = chunker) -> int:
            return len(chunker._cut(text, True))

        def whole(text: str = text, splitter: object = whole_splitter) -> int:
            heading_paths(text)
            return len(splitter.chunk_indices(text))  # type: ignore[attr-defined]

        got = {}
        for name, side in ((("runs", runs), ("whole", whole)) if i % 2 == 0 else (("whole", whole), ("runs", runs))):
            start = time.perf_counter()
            count = side()
            got[name] = (time.perf_counter() - start, count)
        rows.append((path, len(text), got["whole"], got["runs"]))
    if not rows:
        raise SystemExit(f"no Markdown file over {SECTION_RUN:,} characters under {', '.join(args.folders)}")
    whole_s = sum(r[2][0] for r in rows)
    runs_s = sum(r[3][0] for r in rows)
    print(f"{len(rows)} Markdown files over {SECTION_RUN:,} characters, {sum(r[1] for r in rows):,} characters")
    print(f"whole: {whole_s:.1f} s, {sum(r[2][1] for r in rows):,} chunks")
    print(f"runs:  {runs_s:.1f} s, {sum(r[3][1] for r in rows):,} chunks")
    print(f"runs / whole: {runs_s / whole_s:.2f}")
    path, size, w, r = max(rows, key=lambda row: row[2][0])
    print(f"slowest whole: {path} ({size:,} characters): whole {w[0]:.1f} s ({w[1]:,} chunks), runs {r[0]:.1f} s ({r[1]:,} chunks)")


def plan_only(folders: list[str]) -> None:
    """Plan one job over ``folders`` (default globs and model) and print what it took."""
    from flux_chroma.ingest import build_plan

    sources = [{"kind": "files", "path": folder, "id": f"s{i}"} for i, folder in enumerate(folders)]
    start = time.perf_counter()
    plan = build_plan({"tenant": "bench", "collection": "plan", "sources": sources})
    seconds = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"planned {plan['docs']:,} documents ({plan['skipped_file_count']:,} files skipped), "
        f"{plan['chunks']:,} chunks ({plan['truncated']} truncated) in {seconds:.0f} s; "
        f"peak RSS {peak:.0f} MiB"
    )


if __name__ == "__main__":
    main()
