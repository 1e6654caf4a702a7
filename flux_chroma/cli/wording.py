"""Errors in the words of the command line, not of the Python API.

The library's messages name task options (``task.with_options(tenant=...)``,
``retry_max_attempts``, ``embed_and_add``); on the command line the same advice must name
options and commands (``--tenant acme``, ``flux-chroma ingest``), and advice that cannot
apply (the commands run with no retries) is left out. :func:`did_you_mean` turns a
misspelt collection name into a suggestion.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence

__all__ = ["cli_wording", "did_you_mean"]

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
