"""Measured retrieval quality: labelled questions in, recall@k, MRR and nDCG@10 out."""

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
