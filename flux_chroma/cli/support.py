"""Options, exit codes and error reporting shared by the ``flux-chroma`` commands.

Errors are printed in the words of the command line (:func:`cli_wording`): library messages
name task options (``task.with_options(tenant=...)``, ``retry_max_attempts``); the CLI must
name options and commands instead, and drop advice that cannot apply (it never retries).
"""

from __future__ import annotations

import difflib
import json
import re
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from enum import IntEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from typer.core import TyperCommand

from flux_chroma.errors import (
    ChromaUnavailableError,
    CollectionNotFoundError,
    ConfigurationError,
    EmbeddingMismatchError,
    FluxChromaError,
    InvalidDocumentError,
    InvalidNameError,
    InvalidQueryError,
    ModelNotAvailableError,
    NotChromaServerError,
    OneOwnerError,
    ServerStartError,
    TenantError,
    UnpinnedCollectionError,
)
from flux_chroma.seams import show_arguments_plain

if TYPE_CHECKING:
    from flux_chroma.chroma.settings import ConnectionSettings

__all__ = [
    "Command",
    "ExitCode",
    "plural",
    "cli_wording",
    "did_you_mean",
    "CliError",
    "cli_errors",
    "exit_code_for",
    "print_json",
    "check_settings",
    "check_tenant",
    "check_collection_target",
    "json_option",
    "run_read",
    "run_workflow",
    "stdout",
    "stderr",
]

stdout = Console()
stderr = Console(stderr=True)
# On a terminal, lines wrap at its width; piped or redirected, each line stays whole.
stdout.soft_wrap = not stdout.is_terminal
stderr.soft_wrap = not stderr.is_terminal

Url = Annotated[
    str | None,
    typer.Option(
        "--url",
        metavar="URL",
        envvar="FLUX_CHROMA_URL",
        help="Chroma server URL [default: http://localhost:8000].",
    ),
]
Tenant = Annotated[
    str | None,
    typer.Option(
        "--tenant",
        "-t",
        metavar="TENANT",
        envvar="FLUX_CHROMA_TENANT",
        help="Tenant id (lowercase letters, digits, hyphens).",
    ),
]
Tenancy = Annotated[
    str,
    typer.Option(
        "--tenancy",
        metavar="MODE",
        help="'prefix' (tenant__name) or 'database' (one database per tenant).",
    ),
]
JsonOut = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of tables.")]
Debug = Annotated[bool, typer.Option("--debug", help="Print tracebacks on errors.")]
FluxHome = Annotated[
    Path | None,
    typer.Option(
        "--flux-home",
        metavar="DIR",
        help="Folder for Flux's state (default: FLUX_HOME, else ./.flux).",
    ),
]
Collection = Annotated[
    str,
    typer.Option("--collection", "-c", metavar="NAME", help="Tenant-relative collection name."),
]


class ExitCode(IntEnum):
    """Exit codes of ``flux-chroma`` (stable: scripts may rely on them)."""

    OK = 0
    FAILED = 1
    USAGE = 2
    UNREACHABLE = 3
    CHECK_FAILED = 4
    FILES_SKIPPED = 5
    INTERRUPTED = 130
    TERMINATED = 143


class CliError(Exception):
    """An error the CLI reports as ``error: message`` and ``hint: hint``, exiting with ``code``."""

    def __init__(self, message: str, hint: str = "", code: ExitCode = ExitCode.FAILED) -> None:
        super().__init__(message)
        self.hint = hint
        self.code = code


def exit_code_for(exc: BaseException) -> ExitCode:
    """The exit code for an exception: 3 unreachable server, 2 invalid input, else 1."""
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, (ChromaUnavailableError, NotChromaServerError)):
        return ExitCode.UNREACHABLE
    if isinstance(exc, (OneOwnerError, ConfigurationError, InvalidNameError, InvalidQueryError)):
        return ExitCode.USAGE
    return ExitCode.FAILED


