"""``flux-chroma ingest``: paths to job sources, run inline with progress, and its report."""

from __future__ import annotations

import os
import shutil
import signal
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from types import FrameType
from typing import Any, Self

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from flux_chroma.cli.support import (
    CliError,
    ExitCode,
    exit_code_for,
    plural,
    print_json,
    stderr,
    stdout,
)

__all__ = [
    "sources_for", "ProgressReporter", "summary_line", "skipped_lines",
    "stop_on_signals", "report_run",
]


def sources_for(
    paths: Sequence[Path],
    globs: Sequence[str] | None = None,
    *,
    source_ids: Sequence[str] | None = None,
    relocate: bool = False,
    excludes: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """Map command-line paths to ingestion sources.

    A directory becomes a ``files`` source (``globs`` default: every format whose converter
    is installed), a ``.jsonl`` file a ``jsonl`` source, any other file a ``files`` source for
    that one file. Without ``source_ids`` (one per path, in order) each source gets the
    library's default id: a name plus a digest of its absolute path. ``relocate`` lets each
    source take over its id's records from another location.

    Raises:
        CliError: A path does not exist, no file in a directory matches the globs, or the
            number of ``source_ids`` differs from the number of paths (exit code 2).
    """
    from flux_chroma.ingest.sources import default_source_id

    if source_ids and len(source_ids) != len(paths):
        raise CliError(
            f"got {len(source_ids)} --source-id values for {plural(len(paths), 'path')}.",
            "give one --source-id per PATH, in the same order, or none (each source then gets a "
            "name plus a digest of its absolute path).",
            ExitCode.USAGE,
        )
    sources: list[dict[str, Any]] = []
    for position, raw in enumerate(paths):
        path = raw.expanduser().resolve()
        if path.is_dir():
            source: dict[str, Any] = {"kind": "files", "path": str(path)}
            if globs:
                source["glob"] = list(globs)
            if excludes:
                source["exclude"] = list(excludes)
            _require_matches(path, globs, excludes)
        elif path.is_file() and path.suffix == ".jsonl":
            source = {"kind": "jsonl", "path": str(path)}
        elif path.is_file():
            source = {"kind": "files", "path": str(path.parent), "glob": [path.name], "id": default_source_id(path.name, str(path))}
        else:
            raise CliError(f"{raw} does not exist.", "give files or directories to ingest.", ExitCode.USAGE)
        if source_ids:
            source["id"] = source_ids[position]
        if relocate:
            source["relocate"] = True
        sources.append(source)
    return sources


def _require_matches(folder: Path, globs: Sequence[str] | None, excludes: Sequence[str] | None = None) -> None:
    """Refuse a directory none of whose files the globs match (a silent 0-doc job otherwise)."""
    from flux_chroma.ingest.convert import default_globs
    from flux_chroma.ingest.sources import file_census

    patterns = list(globs or default_globs())
    census = file_census({"path": str(folder), "glob": patterns, "exclude": list(excludes or ()), "id": folder.name})
    if census.matched:
        return
    if census.excluded:
        raise CliError(
            f"every file under {folder} that the globs match is excluded ({plural(census.excluded, 'file')}).",
            "remove or narrow an --exclude pattern.",
            ExitCode.USAGE,
        )
    shown = " ".join(f"--glob '{g}'" for g in globs) if globs else "the default globs"
    files = [f for f in folder.rglob("*") if f.is_file()]
    if not files:
        links = ", ".join(repr(str(folder / rel)) for rel in census.links[:3])
        raise CliError(
            f"{folder} holds no files to ingest ({shown} matched nothing)"
            + (f"; its symlinked folders ({links}) are not entered." if links else "."),
            "give a symlinked folder as a PATH of its own to ingest its files." if links else "",
            ExitCode.USAGE,
        )
    sample = files[0].relative_to(folder)
    example = f"**/*{sample.suffix}" if sample.suffix else f"**/{sample.name}"
    names = ", ".join(repr(f.relative_to(folder).as_posix()) for f in files[:3])
    raise CliError(
        f"no file under {folder} matches {shown} ({plural(len(files), 'file')} there, e.g. {names}).",
        f"pass --glob with a pattern that matches them, e.g. --glob '{example}' "
        "(repeatable; '**/*' takes every file).",
        ExitCode.USAGE,
    )


READ_LINE_EVERY = 10.0
"""Seconds between two "reading" lines when stderr is not a terminal."""


class _RateColumn(ProgressColumn):
    """Chunks written per second (rich's running estimate)."""

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text("--/s" if speed is None else f"{speed:,.1f}/s")


class ProgressReporter:
    """Shows ingestion progress on stderr: a live bar (``live``, default: on a terminal), else
    one line per batch; nothing when ``quiet`` (``--json``)."""

    def __init__(self, *, live: bool | None = None, quiet: bool = False) -> None:
        self.live = stderr.is_terminal if live is None else live
        self.quiet = quiet
        self.batches_total = 0
        self.batches_done = 0
        self.chunks_done = 0
        self.cache_hits = 0
        self.started = time.monotonic()
        self.execution_id: str | None = None
        self.committed_before = 0  # batches already in the log when this process started
        self._progress: Progress | None = None
        self._task: Any = None
        self._reading: Any = None  # the live bar's "reading sources" task
        self._read_said = self.started  # when line mode last said how far reading got
        self._writing_since: float | None = None  # the plan's end: chunks/s counts from there
        self._chunks_before = 0

    def __enter__(self) -> Self:
        if self.live and not self.quiet:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(bar_width=16),
                MofNCompleteColumn(),
                TextColumn("{task.fields[what]}"),
                _RateColumn(),
                TimeRemainingColumn(),
                console=stderr,
                transient=False,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the live bar (idempotent), leaving the cursor on a fresh line."""
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def committed(self) -> int:
        """Batches committed to Flux's log so far (read from the log; else counted here)."""
        if self.execution_id is not None:
            with suppress(Exception):  # best effort while stopping
                from flux_chroma.ingest.jobs import committed_work
                from flux_chroma.seams import execution_store

                events = list(execution_store().get(self.execution_id).events)
                return int(committed_work(events)["committed"] or 0)
        return self.committed_before + self.batches_done

    def _line(self, text: str) -> None:
        if not self.quiet:
            stderr.print(text, highlight=False, markup=False)

    def _read(self, value: dict[str, Any]) -> None:
        """Reading the sources before the first batch: a bar, or a line every READ_LINE_EVERY s."""
        read, total, chunks = int(value.get("read") or 0), value.get("of"), int(value.get("chunks") or 0)
        if self._progress is not None:
            if self._reading is None:
                self._reading = self._progress.add_task("reading sources", total=total, what="files and records")
            self._progress.update(self._reading, completed=read, total=total)
        elif time.monotonic() - self._read_said >= READ_LINE_EVERY:
            self._read_said = time.monotonic()
            of = f" of {total}" if total is not None else ""
            self._line(
                f"reading {value.get('tenant')}/{value.get('collection')}: {read}{of} files and records, "
                f"{plural(chunks, 'chunk')} so far ({time.monotonic() - self.started:.0f} s)"
            )

    def update(self, value: dict[str, Any]) -> None:
        """Consume one progress value; the ``on_progress`` callback of ``run_ingest``."""
        phase = value.get("phase")
        if phase == "execution":
            self.execution_id = str(value.get("execution_id"))
            self.committed_before = int(value.get("committed") or 0)
            self._chunks_before = int(value.get("committed_chunks") or 0)
            self.batches_total = int(value.get("batches") or 0)
            previous = value.get("resumed_from")
            if previous:
                again = "" if previous == self.execution_id else f" as {self.execution_id}"
                self._line(
                    f"resuming execution {previous}{again}, "
                    f"{plural(self.committed_before, 'batch')} already committed"
                )
        elif phase == "reading":
            self._read(value)
        elif phase == "planned":
            self._writing_since = time.monotonic()
            if self._progress is not None and self._reading is not None:
                self._progress.remove_task(self._reading)
                self._reading = None
            self.batches_total = int(value.get("batches") or 0)
            chunks = int(value.get("chunks") or 0)
            label = f"{value.get('tenant')}/{value.get('collection')}"
            if self._progress is not None:
                short = label if len(label) <= 20 else label[:19] + "…"
                self._task = self._progress.add_task(
                    short,
                    total=chunks,
                    completed=self._chunks_before,
                    what=f"chunks, batch {self.committed_before}/{self.batches_total}",
                )
            else:
                self._line(
                    f"planned {label}: {plural(chunks, 'chunk')} in {plural(self.batches_total, 'batch')}"
                )
        elif phase == "batch" and value.get("status") == "done":
            self.batches_done += 1
            chunks = int(value.get("chunks") or 0)
            self.chunks_done += chunks
            self.cache_hits += int(value.get("cache_hits") or 0)
            if self._progress is not None and self._task is not None:
                self._progress.update(
                    self._task,
                    advance=chunks,
                    what=f"chunks, batch {self.committed_before + self.batches_done}/{self.batches_total}",
                )
            else:
                rate = self.chunks_done / max(time.monotonic() - (self._writing_since or self.started), 1e-9)
                self._line(
                    f"batch {int(value.get('batch') or 0) + 1}/{value.get('of') or self.batches_total} done: "
                    f"{plural(chunks, 'chunk')} (added {value.get('added', 0)}, skipped {value.get('skipped', 0)}), "
                    f"{rate:.1f} chunks/s, cache hits {self.cache_hits}"
                )
        elif phase == "cleanup":
            self._line(f"cleanup: deleted {plural(int(value.get('deleted', 0)), 'stale chunk')}")


@contextmanager
def stop_on_signals(reporter: ProgressReporter) -> Iterator[None]:
    """Exit at once on SIGINT (130) or SIGTERM (143), abandoning the batch in flight.

    Flux's log holds every committed batch, so running the command again resumes and writes
    the abandoned batch again (writes are idempotent). The message says how far it got.
    """

    def stop(signum: int, _frame: FrameType | None) -> None:
        # The handler runs between two bytecodes of the main thread, which may be inside a write
        # to the same stream ("reentrant call inside BufferedWriter"): the bar and buffers are
        # closed best-effort, and the message goes straight to file descriptor 2.
        with suppress(Exception):
            reporter.close()
        done, total = reporter.committed(), reporter.batches_total
        name, code = ("Ctrl-C", ExitCode.INTERRUPTED) if signum == signal.SIGINT else ("SIGTERM", ExitCode.TERMINATED)
        where = f"after {done} of {plural(total, 'batch')} committed" if total else f"after {plural(done, 'batch')} committed"
        execution = f" execution {reporter.execution_id}" if reporter.execution_id else ""
        for stream in (sys.stdout, sys.stderr):
            with suppress(Exception):
                stream.flush()
        lines = [
            f"interrupted ({name}): stopped {where}.",
            (f"hint: run the same command again to resume{execution}: committed batches are replayed, "
            "the interrupted one is written again."),
        ]
        if os.isatty(2):  # like the console: wrapped at the terminal's width, whole when piped
            width = shutil.get_terminal_size().columns
            lines = [textwrap.fill(line, width) for line in lines]
        with suppress(OSError):
            os.write(2, ("\n" + "\n".join(lines) + "\n").encode("utf-8", "replace"))
        os._exit(int(code))

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def summary_line(report: dict[str, Any], execution_id: str) -> str:
    """One line describing a finished ingestion and the execution that ran it."""
    # " (N by this run, M before)" when earlier runs wrote part of what the report counts
    timings = report.get("batch_timings") or []
    mine = sum(int(t.get("added") or 0) for t in timings if t.get("pid") == os.getpid())
    before = int(report.get("added") or 0) - mine
    split = f" ({mine} by this run, {before} before)" if before > 0 else ""
    truncated = ""  # chunks longer than the model reads
    if "truncated" in report:
        value = report["truncated"]
        unknown = ", truncated unknown (the model declares no tokenizer)"
        truncated = unknown if value is None else f", truncated {value}"
    left_out = []  # files read by no document
    if report.get("skipped_file_count"):
        left_out.append(f"{plural(int(report['skipped_file_count']), 'file')} skipped")
    if report.get("unmatched_files"):
        sample = ", ".join(report.get("unmatched_sample") or [])
        left_out.append(f"{report['unmatched_files']} matched no glob" + (f" (e.g. {sample})" if sample else ""))
    if report.get("excluded_files"):
        left_out.append(f"{report['excluded_files']} excluded")
    if report.get("symlinked_folder_count"):
        left_out.append(f"{plural(int(report['symlinked_folder_count']), 'symlinked folder')} not entered")
    files = f"; {', '.join(left_out)}" if left_out else ""
    return (
        f"ingested {plural(int(report.get('docs', 0)), 'doc')} ({plural(int(report.get('chunks', 0)), 'chunk')}) "
        f"into {report.get('tenant')}/{report.get('collection')} in "
        f"{plural(int(report.get('batches', 0)), 'batch')}: "
        f"added {report.get('added', 0)}{split}, updated {report.get('updated', 0)}, skipped "
        f"{report.get('skipped', 0)}, deleted {report.get('deleted', 0)}, cache hits "
        f"{report.get('cache_hits', 0)}{truncated}{files} (execution {execution_id})"
    )


def skipped_lines(report: dict[str, Any]) -> list[str]:
    """One line per skipped file named in the report (``path: reason``), how many more, and
    one per symlinked folder not entered."""
    named = list(report.get("skipped_files") or [])
    total = int(report.get("skipped_file_count") or len(named))
    lines = [f"skipped {item['path']} ({item['source']}): {item['reason']}" for item in named]
    if total > len(named):
        lines.append(f"... and {total - len(named)} more skipped files (the report names the first {len(named)})")
    lines += [
        f"not entered {item['path']} ({item['source']}): a symlinked folder (-> {item['target']}); to ingest "
        "its files, give that folder as a PATH of its own"
        for item in report.get("symlinked_folders") or []
    ]
    return lines


def report_run(run: Any, json_out: bool) -> ExitCode:
    """Print the report of a ``run_ingest`` run (summary line or JSON), or raise its failure.

    Returns:
        ``ExitCode.OK``, or ``ExitCode.FILES_SKIPPED`` when some files could not be read.

    Raises:
        CliError: The run failed; the hint says how to resume it.
    """
    if not run.has_succeeded:
        from flux_chroma.errors import SourceConflictError

        error = run.output
        text = str(error) if isinstance(error, BaseException) else f"ingestion ended {run.state}: {error!r}"
        code = exit_code_for(error) if isinstance(error, BaseException) else ExitCode.FAILED
        hint = (
            f"run the same command again to resume execution {run.execution_id}: committed "
            "batches are replayed, not rewritten."
        )
        if isinstance(error, SourceConflictError):
            hint = "add --source-id NAME (one per PATH) for a different source, or --relocate once if the folder moved."
        raise CliError(text, hint, code)
    report = dict(run.output)
    if json_out:
        print_json({**report, "execution_id": run.execution_id})
    else:
        for line in skipped_lines(report):
            stderr.print(line, highlight=False, markup=False)
        stdout.print(summary_line(report, run.execution_id), highlight=False, markup=False)
    return ExitCode.FILES_SKIPPED if report.get("skipped_file_count") else ExitCode.OK
