"""Row 12: an int8 variant of the default model (dynamic quantization, made locally), evaluated.

The variant is ``onnxruntime.quantization.quantize_dynamic`` applied to this host's copy of
the default ``all-MiniLM-L6-v2`` ``model.onnx`` (never downloaded), written beside copies of
the other five model files, and run by :class:`~flux_chroma.embedding.FastDefaultEmbedding`
pointed at that folder. Speed: docs/s of both models on the same texts. Quality: for each
query, the 10 nearest neighbours in a corpus by the int8 vectors against those by the fp32
vectors (recall@10), on the bench corpus and on 1000-character chunks.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.report import Report, Result, fmt, judge
from bench.timing import embed_timed

__all__ = ["RECALL_GOAL", "make_int8_model", "recall_at_k", "run_row12"]

RECALL_GOAL = 0.95
"""recall@10 of int8 against fp32 neighbours needed before the variant could ship."""


def make_int8_model(source: Path, target: Path) -> Path:
    """Write a dynamically quantized (int8 weights) copy of the model folder ``source``.

    Args:
        source: Folder with the six model files.
        target: New folder for the variant.

    Returns:
        ``target``.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from flux_chroma.embedding.model_files import MODEL_FILES

    target.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        shutil.copy2(source / name, target / name)
    # quantize_dynamic writes a scratch "<input>-inferred.onnx" beside its input and deletes it:
    # quantize a copy, so nothing is written into the shared (maybe read-only) model folder,
    # where two runs at once raced on that file (FileNotFoundError).
    fp32 = target / "model-fp32.onnx"
    (target / "model.onnx").rename(fp32)
    quantize_dynamic(str(fp32), str(target / "model.onnx"), weight_type=QuantType.QInt8)
    fp32.unlink()
    return target


def recall_at_k(base: np.ndarray, other: np.ndarray, queries: np.ndarray, k: int = 10) -> float:
    """Mean share of the fp32 top-k neighbours that the other vectors also put in their top-k.

    Args:
        base: Corpus vectors of the reference model (rows normalized).
        other: The same corpus by the other model.
        queries: Row indices of ``base`` / ``other`` used as queries (each excluded from its
            own neighbours).
        k: Neighbours.

    Returns:
        recall@k in [0, 1].
    """
    hits = 0
    for q in queries:
        sims_b, sims_o = base @ base[q], other @ other[q]
        sims_b[q] = sims_o[q] = -np.inf
        top_b = set(np.argpartition(-sims_b, k)[:k].tolist())
        top_o = set(np.argpartition(-sims_o, k)[:k].tolist())
        hits += len(top_b & top_o)
    return hits / (k * len(queries))


def run_row12(report: Report, plan: Any) -> None:
    """Make the int8 variant, measure speed and recall@10 against fp32, record the decision.

    Args:
        report: The report.
        plan: The run plan (``int8_sample``: texts per corpus).
    """
    from bench.corpus import build_corpus, sized_docs
    from bench.rows_embed import CHUNK_CHARS
    from flux_chroma.embedding import FastDefaultEmbedding

    fp32 = FastDefaultEmbedding()
    source = fp32.model_dir
    n = plan.int8_sample
    corpora = (
        ("bench corpus chunks", [c.text for c in build_corpus(n)]),
        (f"{CHUNK_CHARS}-character chunks", sized_docs(max(20, n // 3), CHUNK_CHARS)),
    )
    with tempfile.TemporaryDirectory(prefix="fc-int8-") as tmp:
        start = time.perf_counter()
        folder = make_int8_model(source, Path(tmp) / "onnx")
        made = time.perf_counter() - start
        int8 = FastDefaultEmbedding(model_dir=folder)
        int8.embed(["warm up"])
        fp32.embed(["warm up"])
        size_ratio = (folder / "model.onnx").stat().st_size / (source / "model.onnx").stat().st_size
        worst = 1.0
        for label, texts in corpora:
            base, t32 = embed_timed(fp32, texts)
            other, t8 = embed_timed(int8, texts)
            rng = np.random.default_rng(12)
            queries = rng.choice(len(texts), size=min(len(texts), 200), replace=False)
            k = min(10, len(texts) - 1)
            recall = recall_at_k(base, other, queries, k)
            worst = min(worst, recall)
            cosine = float(np.mean(np.sum(base * other, axis=1)))
            report.add(
                Result(
                    12,
                    "int8 / fp32 docs/s",
                    f"{len(texts):,} {label}",
                    t32 / t8,
                    "x",
                    "",
                    "info",
                    f"int8 {fmt(len(texts) / t8)} vs fp32 {fmt(len(texts) / t32)} docs/s",
                )
            )
            report.add(
                Result(
                    12,
                    f"recall@{k} of int8 vs fp32 neighbours",
                    f"{len(texts):,} {label}",
                    recall,
                    "",
                    f">= {RECALL_GOAL}",
                    judge(recall, ">=", RECALL_GOAL),
                    f"{len(queries)} queries (corpus texts, self excluded); mean cosine int8 vs fp32 "
                    f"{cosine:.4f}",
                )
            )
    ship = worst >= RECALL_GOAL
    report.note(
        12,
        (
            "- The int8 variant is `onnxruntime.quantization.quantize_dynamic(weight_type=QInt8)` "
            f"of this host's default `model.onnx` (made in {fmt(made)} s, {fmt(100 * size_ratio)}% of "
            "the fp32 file), never downloaded; both models run through `FastDefaultEmbedding` on "
            "the same texts, in the same process, one after the other. recall@10: for up to 200 corpus "
            "texts used as queries, the share of the 10 nearest neighbours by fp32 vectors (cosine) "
            "that the int8 vectors also rank in their top 10."
        ),
        (
            f"- Decision: {'ship' if ship else 'not shipped'}. "
            + (
                "Quality holds on both corpora; it could ship as a separately pinned identity."
                if ship
                else f"The worst recall@10 is {worst:.3f}, below {RECALL_GOAL}: int8 would change "
                "which documents a query returns for about "
                f"{fmt(100 * (1 - worst))}% of the top-10 results, so flux-chroma keeps fp32 as "
                "the only default model and offers no int8 identity."
            )
        ),
    )