def hint_for(exc: BaseException) -> str:
    """A one-line hint for an exception: what to try next."""
    if isinstance(exc, CliError):
        return exc.hint
    if getattr(exc, "cli_hint", None):  # set by a command that knows better (did you mean ...?)
        return str(exc.cli_hint)  # type: ignore[attr-defined]
    if isinstance(exc, ChromaUnavailableError):
        return (
            "start a server with `flux-chroma server --path DIR`, or pass --url / set "
            "FLUX_CHROMA_URL; `flux-chroma doctor` checks the whole setup."
        )
    if isinstance(exc, NotChromaServerError):
        return "pass the URL of a `chroma run` server with --url or FLUX_CHROMA_URL; `flux-chroma doctor` checks it."
    if isinstance(exc, TenantError):
        return "pass --tenant, e.g. --tenant acme (lowercase letters, digits, hyphens), or set FLUX_CHROMA_TENANT."
    if isinstance(exc, CollectionNotFoundError):
        return "list the tenant's collections with `flux-chroma collections --tenant NAME`."
    if isinstance(exc, (EmbeddingMismatchError, UnpinnedCollectionError)):
        return "`flux-chroma doctor --tenant NAME` checks every collection's pin."
    if isinstance(exc, ModelNotAvailableError):
        return "`flux-chroma doctor` shows where the model files are looked for."
    if isinstance(exc, ServerStartError):
        return "the message quotes chroma's log; `flux-chroma doctor` checks the rest."
    if isinstance(exc, InvalidDocumentError):
        return "fix the document named above, then run the command again."
    if isinstance(exc, (ConfigurationError, InvalidNameError, InvalidQueryError)):
        return "fix the value named above; `flux-chroma COMMAND --help` lists the options."
    return "rerun with --debug for the full traceback."


_IRREGULAR = {"batch": "batches", "match": "matches"}


def plural(count: int, word: str) -> str:
    """``count`` and ``word``, plural unless the count is one: ``"1 doc"``, ``"3 batches"``."""
    return f"{count} {word if count == 1 else _IRREGULAR.get(word, word + 's')}"


