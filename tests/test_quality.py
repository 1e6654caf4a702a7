"""Measured retrieval quality: eval's figures, the CLI, and the migration quality gate.

Real server, real Flux executions. The figures of the first test are computed by hand from
the ranked lists the deterministic toy model gives (asserted first); the gate refuses a
migration from the real default model to the toy one, whose vectors carry no meaning.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import toy_embeddings  # noqa: F401 - registers "toy"
from test_cli import as_json, cli
from test_documents import ingest, steps

from flux_chroma import evaluate, load_labels, run_migration
from flux_chroma.errors import ConfigurationError, QualityGateError
from flux_chroma.ingest import run_ingest
from flux_chroma.quality.evaluate import query_modes

HARBOUR = {i: f"town/harbour.md#{i}:{sha}" for i, sha in enumerate(["87bc872e34fa", "f7ac5ffbbc64", "cd311e9d7c0c", "36bb957f8f6c", "bbe0a695b1ce"])}
SHORT, SOUP = "town/notes/short.md#0:f99fd2ffd67b", "town/recipes/soup.md#0:650766f7c1d5"
LABELS = [
    {"question": "When does the harbour open?", "relevant_documents": ["town/recipes/soup.md"], "kind": "natural"},
    {"question": "bread", "relevant_documents": ["town/notes/short.md", "town/recipes/soup.md"], "kind": "natural"},
    {"question": "ferry in winter", "relevant_documents": [HARBOUR[3]], "kind": "natural"},  # a chunk id
    {"question": "where is the missing page", "relevant_documents": ["town/missing.md"], "kind": "known-item"},
    {"question": "where is the missing page", "relevant_documents": ["town/harbour.md", "town/recipes/soup.md"], "kind": "known-item"},
]
DENSE = {"mode": "dense"} if query_modes() is not None else {}
RANKED = {  # what the toy model ranks (dense, k=10 over 7 chunks), checked before any figure
    "When does the harbour open?": [HARBOUR[0], HARBOUR[4], HARBOUR[3], SHORT, HARBOUR[1], SOUP, HARBOUR[2]],
    "bread": [HARBOUR[2], HARBOUR[1], SHORT, SOUP, HARBOUR[4], HARBOUR[3], HARBOUR[0]],
    "ferry in winter": [HARBOUR[1], HARBOUR[2], HARBOUR[4], HARBOUR[3], SOUP, SHORT, HARBOUR[0]],
    "where is the missing page": [HARBOUR[4], HARBOUR[0], SHORT, HARBOUR[1], SOUP, HARBOUR[3], HARBOUR[2]],
}


def test_eval_figures_equal_a_hand_computation(tenant: str, tmp_path: Path) -> None:
    ingest(tenant, tmp_path / "town")
    questions = list(RANKED)
    asked = steps(tenant, ("query", ["stored", questions], {"k": 10, **DENSE}))
    assert asked.has_succeeded, asked.output
    assert {q: [h["id"] for h in hits] for q, hits in zip(questions, asked.output[0], strict=True)} == RANKED

    report = evaluate("stored", LABELS, tenant=tenant, modes=["dense"])

    # By hand. Relevant items are first found at ranks: q1 soup 6; q2 short 3, soup 4;
    # q3 the chunk 4; q4 never; q5 harbour 1 (its later chunks do not count again), soup 5.
    log2 = math.log2
    ideal1, ideal2 = 1.0, 1 + 1 / log2(3)
    ndcg = [(1 / log2(7)) / ideal1, (1 / log2(4) + 1 / log2(5)) / ideal2, (1 / log2(5)) / ideal1, 0.0, (1 + 1 / log2(6)) / ideal2]
    expected = {
        "questions": 5,
        "recall@1": (0 + 0 + 0 + 0 + 0.5) / 5,
        "recall@5": (0 + 1 + 1 + 0 + 1) / 5,
        "recall@10": (1 + 1 + 1 + 0 + 1) / 5,
        "hit@1": (0 + 0 + 0 + 0 + 1) / 5,
        "hit@5": (0 + 1 + 1 + 0 + 1) / 5,
        "hit@10": (1 + 1 + 1 + 0 + 1) / 5,
        "mrr": (1 / 6 + 1 / 3 + 1 / 4 + 0 + 1) / 5,
        "ndcg@10": sum(ndcg) / 5,
    }
    assert report["modes"]["dense"] == pytest.approx(expected, abs=5e-5)
    assert report["modes"]["dense"]["ndcg@10"] == pytest.approx(0.4416, abs=1e-4)
    assert report["kinds"]["known-item"]["dense"] == pytest.approx(
        {"questions": 2, "recall@1": 0.25, "recall@5": 0.5, "recall@10": 0.5, "hit@1": 0.5, "hit@5": 0.5, "hit@10": 0.5, "mrr": 0.5, "ndcg@10": ndcg[4] / 2},
        abs=5e-5,
    )
    assert [q["first_rank"]["dense"] for q in report["per_question"]] == [6, 3, 4, None, 1]
    assert report["unknown_documents"] == ["town/missing.md"]  # named, so a wrong source id is noticed


@pytest.mark.parametrize(
    ("labels", "words"),
    [
        ([], "empty"),
        ([{"question": "x", "relevant_docs": ["a"]}], "unknown key(s) ['relevant_docs']"),
        ([{"question": "", "relevant_documents": ["a"]}], "'question' must be a non-empty string"),
        ([{"question": "x", "relevant_documents": []}], "non-empty list"),
        (["not an object"], "must be a JSON object"),
    ],
    ids=["empty", "typo-key", "empty-question", "no-relevant", "not-object"],
)
def test_malformed_labels_are_refused_by_position(labels: list[Any], words: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        load_labels(labels)
    assert words in str(caught.value)


def test_a_labels_file_error_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "labels.jsonl"
    path.write_text('{"question": "a", "relevant_documents": ["d"]}\n\n# comment\n{"question": "b"\n')
    with pytest.raises(ConfigurationError, match=r"labels.jsonl:4: not a JSON object"):
        load_labels(path)


def test_an_unknown_mode_is_refused_before_any_query(tenant: str) -> None:
    with pytest.raises(ConfigurationError, match="mode 'no-such-mode'"):
        evaluate("stored", LABELS, tenant=tenant, modes=["no-such-mode"])


# --- the real default model: eval on the CLI and the migration gate ------------------------

FACTS = {
    "cheetah": "The cheetah is the fastest land animal and can sprint at over 100 kilometres per hour.",
    "everest": "Mount Everest, on the border of Nepal and China, is the highest mountain above sea level.",
    "nile": "The Nile flows north through eleven countries and empties into the Mediterranean Sea.",
    "insulin": "Insulin is a hormone made by the pancreas that lets cells take up glucose from the blood.",
    "bread": "Sourdough bread rises because wild yeast and lactic acid bacteria ferment the dough.",
    "violin": "A violin has four strings tuned in fifths and is played with a bow strung with horsehair.",
    "tides": "Ocean tides are caused mainly by the gravitational pull of the Moon on the Earth's water.",
    "python": "Python is a programming language whose blocks are defined by indentation instead of braces.",
    "chess": "In chess, castling moves the king two squares towards a rook, which jumps over the king.",
    "coffee": "Coffee beans are the roasted seeds of the Coffea plant's red cherries.",
    "volcano": "A volcano erupts when molten rock called magma rises through the Earth's crust.",
    "penguin": "Emperor penguins breed during the Antarctic winter and the males keep the eggs warm on their feet.",
    "bitcoin": "Bitcoin transactions are recorded on a public ledger called a blockchain.",
    "rainbow": "A rainbow appears when sunlight is refracted and reflected inside raindrops.",
    "marathon": "A marathon race is 42.195 kilometres long.",
    "honey": "Honey bees make honey from flower nectar and store it in wax combs.",
    "vaccine": "Vaccines train the immune system to recognise a pathogen without causing the disease.",
    "glacier": "Glaciers are slow rivers of ice that form where snow accumulates faster than it melts.",
    "sushi": "Sushi combines vinegared rice with fish, seaweed or vegetables.",
    "eclipse": "A solar eclipse happens when the Moon passes between the Sun and the Earth.",
}
QUESTIONS = {  # no content word of a question occurs in any document: full-text search cannot help
    "cheetah": "Which spotted feline is quickest?",
    "everest": "What is the loftiest summit?",
    "nile": "Which African waterway heads northward?",
    "insulin": "Which pancreatic secretion regulates glycaemia?",
    "bread": "What makes leavened loaves puff up?",
    "violin": "How is a fiddle pitched?",
    "tides": "Why does seawater climb and recede twice daily?",
    "python": "Which coding tongue relies on whitespace nesting?",
    "chess": "Which manoeuvre swaps monarch and tower?",
    "coffee": "Where does espresso originate botanically?",
    "volcano": "What causes lava explosions?",
    "penguin": "Which flightless birds incubate through polar darkness?",
    "bitcoin": "Where is cryptocurrency spending logged?",
    "rainbow": "Why do coloured arcs emerge after showers?",
    "marathon": "What distance is the classic endurance footrace?",
    "honey": "How do hives produce their sweet syrup?",
    "vaccine": "How does immunisation protect people?",
    "glacier": "How do frozen masses creep downhill over centuries?",
    "sushi": "What is in nigiri and maki?",
    "eclipse": "Why does daylight vanish when our satellite obscures it?",
}
_FUNCTION_WORDS = {"which", "what", "does", "when", "their", "into", "over", "after", "through", "where"}


def test_the_gate_questions_share_no_content_word_with_the_documents() -> None:
    corpus = " ".join(FACTS.values()).lower()
    shared = {w for q in QUESTIONS.values() for w in re.findall(r"[a-z]{4,}", q.lower()) if w not in _FUNCTION_WORDS and w in corpus}
    assert shared == set()


def facts_collection(tenant: str, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in FACTS.items():
        (folder / f"{name}.txt").write_text(text + "\n", encoding="utf-8")
    run = run_ingest({"tenant": tenant, "collection": "facts", "sources": [{"kind": "files", "path": str(folder), "id": "facts"}]})
    assert run.has_succeeded, run.output
    labels = folder.parent / "facts.jsonl"
    labels.write_text("".join(json.dumps({"question": q, "relevant_documents": [f"facts/{n}.txt"]}) + "\n" for n, q in QUESTIONS.items()))
    return labels


def test_cli_eval_docs_and_show_on_the_default_model(url: str, tenant: str, tmp_path: Path) -> None:
    labels = facts_collection(tenant, tmp_path / "facts")
    common = ["-c", "facts", "--url", url, "--tenant", tenant]
    evaluating = [*common, "--flux-home", str(tmp_path / "flux")]
    report = as_json(cli("eval", str(labels), *evaluating, "--json"))
    api = evaluate("facts", labels, tenant=tenant, options={"url": url})
    assert report["modes"] == api["modes"] and report["modes"]["dense"]["questions"] == 20
    assert report["modes"]["dense"]["recall@5"] >= 0.9  # the real model finds plain paraphrases
    text = cli("eval", str(labels), *evaluating)
    assert text.returncode == 0, text.stderr
    assert "recall@5" in text.stdout and f"{api['modes']['dense']['recall@5']:.4f}" in text.stdout
    listed = as_json(cli("docs", *common, "--json"))["documents"]
    assert len(listed) == 20 and listed[0] == {"document_id": "facts/bitcoin.txt", "path": "bitcoin.txt", "chunks": 1}
    shown = cli("show", "facts/marathon.txt", *common)
    assert shown.returncode == 0 and "42.195 kilometres" in shown.stdout and "facts/marathon.txt" in shown.stdout
    missing = cli("show", "facts/nothing.txt", *common)
    assert missing.returncode == 2 and "no document 'facts/nothing.txt'" in missing.stderr
    typo = tmp_path / "typo.jsonl"
    typo.write_text(json.dumps({"question": "How long is a marathon?", "relevant_documents": ["fact/marathon.txt"]}) + "\n")
    warned = cli("eval", str(typo), *evaluating)
    assert warned.returncode == 0 and "1 relevant document id(s) name nothing" in warned.stderr and "fact/marathon.txt" in warned.stderr
    bad = cli("eval", str(tmp_path / "absent.jsonl"), *evaluating)
    assert bad.returncode != 0 and "cannot read the labelled set" in bad.stderr


def test_a_copy_folded_into_a_hit_is_found_at_its_rank(tenant: str, tmp_path: Path) -> None:
    """``query`` folds copies into the hit they repeat (``duplicates``); eval counts them at its
    rank. Before, a relevant copy that was folded counted as never found."""
    folder = tmp_path / "kb"
    folder.mkdir()
    for name in ("marathon.txt", "marathon-copy.txt"):
        (folder / name).write_text(FACTS["marathon"] + "\n", encoding="utf-8")
    (folder / "sushi.txt").write_text(FACTS["sushi"] + "\n", encoding="utf-8")
    run = run_ingest({"tenant": tenant, "collection": "copies", "sources": [{"kind": "files", "path": str(folder), "id": "kb"}]})
    assert run.has_succeeded, run.output
    labels = [{"question": QUESTIONS["marathon"], "relevant_documents": ["kb/marathon.txt", "kb/marathon-copy.txt"]}]
    figures = evaluate("copies", labels, tenant=tenant, modes=["dense", "hybrid"], k=[1, 2])["modes"]
    for mode in ("dense", "hybrid"):
        assert (figures[mode]["recall@1"], figures[mode]["mrr"], figures[mode]["ndcg@10"]) == (1.0, 1.0, 1.0), figures


def test_migration_gate_refuses_a_worse_model_and_keeps_the_alias(tenant: str, tmp_path: Path) -> None:
    labels = facts_collection(tenant, tmp_path / "facts")
    spec = {"tenant": tenant, "collection": "facts", "embedding_function": {"name": "toy", "config": {"dim": 16}}}
    refused = run_migration(spec, labels=labels, max_recall_drop=0.05)
    assert refused.has_failed and isinstance(refused.output, QualityGateError), refused.output.get("gate")
    message = str(refused.output)
    assert "recall@10" in message and "NOT switched" in message and "max_recall_drop=0.05" in message
    before = evaluate("facts", labels, tenant=tenant)  # the name still serves the default model
    assert before["modes"]["dense"]["recall@10"] == 1.0
    accepted = run_migration(spec, labels=labels, max_recall_drop=1.0)
    assert accepted.has_succeeded, accepted.output
    gate = accepted.output["gate"]
    assert gate["recall@10_before"] == 1.0 and gate["drop"] > 0.05 and gate["passed"] is True
    assert accepted.output["switch"]["target"] == accepted.output["target"]


def test_gate_options_are_checked() -> None:
    spec = {"tenant": "acme", "collection": "facts", "embedding_function": {"name": "toy", "config": {"dim": 16}}}
    with pytest.raises(ConfigurationError, match="max_recall_drop needs labels"):
        run_migration({**spec, "max_recall_drop": 0.1})
    with pytest.raises(ConfigurationError, match="between 0 and 1"):
        run_migration(spec, labels=[{"question": "q", "relevant_documents": ["d"]}], max_recall_drop=5)


