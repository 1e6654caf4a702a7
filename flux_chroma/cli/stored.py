"""``flux-chroma docs`` and ``flux-chroma show``: look at what a collection stores."""

from __future__ import annotations

import shutil
import textwrap
from typing import Annotated

import typer

from flux_chroma.cli.support import (
    Collection,
    Debug,
    Tenancy,
    Tenant,
    Url,
    check_collection_target,
    cli_errors,
    json_option,
    print_json,
    run_read,
    stdout,
)

__all__ = ["docs", "show", "JsonOut"]

# The commands here print text, not tables: their --json help says so.
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of text.")]


def docs(
    collection: Collection,
    where: Annotated[str | None, typer.Option("--where", metavar="JSON", help='Metadata filter as JSON, e.g. \'{"path": "guide.md"}\'.')] = None,
    url: Url = None,
    tenant: Tenant = None,
    tenancy: Tenancy = "prefix",
    json_out: JsonOut = False,
    debug: Debug = False,
) -> None:
    """List the documents stored in a collection, with their chunk counts."""
    with cli_errors(debug=debug, json_out=json_out):
        from flux_chroma.tasks.documents import list_documents

        target = check_collection_target(url, tenant, tenancy, collection)
        found = run_read(list_documents, target, collection, json_option(where, "--where"))
        if json_out:
            print_json({"tenant": tenant, "collection": collection, "documents": found})
            return
        for entry in found:
            stdout.print(f"{entry['chunks']:>6}  {entry['document_id']}", highlight=False, markup=False)
        chunks = sum(e["chunks"] for e in found)
        stdout.print(f"{len(found)} documents, {chunks} chunks in {tenant}/{collection}", highlight=False, markup=False)


def show(
    record_id: Annotated[str, typer.Argument(metavar="ID", help="A record (chunk) id, a document id, or the path a query result shows.")],
    collection: Collection,
    context: Annotated[int, typer.Option("--context", "-n", metavar="N", help="Neighbouring chunks to add on each side of a chunk.")] = 0,
    document: Annotated[bool, typer.Option("--document", help="Print the whole document the chunk belongs to.")] = False,
    url: Url = None,
    tenant: Tenant = None,
    tenancy: Tenancy = "prefix",
    json_out: JsonOut = False,
    debug: Debug = False,
) -> None:
    """Print a stored record, a chunk with its neighbours, or a whole document."""
    from flux_chroma.tasks.documents import document_key, expand_hit, get_document, parse_chunk_id

    with cli_errors(debug=debug, json_out=json_out):
        target = check_collection_target(url, tenant, tenancy, collection)
        if document or parse_chunk_id(record_id) is None:
            passage = run_read(get_document, target, collection, document_key(record_id))
        else:
            passage = run_read(expand_hit, target, collection, record_id, context)
        if json_out:
            print_json({"tenant": tenant, "collection": collection, **passage})
            return
        chunks = passage["chunks"]
        indexes = [c["index"] for c in chunks if c["index"] is not None]
        span = f"chunks {indexes[0]}-{indexes[-1]} of {passage['total_chunks']}" if indexes else "one record"
        stdout.print(f"{passage['document_id']}  ({span})", highlight=False, markup=False)
        metadata = chunks[0]["metadata"] if chunks else {}
        if metadata:
            stdout.print("  ".join(f"{k}={v}" for k, v in sorted(metadata.items())), highlight=False, markup=False)
        width = max(40, min(shutil.get_terminal_size((100, 24)).columns, 100))
        for paragraph in passage["text"].splitlines() or [""]:
            stdout.print(textwrap.fill(paragraph, width) if paragraph.strip() else "", highlight=False, markup=False, soft_wrap=True)