class Command(TyperCommand):
    """A Typer command whose help shows arguments by metavar (``PATH...``), as Unix help does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        show_arguments_plain(self.params)


_REWRITES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"task\.with_options\(tenant=(['\"]?)([\w-]+)\1\)"), r"--tenant \2"),
    (re.compile(r"\burl= / FLUX_CHROMA_URL"), "--url / FLUX_CHROMA_URL"),
    (re.compile(r"[;,]?\s*the task is retried when it has retry_max_attempts > 0\.?"), "."),
    (re.compile(r"Ingest into it first \(embed_and_add\)"), "Ingest into it first (flux-chroma ingest PATH -c NAME)"),
    (re.compile(r"Run the job again \(run_ingest\)"), "Run the same command again"),
]


def cli_wording(text: str) -> str:
    """Rewrite a library message so that its advice names CLI options and commands."""
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return re.sub(r"\.\.+", ".", text).strip()


def did_you_mean(name: str, tenant: str, list_names: Callable[[], Sequence[str]]) -> str:
    """A hint for a missing collection: close matches, the tenant's names, or how to create one.

    Args:
        name: The name given.
        tenant: The tenant.
        list_names: Returns the tenant's collection names (called once; may raise).
    """
    command = f"`flux-chroma collections --tenant {tenant}`"
    try:
        names = sorted(list_names())
    except Exception:  # noqa: BLE001 - the hint is best effort; the error itself stands
        return f"list the tenant's collections with {command}."
    if not names:
        return (
            f"list the tenant's collections with {command}: it has none yet; "
            f"`flux-chroma ingest PATH -c {name} --tenant {tenant}` creates one."
        )
    listing = f"{command} lists them"
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return f"did you mean {' or '.join(repr(c) for c in close)}? ({listing})"
    shown = ", ".join(repr(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
    return f"tenant {tenant!r} has {shown} ({listing})."


def _message(exc: BaseException) -> str:
    if isinstance(exc, (CliError, FluxChromaError)):
        return cli_wording(str(exc))
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text and text != "None" else type(exc).__name__


def print_json(value: Any) -> None:
    """Print one JSON document on stdout (plain text, no colour)."""
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def report_error(exc: BaseException, *, debug: bool, json_out: bool) -> ExitCode:
    """Print ``error:`` and ``hint:`` lines on stderr (``debug``: the traceback first, ``json_out``:
    also an ``{"error": {...}}`` document on stdout); return the exit code."""
    code = exit_code_for(exc)
    message, hint = _message(exc), hint_for(exc)
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    stderr.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False, emoji=False)
    if hint:
        stderr.print(f"[yellow]hint:[/] {escape(hint)}", markup=True, highlight=False, emoji=False)
    if json_out:
        print_json(
            {"error": {"type": type(exc).__name__, "message": message, "hint": hint, "exit_code": int(code)}}
        )
    return code


@contextmanager
def cli_errors(*, debug: bool = False, json_out: bool = False) -> Iterator[None]:
    """Turn any exception raised in the block into a readable report and an exit code.

    Raises:
        typer.Exit: Whenever the block raised (carries the exit code).
    """
    try:
        yield
    except typer.Exit:
        raise
    except KeyboardInterrupt:
        stderr.print("interrupted", highlight=False)
        raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
    except Exception as exc:  # noqa: BLE001 - the CLI's single error boundary
        raise typer.Exit(int(report_error(exc, debug=debug, json_out=json_out))) from None


def check_settings(url: str | None) -> ConnectionSettings:
    """Resolve ``--url`` (or ``FLUX_CHROMA_URL``) into validated connection settings."""
    from flux_chroma.chroma.settings import ConnectionSettings

    return ConnectionSettings.resolve(url)


def check_tenant(tenant: str | None, tenancy: str = "prefix") -> None:
    """Validate ``--tenant`` (None raises ``TenantError``) and ``--tenancy``."""
    from flux_chroma.chroma.naming import Namespace, validate_tenant

    if tenant is None:
        raise TenantError("no tenant given: every command that touches a collection works inside one tenant.")
    Namespace(validate_tenant(tenant), tenancy)  # type: ignore[arg-type]


def check_collection_target(
    url: str | None, tenant: str | None, tenancy: str, collection: str | None = None
) -> dict[str, Any]:
    """Validate ``--url``, ``--tenant``, ``--tenancy`` and ``-c`` (when given); return the target
    :func:`run_read` takes (``tenant``, ``tenancy`` and the resolved ``url``)."""
    from flux_chroma.chroma.naming import validate_collection_name

    settings = check_settings(url)
    check_tenant(tenant, tenancy)
    if collection is not None:
        validate_collection_name(collection)
    return {"tenant": tenant, "tenancy": tenancy, "url": settings.url}


def json_option(value: str | None, option: str) -> Any:
    """Parse a JSON-valued option such as ``--where`` (None stays None).

    Raises:
        CliError: Not valid JSON (exit code 2).
    """
    if value is None:
        return None
    try:
        return json.loads(value)
    except json.JSONDecodeError as exc:
        raise CliError(
            f"{option} {value!r} is not valid JSON ({exc.msg}).",
            f"""quote it for the shell, e.g. {option} '{{"topic": "db"}}'.""",
            ExitCode.USAGE,
        ) from None


def run_workflow(wf: Any, payload: dict[str, Any], flux_home: Path | None) -> Any:
    """Run a Flux workflow inline in ``flux_home`` and return its output.

    Raises:
        FluxChromaError: The workflow failed (its stored, readable error).
    """
    from flux.errors import ExecutionError

    from flux_chroma.flux_state import flux_home as use_flux_home
    from flux_chroma.flux_state import quiet_flux_logs

    quiet_flux_logs()
    with use_flux_home(flux_home):
        run = wf.run(payload)
    if run.has_succeeded:
        return run.output
    error = run.output
    while isinstance(error, ExecutionError) and not isinstance(error, FluxChromaError) and error.inner_exception:
        error = error.inner_exception
    if isinstance(error, BaseException):
        raise error
    raise FluxChromaError(f"workflow {wf.name} ended {run.state}: {error!r}")


def run_read(task: Any, target: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """Run a read-only task's body (``*args``, ``**kwargs``) in this process, without Flux.

    A read has nothing to resume, and a Flux execution costs a fresh process about a third of
    a ``flux-chroma query`` (``python -m bench.cli_cost``). Failures still go through the
    task's own handling: a typed error, credentials scrubbed, never retried.

    Args:
        task: A ``@chroma_task`` (e.g. :data:`flux_chroma.query`).
        target: ``tenant``, ``tenancy`` and ``url`` (None entries keep the defaults).

    Raises:
        FluxChromaError: The task failed.
    """
    import asyncio

    options = {k: v for k, v in target.items() if v is not None}
    bound = task.with_options(**options, retry_max_attempts=0)
    try:
        return asyncio.run(bound.func(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the task's own handler makes it typed and scrubbed
        error, _ = bound.adjust_failure(exc, kwargs, 0)
        raise error from None
