"""The ``flux-chroma`` typer app and its core commands; ``docs``, ``show``, ``eval``, ``watch``
and ``tenant erase`` come from their own modules."""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import sys
import warnings
from pathlib import Path
from typing import Annotated

import typer

from flux_chroma._version import __version__
from flux_chroma.cli import eval_cmd, stored, watch
from flux_chroma.cli import tenant as tenant_cmd
from flux_chroma.cli.support import (
    CliError,
    Collection,
    Command,
    Debug,
    ExitCode,
    FluxHome,
    JsonOut,
    Tenancy,
    Tenant,
    Url,
    check_collection_target,
    check_settings,
    check_tenant,
    cli_errors,
    did_you_mean,
    json_option,
    plural,
    print_json,
    run_read,
    stderr,
    stdout,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="flux-chroma",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

Wide = Annotated[
    bool,
    typer.Option("--wide", help="Show every value whole (lines may pass the terminal's width)."),
]


def _version_callback(value: bool) -> None:
    if value:
        stdout.print(f"flux-chroma {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version_callback, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """ChromaDB as a safe, durable step inside Flux workflows.

    Exit codes: 0 ok, 1 operation failed, 2 usage error, 3 server unreachable,
    4 a doctor check failed, 130 interrupted, 143 SIGTERM.
    """


@app.command(cls=Command)
def server(
    path: Annotated[Path, typer.Option("--path", metavar="DIR", help="Chroma data directory (created when missing).")],
    port: Annotated[int, typer.Option("--port", metavar="PORT", help="TCP port; 0 picks a free one.")] = 8000,
    host: Annotated[str, typer.Option("--host", metavar="ADDRESS", help="Address to bind (no auth: keep it on loopback).")] = "127.0.0.1",
    log: Annotated[Path | None, typer.Option("--log", metavar="FILE", help="File for chroma's output.")] = None,
    json_out: JsonOut = False,
    debug: Debug = False,
) -> None:
    """Run the ONE Chroma server that owns --path DIR, in the foreground (Ctrl-C or SIGTERM stops it)."""
    from flux_chroma.chroma.server import ChromaServer
    from flux_chroma.errors import OneOwnerError

    with cli_errors(debug=debug, json_out=json_out):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                chroma = ChromaServer(path, host=host, port=port, log_path=log).start()
            except OneOwnerError as exc:
                raise CliError(str(exc), "stop the other server, or use another --path.") from None
        for warning in caught:
            stderr.print(f"warning: {warning.message}", highlight=False, markup=False)
        info = {"url": chroma.url, "pid": chroma.pid, "path": str(chroma.path), "log": str(chroma.log_path)}
        if json_out:
            print(json.dumps(info), flush=True)  # one line, as the docs promise
        else:
            stdout.print(
                f"Chroma server {chroma.url} (pid {chroma.pid}) owns {chroma.path}\n"
                f"log: {chroma.log_path}\nworkers: export FLUX_CHROMA_URL={chroma.url}\n"
                "Press Ctrl-C to stop.",
                highlight=False,
                markup=False,
            )
        chroma.wait_forever()
        if not json_out:
            stdout.print("server stopped", highlight=False)


@app.command(cls=Command)
def ingest(
    paths: Annotated[list[Path], typer.Argument(metavar="PATH...", help="Directories (text, Markdown, HTML, Info, man pages, gzip; PDF, DOCX, PPTX with the documents extra), .jsonl files or single files.")],
    collection: Collection,
    glob: Annotated[
        list[str] | None,
        typer.Option("--glob", metavar="PATTERN", help="File pattern for directories, e.g. '**/*.txt' (** reaches subfolders; repeatable) [default: every format whose converter is installed, README, NEWS, ...]."),
    ] = None,
    exclude: Annotated[
        list[str] | None, typer.Option("--exclude", metavar="PATTERN", help="Leave out files matching this pattern, e.g. '**/*.min.html' (repeatable).")
    ] = None,
    chunk_size: Annotated[
        int | None, typer.Option("--chunk-size", metavar="N", help="Chunk size in --chunk-unit, at most what the model reads [default: 200 tokens].")
    ] = None,
    chunk_overlap: Annotated[int | None, typer.Option("--chunk-overlap", metavar="N", help="Overlap in --chunk-unit [default: 0 tokens, 100 chars].")] = None,
    chunk_unit: Annotated[
        str | None, typer.Option("--chunk-unit", metavar="UNIT", help="tokens (the model's own tokenizer) or chars (the word chunker) [default: tokens].")
    ] = None,
    batch_size: Annotated[int | None, typer.Option("--batch-size", metavar="CHUNKS", help="Chunks per batch (one checkpoint each) [default: 256].")] = None,
    cleanup: Annotated[
        str, typer.Option("--cleanup", metavar="MODE", help="Delete stale chunks after the job: none, incremental or full.")
    ] = "none",
    duplicates: Annotated[
        str, typer.Option("--duplicates", metavar="POLICY", help="A document id seen twice: 'error' (nothing is written) or 'last_wins'.")
    ] = "error",
    cache: Annotated[bool, typer.Option("--cache/--no-cache", help="Reuse embeddings through the embedding cache.")] = True,
    key: Annotated[str | None, typer.Option("--key", metavar="KEY", help="Job key (same key = resume or sync the same job).")] = None,
    parallel: Annotated[
        int, typer.Option("--parallel", metavar="N", help="Units of consecutive batches running at once (1-256).")
    ] = 1,
    source_id: Annotated[
        list[str] | None,
        typer.Option(
            "--source-id",
            metavar="NAME",
            help="Source id, one per PATH in order: a name that stays when the folder moves [default: name plus a digest of the absolute path].",
        ),
    ] = None,
    relocate: Annotated[
        bool,
        typer.Option("--relocate", help="The folder moved: take over the records its source id holds from the old location."),
    ] = False,
    url: Url = None,
    tenant: Tenant = None,
    tenancy: Tenancy = "prefix",
    json_out: JsonOut = False,
    flux_home: FluxHome = None,
    debug: Debug = False,
) -> None:
    """Ingest files into the tenant's collection with a live progress bar (resumable)."""
    with cli_errors(debug=debug, json_out=json_out):
        from flux_chroma.chroma.connection import server_info
        from flux_chroma.cli.ingest import (
            ProgressReporter,
            report_run,
            sources_for,
            stop_on_signals,
        )
        from flux_chroma.flux_state import flux_home as use_flux_home
        from flux_chroma.ingest import run_ingest
        from flux_chroma.ingest.spec import MAX_PARALLEL

        if cleanup not in ("none", "incremental", "full"):
            raise CliError(f"--cleanup {cleanup!r} is not one of none, incremental, full.", "", ExitCode.USAGE)
        if duplicates not in ("error", "last_wins"):
            raise CliError(f"--duplicates {duplicates!r} is not one of error, last_wins.", "", ExitCode.USAGE)
        if not 1 <= parallel <= MAX_PARALLEL:
            raise CliError(f"--parallel {parallel} is out of range.", f"give 1 to {MAX_PARALLEL} units at once.", ExitCode.USAGE)
        settings = check_settings(url)
        check_tenant(tenant, tenancy)
        server_info(settings)  # fail fast (exit 3) instead of retrying a stopped server
        job = {  # None/defaults mean the ingestion defaults; url only, never a token
            "tenant": str(tenant), "collection": collection,
            "sources": sources_for(paths, glob, source_ids=source_id, relocate=relocate, excludes=exclude),
            "chunking": {"size": chunk_size, "overlap": chunk_overlap,
                         "unit": "tokens" if chunk_unit is None else chunk_unit},
            "cleanup": None if cleanup == "none" else cleanup, "duplicates": duplicates,
            "options": {"url": settings.url, "tenancy": tenancy, "cache": cache},
            "key": key or None, "parallel": parallel,
        }
        if batch_size is not None:
            job["batch_size"] = batch_size
        with use_flux_home(flux_home), ProgressReporter(quiet=json_out) as reporter, stop_on_signals(reporter):
            run = run_ingest(job, on_progress=reporter.update)
        code = report_run(run, json_out)
    if code:
        raise typer.Exit(int(code))


@app.command(cls=Command)
def query(
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The question.")],
    collection: Collection,
    k: Annotated[int, typer.Option("-k", "--k", metavar="N", help="Number of hits.")] = 5,
    where: Annotated[str | None, typer.Option("--where", metavar="JSON", help='Metadata filter as JSON, e.g. \'{"topic": "db"}\'.')] = None,
    where_document: Annotated[
        str | None, typer.Option("--where-document", metavar="JSON", help='Document filter as JSON, e.g. \'{"$contains": "flux"}\'.')
    ] = None,
    mode: Annotated[
        str, typer.Option("--mode", metavar="MODE", help="'hybrid' (vectors + the server's full-text index) or 'dense' (vectors only).")
    ] = "hybrid",
    distinct: Annotated[
        bool, typer.Option("--distinct/--all", help="Show each passage once (copies, from this or another file or format, fold into the best hit) or every record.")
    ] = True,
    path_prefix: Annotated[
        str | None, typer.Option("--path-prefix", metavar="DIR", help="Only files at or under this folder of an ingested folder, e.g. docs/api.")
    ] = None,
    url: Url = None,
    tenant: Tenant = None,
    tenancy: Tenancy = "prefix",
    json_out: JsonOut = False,
    wide: Wide = False,
    debug: Debug = False,
) -> None:
    """Print the records that best answer TEXT in one of the tenant's collections, ranked."""
    with cli_errors(debug=debug, json_out=json_out):
        from flux_chroma.errors import CollectionNotFoundError
        from flux_chroma.tasks.builtin import list_collections, query

        target = check_collection_target(url, tenant, tenancy, collection)
        try:
            hits = run_read(
                query,
                target,
                collection,
                text,
                k=k,
                where=json_option(where, "--where"),
                where_document=json_option(where_document, "--where-document"),
                mode=mode,
                distinct=distinct,
                path_prefix=path_prefix,
            )
        except CollectionNotFoundError as exc:
            exc.cli_hint = did_you_mean(  # type: ignore[attr-defined]
                collection, str(tenant), lambda: [c["name"] for c in run_read(list_collections, target)]
            )
            raise
        if json_out:
            print_json({"tenant": tenant, "collection": collection, "question": text, "hits": hits})
        else:
            from flux_chroma.cli.render import hits_table

            hits_table(hits, title=f"{tenant}/{collection}: {text}", wide=wide)


@app.command(cls=Command)
def collections(
    url: Url = None,
    tenant: Tenant = None,
    tenancy: Tenancy = "prefix",
    json_out: JsonOut = False,
    wide: Wide = False,
    debug: Debug = False,
) -> None:
    """List the tenant's collections with record counts and embedding pins."""
    with cli_errors(debug=debug, json_out=json_out):
        from flux_chroma.tasks.builtin import list_collections

        found = run_read(list_collections, check_collection_target(url, tenant, tenancy))
        if json_out:
            print_json({"tenant": tenant, "collections": found})
        else:
            from flux_chroma.cli.render import collections_table

            collections_table(found, str(tenant), wide=wide)


@app.command(cls=Command)
def doctor(
    url: Url = None,
    tenant: Tenant = None,
    tenancy: Tenancy = "prefix",
    project: Annotated[
        Path | None, typer.Option("--project", metavar="DIR", help="Folder scanned for PersistentClient( calls [default: .].")
    ] = None,
    data_dir: Annotated[
        Path | None, typer.Option("--data-dir", metavar="DIR", help="The Chroma data directory (its filesystem is checked).")
    ] = None,
    flux: Annotated[
        str | None,
        typer.Option("--flux", metavar="URL", help="A Flux server: run the canary workflow on each of its workers."),
    ] = None,
    json_out: JsonOut = False,
    wide: Wide = False,
    flux_home: FluxHome = None,
    debug: Debug = False,
) -> None:
    """Check server, versions, model, pins, PersistentClient use and filesystems.

    Without --tenant, the pins of every collection in Chroma's default database are checked.
    With --flux URL, each online worker of that Flux server runs a canary workflow that imports
    flux-chroma as an ingestion job would, and reports its versions, model and error.
    Exits 4 when any check fails (warnings do not fail).
    """
    with cli_errors(debug=debug, json_out=json_out):
        from flux_chroma.cli.doctor import run_doctor
        from flux_chroma.embedding import MODEL_DIR_ENV, chroma_default_model_dir, default_cache_dir
        from flux_chroma.flux_state import resolve_flux_home

        settings = check_settings(url)
        if tenant is not None:
            check_tenant(tenant, tenancy)
        folders = {
            "chroma data": data_dir,
            "embedding cache": default_cache_dir(),
            "model": Path(os.environ.get(MODEL_DIR_ENV) or chroma_default_model_dir()),
            "flux home": resolve_flux_home(flux_home),
        }
        paths = {what: folder for what, folder in folders.items() if folder is not None}
        checks = run_doctor(
            settings,
            tenant=tenant,
            tenancy=tenancy,
            project=(project or Path(".")).resolve(),
            paths=paths,
        )
        if flux is not None:
            from flux_chroma.cli.fleet import check_fleet

            checks.extend(check_fleet(flux))
        failed = any(c.status == "fail" for c in checks)
        if json_out:
            print_json({"ok": not failed, "checks": [c.to_dict() for c in checks]})
        else:
            from flux_chroma.cli.render import checks_table

            checks_table(checks, wide=wide)
        if failed:
            raise typer.Exit(int(ExitCode.CHECK_FAILED))


@app.command(cls=Command)
def demo(
    question: Annotated[str, typer.Argument(metavar="QUESTION", help="The question to ask.")] = "what is chroma?",
    url: Annotated[
        str | None, typer.Option("--url", metavar="URL", help="Use this running server instead of a throwaway one.")
    ] = None,
    tenant: Annotated[str, typer.Option("--tenant", "-t", metavar="TENANT", help="Tenant to write to.")] = "demo",
    json_out: JsonOut = False,
    flux_home: Annotated[
        Path | None, typer.Option("--flux-home", metavar="DIR", help="Folder for Flux's state [default: a temporary folder].")
    ] = None,
    debug: Debug = False,
) -> None:
    """The quickstart: start a throwaway server, ingest three documents, ask one question."""
    with cli_errors(debug=debug, json_out=json_out):
        from flux_chroma.demo import DemoResult, run_demo
        from flux_chroma.flux_state import quiet_flux_logs

        if url is not None:
            check_settings(url)
        check_tenant(tenant)
        quiet_flux_logs()

        def announce(result: DemoResult) -> None:
            if json_out:
                return
            if result.server_pid is not None:
                line = f"Chroma server {result.url} (pid {result.server_pid}) owns {result.data_dir}"
            else:
                line = f"using Chroma server {result.url}"
            stdout.print(line, highlight=False, markup=False)

        result = run_demo(question, url=url, tenant=tenant, flux_home=flux_home, announce=announce)
        receipt = result.receipt
        if json_out:
            print_json({"url": result.url, "receipt": receipt, "question": question, "hits": result.hits})
            return
        stdout.print(
            f"ingested {plural(receipt['upserted'], 'doc')} into {receipt['physical_name']} "
            f"({receipt['embedding']['name']} model, dim {receipt['embedding']['dimension']})",
            highlight=False,
            markup=False,
        )
        from flux_chroma.cli.render import hits_table

        hits_table(result.hits, title=f"question: {question}")


# after the commands above: help order
app.command(cls=Command, name="docs")(stored.docs)
app.command(cls=Command, name="show")(stored.show)
app.command(cls=Command, name="eval")(eval_cmd.eval_command)
app.command(cls=Command)(watch.watch)
app.add_typer(tenant_cmd.group)


def main() -> None:
    """Entry point of the ``flux-chroma`` console script.

    After Python's own shutdown steps (threads joined, the exit handlers that libraries
    registered during the command run), the process ends at once: the interpreter's teardown
    of chromadb, onnxruntime and Flux modules writes nothing and cost 0.2-0.3 s of CPU per
    command (``python -m bench.cli_cost``).
    """
    from flux_chroma.flux_state import quiet_flux_logs
    from flux_chroma.seams import skip_override_checks

    skip_override_checks()  # 0.2 s of every command that reaches chromadb
    quiet_flux_logs()
    status: list[int] = []
    atexit.register(_end_process, status)  # before the command: the handlers it adds run first
    try:
        app(prog_name="flux-chroma")
    except SystemExit as done:
        status.append(done.code if isinstance(done.code, int) else int(done.code is not None))
        raise


def _end_process(status: list[int]) -> None:
    if not status:  # an uncaught exception: Python's own teardown and exit status
        return
    logging.shutdown()  # its handler was registered before ours, at import
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(status[0])
