"""Hybrid's one-request full-text path and citable hits.

Against the session's real ``chroma run`` server: the one combined regular expression finds
exactly the records the per-probe clauses find, :func:`contains` agrees with the server on
every record, and hits of ingested files carry their citation (document, path, heading,
offsets) into the result and the CLI's header line.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from query_workflows import ask_wf
from typer.testing import CliRunner
from workflows import ingest_wf

from flux_chroma.cli.app import app
from flux_chroma.tasks.hybrid import MAX_MATCHES, combined_clause, contains, distinct, fuse, probes
from flux_chroma.tasks.reader import _Search

TEXTS = [
    "The session setting keep_alive_ms is now called SESSION_LINGER_MS.",
    "session_linger_ms in lower case is not the identifier.",
    "Idle connections are closed after a timeout measured in milliseconds.",
    "A regex like (?i)[a-z]+ must be searched literally, brackets and all.",
    "Linger   time:\nhow long a socket waits for unsent data.",
    "Nothing here matches anything asked.",
    "Each subnet can hold one IPv6 CIDR block.",
]
QUESTIONS = [
    "what is SESSION_LINGER_MS?",
    "linger time how long a socket waits",
    "is (?i)[a-z]+ searched literally?",
    'the "connections are closed" part about milliseconds',
    "which subnet has an ipv6 block",
]


def _ingest(tenant: str, collection: str, docs: list[dict[str, Any]]) -> None:
    run = ingest_wf.run({"tenant": tenant, "collection": collection, "docs": docs})
    assert run.has_succeeded, run.output


def test_a_word_of_a_question_in_own_words_lifts_a_record_but_not_above_the_dense_first_hits() -> None:
    """Natural questions (140 pydoc, 42 README and 30 gcloud man-page questions): one word held
    by a record ranked it above the dense list's first hit, so hybrid found the answer first
    less often than dense (READMEs: 0.619 against 0.786)."""
    dense, word = [f"d{i}" for i in range(10)], ["d9"]  # the 10th nearest holds a word of the question
    order = fuse([(dense, 1.0), (word, 1.0)], exact=[False, False])
    assert order[:3] == ["d0", "d1", "d2"] and order.index("d9") < 9
    named = fuse([(dense, 1.0), (word, 1.5)], exact=[False, False], named=True)
    assert named[0] == "d9"  # an identifier of the question still lifts its record first


def test_distinct_folds_a_longer_cut_of_a_shown_passage_and_keeps_overlapping_ones() -> None:
    """valgrind ships its manual as HTML and as a PDF: a PDF chunk held an HTML section whole
    plus the start of the next section, 75% of it a repeat, and came back as a second hit."""
    section = (
        "BBV also counts the fldcw instruction. This instruction is used on x86 machines in various ways; it is most "
        "commonly found when converting floating point values into integers. On Pentium 4 systems the retired instruction "
        "performance counter counts this instruction as two instructions (all other known processors only count it as one)."
    )
    following = (
        "BBV supports threaded programs. When a program has multiple threads, an additional basic block vector file is "
        "created for each thread, named after the thread number."
    )
    half = " ".join(section.split()[len(section.split()) // 2 :])
    hits = [
        {"id": "html", "document": section},
        {"id": "pdf", "document": f"{section}\n\n13.6. Threaded Executable Support\n\n{following}"},  # cut longer
        {"id": "shifted", "document": f"{half} {following} Each file holds one vector per interval."},  # half new
        {"id": "status", "document": "Stability: 2 - Stable."},
        {"id": "long", "document": "Stability: 2 - Stable. Cachegrind simulates how a program uses the cache hierarchy."},  # holds a short hit
    ]
    kept = distinct(hits, k=5)
    assert [h["id"] for h in kept] == ["html", "shifted", "status", "long"]
    assert kept[0]["duplicates"] == ["pdf"] and all("duplicates" not in h for h in kept[1:])


def test_one_combined_clause_finds_what_the_probes_find_one_by_one(tenant: str, raw_client: Any) -> None:
    _ingest(tenant, "texts", [{"id": f"t{i}", "text": t} for i, t in enumerate(TEXTS)])
    coll = raw_client.get_collection(f"{tenant}__texts")
    for question in QUESTIONS:
        found = probes(question)
        assert found, question
        union: set[str] = set()
        for probe in found:
            server = set(coll.get(where_document=probe.clause, include=[])["ids"])
            local = {f"t{i}" for i, text in enumerate(TEXTS) if contains(probe, text)}
            assert local == server, (question, probe)  # contains() decides as the server does
            union |= server
        combined = set(coll.get(where_document=combined_clause(found), include=[])["ids"])
        assert combined == union and union, question


def test_a_rare_probe_is_asked_again_when_common_ones_fill_the_answer(tenant: str, raw_client: Any) -> None:
    """Found on the AWS CLI's examples: "ec2" and "instance" filled the one full-text answer
    (MAX_MATCHES records) without the page holding "terminate", and asking every probe but the
    words again filled it too. The probes holding at most half of a full answer are asked again."""
    coll = raw_client.create_collection(f"{tenant}__ec2", embedding_function=None)
    vectors = np.random.default_rng(7).normal(size=(MAX_MATCHES + 1, 8)).tolist()
    fillers = [f"EC2 instance page {i}: sizes, prices and regions." for i in range(MAX_MATCHES)]
    coll.add(ids=[f"filler{i}" for i in range(MAX_MATCHES)], embeddings=vectors[:-1], documents=fillers)
    coll.add(ids=["page"], embeddings=vectors[-1:], documents=["To terminate an EC2 instance, run terminate-instances."])
    found = probes("how do I terminate an ec2 instance")  # stored after the fillers: the server returns them first
    assert [p.term for p in found][1:] == ["ec2", "terminate", "instance"]
    assert "page" in _Search(SimpleNamespace(collection=coll), None, None).matches(found)  # type: ignore[arg-type]


def test_the_records_of_a_phrase_are_ranked_beside_a_common_quoted_term(tenant: str, raw_client: Any) -> None:
    """Found on git's release notes: a pasted sentence holding "git diff" (in 271 records) was
    not in the top 10 although its one record holds the whole sentence. The records of every
    probe were ranked by vector in one request cut at 30 per probe, so the nearest records
    holding "git diff" filled it and the phrase's record, farther by vector, was cut."""
    from concurrent.futures import ThreadPoolExecutor

    coll = raw_client.create_collection(f"{tenant}__relnotes", embedding_function=None)
    rng = np.random.default_rng(11)
    question_vector = rng.normal(size=8)
    fillers = [f'* "git diff" learned option number {i} for the output of renames.' for i in range(200)]
    coll.add(ids=[f"note{i}" for i in range(200)], embeddings=(question_vector + rng.normal(scale=0.05, size=(200, 8))).tolist(), documents=fillers)
    note = (' * "git diff" used to fail when core.safecrlf is set and the working\n   tree contents had mixed CRLF/LF line endings. '
            'Committing such a\n   content must be prohibited, but "git diff" should help the user to\n   locate and fix such problems without failing.')
    coll.add(ids=["1.8.3.4"], embeddings=[(-question_vector).tolist()], documents=[note])  # far from the question by vector
    question = 'Committing such a content must be prohibited, but "git diff" should help the user to locate and fix such problems without failing.'
    found = probes(question)
    assert [p.kind for p in found][:2] == ["quoted", "phrase"]
    search = _Search(SimpleNamespace(collection=coll), None, None)  # type: ignore[arg-type]
    with ThreadPoolExecutor(2) as pool:
        hits, _ = search.hybrid(found, question_vector.tolist(), 30, pool.submit(search.matches, found), pool)
    assert hits[0]["id"] == "1.8.3.4", [h["id"] for h in hits[:5]]


