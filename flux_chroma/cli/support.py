"""Exit codes, error reporting and output helpers shared by the ``flux-chroma`` commands.

Exit codes scripts can rely on (see :class:`ExitCode`):

==== =====================================================================
0    success
1    the operation failed (the message says why)
2    usage error: bad option, argument, tenant, collection name or filter
3    the Chroma server is unreachable
4    ``doctor`` found a failing check
5    ``ingest`` completed, but some files were skipped (named with their reasons)
130  interrupted (Ctrl-C)
143  stopped by SIGTERM
==== =====================================================================

Errors are printed in the words of the command line, not of the Python API (:func:`cli_wording`):
the library's messages name task options (``task.with_options(tenant=...)``,
``retry_max_attempts``, ``embed_and_add``); on the command line the same advice must name
options and commands (``--tenant acme``, ``flux-chroma ingest``), and advice that cannot apply
(the commands run with no retries) is left out. :func:`did_you_mean` turns a misspelt
collection name into a suggestion.

Help text: :class:`Command` shows arguments by their metavar (``PATH...``, ``TEXT``,
``[QUESTION]``), not ``{paths}...`` or ``<list[Path]>``; :func:`plural` says ``1 doc``,
``2 docs``, ``1 batch``, ``3 batches``.
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
from typing import TYPE_CHECKING, Any

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
    "hint_for",
    "print_json",
    "report_error",
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
    """An error the CLI reports as one line plus a hint, with a chosen exit code.

    Args:
        message: What failed.
        hint: What to do about it.
        code: The exit code.
    """

    def __init__(self, message: str, hint: str = "", code: ExitCode = ExitCode.FAILED) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.code = code


def exit_code_for(exc: BaseException) -> ExitCode:
    """Map an exception to the CLI exit code.

    Args:
        exc: The exception that ended the command.

    Returns:
        3 for an unreachable server, 2 for invalid input or configuration, 1 otherwise.
    """
    if isinstance(exc, CliError):
        return exc.code
    if isinstance(exc, (ChromaUnavailableError, NotChromaServerError)):
        return ExitCode.UNREACHABLE
    if isinstance(exc, OneOwnerError):
        return ExitCode.USAGE
    if isinstance(exc, (ConfigurationError, InvalidNameError, InvalidQueryError)):
        return ExitCode.USAGE
    return ExitCode.FAILED


def hint_for(exc: BaseException) -> str:
    """A one-line hint for an exception (what to try next).

    Args:
        exc: The exception.

    Returns:
        The hint text.
    """
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
    """``count`` and ``word``, with the word in the plural unless the count is one.

    Args:
        count: How many.
        word: The singular noun (``doc``, ``chunk``, ``batch``).

    Returns:
        For example ``"1 doc"`` or ``"3 batches"``.
    """
    return f"{count} {word if count == 1 else _IRREGULAR.get(word, word + 's')}"


class Command(TyperCommand):
    """A Typer command whose arguments read as in ordinary Unix help.

    Args:
        *args: As for :class:`typer.core.TyperCommand`.
        **kwargs: As for :class:`typer.core.TyperCommand`.
    """

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
    """Rewrite a library message so that its advice names CLI options and commands.

    Args:
        text: The message.

    Returns:
        The message as the command line should print it.
    """
    for pattern, replacement in _REWRITES:
        text = pattern.sub(replacement, text)
    return re.sub(r"\.\.+", ".", text).strip()


def did_you_mean(name: str, tenant: str, list_names: Callable[[], Sequence[str]]) -> str:
    """A hint for a collection name that does not exist in the tenant.

    Args:
        name: The name given.
        tenant: The tenant.
        list_names: Returns the tenant's collection names (called once; may raise).

    Returns:
        ``did you mean 'handbook'? ...``, or the tenant's names, or how to create one.
    """
    listing = f"`flux-chroma collections --tenant {tenant}` lists them"
    try:
        names = sorted(list_names())
    except Exception:  # noqa: BLE001 - the hint is best effort; the error itself stands
        return f"list the tenant's collections with `flux-chroma collections --tenant {tenant}`."
    if not names:
        return (
            f"list the tenant's collections with `flux-chroma collections --tenant {tenant}`: it has none "
            f"yet; `flux-chroma ingest PATH -c {name} --tenant {tenant}` creates one."
        )
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    if close:
        return f"did you mean {' or '.join(repr(c) for c in close)}? ({listing})"
    shown = ", ".join(repr(n) for n in names[:8]) + (", ..." if len(names) > 8 else "")
    return f"tenant {tenant!r} has {shown} ({listing})."


def _message(exc: BaseException) -> str:
    if isinstance(exc, CliError):
        return cli_wording(exc.message)
    if isinstance(exc, FluxChromaError):
        return cli_wording(str(exc))
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text and text != "None" else type(exc).__name__


def print_json(value: Any) -> None:
    """Print a JSON document on stdout (plain text, no colour, one document).

    Args:
        value: Any JSON-able value.
    """
    sys.stdout.write(json.dumps(value, indent=2, sort_keys=False, default=str) + "\n")
    sys.stdout.flush()


def report_error(exc: BaseException, *, debug: bool, json_out: bool) -> ExitCode:
    """Print an error as ``error: ...`` and ``hint: ...`` lines on stderr.

    With ``json_out`` a ``{"error": {...}}`` document also goes to stdout; with ``debug``
    the traceback is printed first.

    Args:
        exc: The exception.
        debug: Print the traceback.
        json_out: Also print a JSON error document on stdout.

    Returns:
        The exit code for ``exc``.
    """
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

    Args:
        debug: Print tracebacks.
        json_out: Also print errors as JSON on stdout.

    Raises:
        typer.Exit: Always, when the block raised (carries the exit code).
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
    """Resolve ``--url`` (or ``FLUX_CHROMA_URL``) into validated connection settings.

    Args:
        url: The option value.

    Returns:
        The settings.
    """
    from flux_chroma.chroma.settings import ConnectionSettings

    return ConnectionSettings.resolve(url)


def check_tenant(tenant: str | None, tenancy: str = "prefix") -> str:
    """Validate ``--tenant`` and ``--tenancy`` before any network call.

    Args:
        tenant: The tenant (None raises :class:`~flux_chroma.errors.TenantError`).
        tenancy: ``prefix`` or ``database``.

    Returns:
        The tenant.
    """
    from flux_chroma.chroma.naming import Namespace, validate_tenant

    if tenant is None:
        raise TenantError("no tenant given: every command that touches a collection works inside one tenant.")
    Namespace(validate_tenant(tenant), tenancy)  # type: ignore[arg-type]
    return tenant


def check_collection_target(url: str | None, tenant: str | None, tenancy: str, collection: str) -> ConnectionSettings:
    """Validate ``--url``, ``--tenant``/``--tenancy`` and ``-c`` of a command that reads one
    collection, before any network call.

    Returns:
        The connection settings.
    """
    from flux_chroma.chroma.naming import validate_collection_name

    settings = check_settings(url)
    check_tenant(tenant, tenancy)
    validate_collection_name(collection)
    return settings


def json_option(value: str | None, option: str) -> Any:
    """Parse a JSON-valued option such as ``--where``.

    Args:
        value: The raw text, or None.
        option: The option name, for the message.

    Returns:
        The parsed value (None when not given).

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
    """Run a Flux workflow inline with the CLI's Flux home and return its output.

    Args:
        wf: The workflow.
        payload: Its input.
        flux_home: ``--flux-home`` (None: ``FLUX_HOME`` or ``./.flux``).

    Returns:
        The workflow's output.

    Raises:
        FluxChromaError: The workflow failed (its stored, readable error).
    """
    from flux.errors import ExecutionError

    from flux_chroma.errors import FluxChromaError
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
    """Run a read-only flux-chroma task's body in this process, without a Flux execution.

    ``query``, ``collections``, ``docs`` and ``show`` only read: a Flux execution would give
    them nothing to resume or replay, and in a fresh process it costs Flux's state database,
    its migrations and the workflow's registration, about a third of a ``flux-chroma query``
    (``python -m bench.cli_cost``). The body runs with the task's options in scope (tenant,
    URL, pins), and a failure goes through the task's own failure handling, as under Flux:
    a typed error with credentials scrubbed, never retried (an interactive command fails at
    once and says why).

    Args:
        task: A ``@chroma_task`` (e.g. :data:`flux_chroma.query`).
        target: ``tenant``, ``tenancy`` and ``url`` (None entries keep the defaults).
        *args: The task's positional arguments.
        **kwargs: The task's keyword arguments.

    Returns:
        The task's output.

    Raises:
        FluxChromaError: The task failed (its typed, readable error).
    """
    import asyncio

    options = {k: v for k, v in target.items() if k in ("tenant", "tenancy", "url") and v is not None}
    bound = task.with_options(**options, retry_max_attempts=0)
    try:
        return asyncio.run(bound.func(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the task's own handler makes it typed and scrubbed
        error, _ = bound.adjust_failure(exc, kwargs, 0)
        raise error from None
