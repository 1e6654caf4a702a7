"""The migration quality gate: refuse to switch an alias to a collection that answers worse.

The labelled set is asked of the old collection (pinned model) and the new one (new model)
through ``query`` in its default mode; a recall@10 drop above ``max_recall_drop`` fails the
migration before the alias is switched.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from flux_chroma.errors import ConfigurationError, QualityGateError
from flux_chroma.quality.evaluate import evaluation_steps
from flux_chroma.quality.labels import LabelledQuestion, check_labels

__all__ = ["check_gate", "quality_gate"]

_K = 10


def check_gate(labels: Any, max_recall_drop: Any) -> tuple[list[dict[str, Any]] | None, float | None]:
    """Validate a gate's labelled set and threshold (both ``None``: no gate).

    Raises:
        ConfigurationError: A threshold without labels, a threshold outside 0..1, bad labels.
    """
    if labels is None:
        if max_recall_drop is not None:
            raise ConfigurationError("max_recall_drop needs labels= : the labelled set to measure recall@10 on.")
        return None, None
    drop = 0.0 if max_recall_drop is None else max_recall_drop
    if isinstance(drop, bool) or not isinstance(drop, (int, float)) or not 0.0 <= float(drop) <= 1.0:
        raise ConfigurationError(f"max_recall_drop must be a number between 0 and 1 (a recall@10 difference), got {max_recall_drop!r}.")
    return [dict(q) for q in check_labels(labels)], float(drop)


async def quality_gate(
    source: str,
    target: str,
    labels: list[LabelledQuestion],
    max_recall_drop: float,
    options: Mapping[str, Any],
) -> dict[str, Any]:
    """Measure recall@10 of ``source`` (pinned model) and ``target`` (``options``' model).

    Returns:
        ``{"questions", "recall@10_before", "recall@10_after", "drop", "max_recall_drop", "passed": True}``.

    Raises:
        QualityGateError: The drop is larger than ``max_recall_drop``.
    """
    before = await evaluation_steps(source, labels, modes=["default"], ks=[_K], options={**options, "embedding_function": None})
    after = await evaluation_steps(target, labels, modes=["default"], ks=[_K], options=options)
    old, new = before["modes"]["default"][f"recall@{_K}"], after["modes"]["default"][f"recall@{_K}"]
    drop = round(old - new, 4)
    result = {"questions": len(labels), "recall@10_before": old, "recall@10_after": new, "drop": drop, "max_recall_drop": max_recall_drop, "passed": drop <= max_recall_drop}
    if not result["passed"]:
        raise QualityGateError(
            f"migration quality gate: recall@10 on {len(labels)} labelled questions is {new:.4f} with the new "
            f"model in {target!r} against {old:.4f} in {source!r}, a drop of {drop:.4f}, more than "
            f"max_recall_drop={max_recall_drop}. The alias was NOT switched; readers keep {source!r}. "
            f"Inspect {target!r} (flux-chroma eval LABELS -c {target}), choose another model, or raise "
            "max_recall_drop if the drop is acceptable."
        )
    return result
