"""``flux-chroma eval LABELS.jsonl -c NAME``: measured retrieval quality, per query mode."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from flux_chroma.cli.stored import JsonOut
from flux_chroma.cli.support import (
    CliError,
    Collection,
    Debug,
    FluxHome,
    Tenancy,
    Tenant,
    Url,
    check_collection_target,
    cli_errors,
    print_json,
    run_workflow,
    stderr,
    stdout,
)

__all__ = ["eval_command", "report_lines"]


def report_lines(report: dict[str, Any]) -> list[str]:
    """The report as aligned rows per mode, then per kind and mode when the set mixes kinds.

    ``hit@k`` is in the JSON report only, to keep a row within 80 columns.
    """
    ks = report["k"]
    columns = [f"recall@{k}" for k in ks] + ["mrr", "ndcg@10"]
    head = f"{'':<16}{'n':>5}" + "".join(f"{c:>10}" for c in columns)
    lines = [f"{report['collection']}: {report['questions']} questions", head]

    def row(label: str, figures: dict[str, Any]) -> str:
        return f"{label:<16}{figures['questions']:>5}" + "".join(f"{figures[c]:>10.4f}" for c in columns)

    lines += [row(mode, figures) for mode, figures in report["modes"].items()]
    kinds = report["kinds"]
    single = len(kinds) == 1 and all(f["questions"] == report["questions"] for f in next(iter(kinds.values())).values())
    for kind, per_mode in ({} if single else kinds).items():
        for mode, figures in per_mode.items():
            lines.append(row(f"{kind}/{mode}"[:15], figures))
    return lines


def eval_command(
    labels: Annotated[Path, typer.Argument(metavar="LABELS", help='JSON lines: {"question": ..., "relevant_documents": [...]}.')],
    collection: Collection,
    mode: Annotated[list[str] | None, typer.Option("--mode", "-m", metavar="MODE", help="Query mode to measure (repeatable) [default: every mode].")] = None,
    k: Annotated[str, typer.Option("-k", "--k", metavar="K,K,...", help="Recall cut-offs.")] = "1,5,10",
    url: Url = None,
    tenant: Tenant = None,
    tenancy: Tenancy = "prefix",
    json_out: JsonOut = False,
    flux_home: FluxHome = None,
    debug: Debug = False,
) -> None:
    """Measure recall@k, MRR and nDCG@10 of a collection on a labelled set, per query mode."""
    with cli_errors(debug=debug, json_out=json_out):
        from flux_chroma.quality.evaluate import check_run, evaluate_collection
        from flux_chroma.quality.labels import load_labels

        target = check_collection_target(url, tenant, tenancy, collection)
        try:
            cutoffs = [int(part) for part in k.split(",") if part.strip()]
        except ValueError:
            raise CliError(f"-k {k!r} is not a comma-separated list of integers.", "write e.g. -k 1,5,10.") from None
        modes, ks = check_run(mode or None, cutoffs)
        checked = load_labels(labels)
        options = {**target, "retry_max_attempts": 0}
        if not json_out:
            stdout.print(f"asking {len(checked)} questions x {len(modes)} mode(s) of {tenant}/{collection} ...", highlight=False, markup=False)
        report = run_workflow(
            evaluate_collection,
            {"collection": collection, "labels": [dict(q) for q in checked], "modes": modes, "k": ks, "options": options},
            flux_home,
        )
        if json_out:
            print_json({"tenant": tenant, **report})
            return
        for line in report_lines(report):
            stdout.print(line, highlight=False, markup=False, soft_wrap=True)
        unknown = report.get("unknown_documents") or []
        if unknown:
            stderr.print(
                f"warning: {len(unknown)} relevant document id(s) name nothing in {tenant}/{collection}, e.g. "
                f"{unknown[:3]}; they can never be found. List the ids with: flux-chroma docs -c {collection}",
                highlight=False,
                markup=False,
                soft_wrap=True,
            )
