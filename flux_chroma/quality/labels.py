"""A labelled set: one JSON object per line, ``{"question", "relevant_documents"}``.

Optional keys: ``kind`` (figures are also given per kind) and ``id``. Any other key is refused,
so a typo (``relevant_docs``) cannot silently score zero.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from flux_chroma.errors import ConfigurationError

__all__ = ["LabelledQuestion", "load_labels", "check_labels"]

_KNOWN = {"question", "relevant_documents", "kind", "id"}


class LabelledQuestion(TypedDict):
    """One labelled question.

    Attributes:
        question: The question text.
        relevant_documents: Document ids (or chunk ids) that answer it.
        kind: Optional group name, e.g. ``"known-item"`` or ``"natural"``.
        id: Optional question id.
    """

    question: str
    relevant_documents: list[str]
    kind: NotRequired[str]
    id: NotRequired[str]


def _check(item: Any, where: str) -> LabelledQuestion:
    if not isinstance(item, Mapping):
        raise ConfigurationError(f"{where}: a labelled question must be a JSON object, got {type(item).__name__}.")
    unknown = sorted(set(item) - _KNOWN)
    if unknown:
        raise ConfigurationError(f"{where}: unknown key(s) {unknown}; a labelled question has {sorted(_KNOWN)}.")
    question, relevant = item.get("question"), item.get("relevant_documents")
    if not isinstance(question, str) or not question.strip():
        raise ConfigurationError(f"{where}: 'question' must be a non-empty string, got {question!r}.")
    if not isinstance(relevant, list) or not relevant or not all(isinstance(r, str) and r for r in relevant):
        raise ConfigurationError(
            f"{where}: 'relevant_documents' must be a non-empty list of document or chunk ids, got {relevant!r}."
        )
    out: LabelledQuestion = {"question": question, "relevant_documents": list(dict.fromkeys(relevant))}
    for key in ("kind", "id"):
        if key in item:
            if not isinstance(item[key], str) or not item[key]:
                raise ConfigurationError(f"{where}: {key!r} must be a non-empty string, got {item[key]!r}.")
            out[key] = item[key]
    return out


def check_labels(items: Iterable[Any]) -> list[LabelledQuestion]:
    """Check labelled questions given as Python objects.

    Raises:
        ConfigurationError: A malformed question (named by position), or none at all.
    """
    checked = [_check(item, f"labels[{i}]") for i, item in enumerate(items)]
    if not checked:
        raise ConfigurationError("the labelled set is empty: give at least one question.")
    return checked


def load_labels(source: str | Path | Iterable[Mapping[str, Any]]) -> list[LabelledQuestion]:
    """Read a labelled set from a JSON-lines file, or check one given as a list.

    Args:
        source: Path of a ``.jsonl`` file (blank and ``#`` lines skipped), or an iterable of dicts.

    Raises:
        ConfigurationError: Missing file, bad JSON or a malformed question (named by line).

    Example:
        >>> load_labels([{"question": "what is x?", "relevant_documents": ["docs/x.md"]}])
        [{'question': 'what is x?', 'relevant_documents': ['docs/x.md']}]
    """
    if not isinstance(source, (str, Path)):
        return check_labels(source)
    path = Path(source)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigurationError(f"cannot read the labelled set {str(path)!r}: {exc.strerror or exc}.") from None
    except UnicodeDecodeError:
        raise ConfigurationError(f"the labelled set {str(path)!r} is not UTF-8 text.") from None
    out: list[LabelledQuestion] = []
    for number, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigurationError(f"{path}:{number}: not a JSON object ({exc.msg}).") from None
        out.append(_check(item, f"{path}:{number}"))
    if not out:
        raise ConfigurationError(f"the labelled set {str(path)!r} has no questions.")
    return out
