"""Measured retrieval quality: labelled questions in, recall@k, MRR and nDCG@10 out.

* :mod:`~flux_chroma.quality.labels`: read and check a labelled set (JSON lines).
* :mod:`~flux_chroma.quality.metrics`: the metrics, pure functions.
* :mod:`~flux_chroma.quality.evaluate`: ask a collection every question through the public
  ``query`` task (one Flux execution) and score the answers per mode.
"""

from __future__ import annotations

from flux_chroma.quality.evaluate import evaluate, evaluate_collection, evaluation_steps
from flux_chroma.quality.labels import LabelledQuestion, load_labels
from flux_chroma.quality.metrics import score_question, summarize

__all__ = [
    "LabelledQuestion",
    "evaluate",
    "evaluate_collection",
    "evaluation_steps",
    "load_labels",
    "score_question",
    "summarize",
]
