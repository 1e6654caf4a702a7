"""Small wording and help-text helpers of the ``flux-chroma`` commands.

* :func:`plural`: ``1 doc``, ``2 docs``, ``1 batch``, ``3 batches``.
* :class:`Command`: a Typer command whose usage line and help show arguments by their
  metavar (``PATH...``, ``TEXT``, ``[QUESTION]``), not ``{paths}...`` or ``<list[Path]>``.
"""

from __future__ import annotations

from typing import Any

from typer.core import TyperCommand

from flux_chroma.seams import show_arguments_plain

__all__ = ["plural", "Command"]

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
