"""Measured retrieval quality: labelled questions in, recall@k, MRR and nDCG@10 out."""

from __future__ import annotations

from flux_chroma.quality.evaluate import evaluate
from flux_chroma.quality.labels import LabelledQuestion, load_labels

__all__ = ["LabelledQuestion", "evaluate", "load_labels"]