GUIDE = """# Guide

This guide covers the whole life of a deployment: planning the machines, sizing the disks,
choosing a network layout, reading the logs, rotating credentials, and asking for help when
something looks wrong. Read it once from the start before changing anything in production.

## Install

To install offline, copy the wheel files to the machine and run pip with --no-index.

## Upgrade

Upgrading keeps the stored collections.
"""


def test_hits_of_ingested_files_are_citable(url: str, tenant: str, tmp_path: Path) -> None:
    from flux_chroma.ingest import run_ingest

    folder = tmp_path / "site"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "guide.md").write_text(GUIDE, encoding="utf-8")
    job = {"tenant": tenant, "collection": "cited", "sources": [{"kind": "files", "id": "site", "path": str(folder)}],
           "chunking": {"size": 40}}
    ctx = run_ingest(job)
    assert ctx.has_succeeded, ctx.output
    for mode in ("dense", "hybrid"):
        run = ask_wf.run({"tenant": tenant, "collection": "cited", "question": "how do I install offline?", "k": 1, "mode": mode})
        assert run.has_succeeded, run.output
        hit = run.output[0]
        json.dumps(hit)
        cited = hit["citation"]
        assert cited["document"] == "site/docs/guide.md" and cited["path"] == "docs/guide.md"
        assert cited["heading"].endswith("Install"), cited
        assert cited["format"] == "md"
        assert GUIDE[cited["start"] : cited["end"]] == hit["document"]
        assert not any(k.startswith("fc_") for k in hit["metadata"])  # metadata stays the user's

    done = CliRunner().invoke(app, ["query", "how do I install offline?", "-c", "cited", "-k", "1", "--url", url,
                                    "--tenant", tenant])
    assert done.exit_code == 0, done.output
    header = done.output.splitlines()[1]
    assert re.match(r"^ 1\. \d\.\d{4}  docs/guide\.md #\d+ > .*Install", header), done.output


def test_records_without_ingestion_metadata_have_no_citation(tenant: str) -> None:
    _ingest(tenant, "plain", [{"id": "a", "text": "plain text", "metadata": {"path": "x.md"}}])
    run = ask_wf.run({"tenant": tenant, "collection": "plain", "question": "plain text", "k": 1})
    assert run.has_succeeded, run.output
    assert "citation" not in run.output[0]
