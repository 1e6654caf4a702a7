"""Hybrid retrieval, distinct results and filters, against a real server and the real model.

Every test runs the public ``query`` task through Flux (``ask_wf``) on the session's
``chroma run`` server, with Chroma's default model (all-MiniLM-L6-v2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from query_workflows import ask_wf
from workflows import ingest_wf

from flux_chroma.errors import InvalidQueryError
from flux_chroma.tasks.hybrid import MAX_MATCHES, contains, escape_regex, probes

# A long release-notes chunk names a renamed setting once; ten short texts are about what the
# setting's words mean (idle sessions, lingering sockets, milliseconds). The dense vector of the
# long chunk is diluted by its other fourteen entries.
CHANGELOG = (
    "Release 3.2.0. The dashboard has a dark theme. The manual's typos were fixed. "
    "Exports to CSV keep the column order. The installer no longer asks twice for the target folder. "
    "Search results highlight the matched words. The calendar view starts on Monday in European locales. "
    "Printing a report with more than a hundred pages no longer runs out of memory. "
    "The session setting keep_alive_ms is now called SESSION_LINGER_MS. "
    "Drag and drop works between two open projects. Keyboard shortcuts can be changed in the preferences. "
    "The spell checker knows Portuguese. Charts can be copied as images. Undo remembers fifty steps."
)
NEAR_MISSES = [
    "Idle connections are closed after a timeout measured in milliseconds.",
    "The session keeps running while the user is idle; it expires after thirty minutes.",
    "Linger time: how long a socket waits for unsent data when it is closed.",
    "Set the session timeout in milliseconds in the configuration file.",
    "A keep-alive message is sent every few seconds so the connection stays open.",
    "Sessions are stored on the server and identified by a cookie.",
    "The MS value in a setting name means milliseconds.",
    "Environment variables override the settings of the configuration file.",
    "Session settings can be changed per user in the administration panel.",
    "Connection pooling reuses sockets between requests.",
]
MIT = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this software "
    "and associated documentation files, to deal in the Software without restriction."
)


def _ingest(tenant: str, collection: str, docs: list[dict[str, Any]]) -> None:
    run = ingest_wf.run({"tenant": tenant, "collection": collection, "docs": docs})
    assert run.has_succeeded, run.output


def _ask(tenant: str, collection: str, question: Any, **extra: Any) -> Any:
    run = ask_wf.run({"tenant": tenant, "collection": collection, "question": question, **extra})
    assert run.has_succeeded, run.output
    json.dumps(run.output)  # plain JSON
    return run.output


def _fails(tenant: str, collection: str, question: Any, **extra: Any) -> Exception:
    run = ask_wf.run({"tenant": tenant, "collection": collection, "question": question, **extra})
    assert run.has_failed, run.output
    return run.output  # type: ignore[no-any-return]


@pytest.fixture
def notes(tenant: str) -> str:
    docs = [{"id": "changelog", "text": CHANGELOG}] + [{"id": f"d{i}", "text": t} for i, t in enumerate(NEAR_MISSES)]
    _ingest(tenant, "notes", docs)
    return tenant


@pytest.mark.parametrize("question", ["SESSION_LINGER_MS", "what is SESSION_LINGER_MS?"], ids=["bare", "in-a-question"])
def test_hybrid_finds_an_identifier_that_dense_misses(notes: str, question: str) -> None:
    dense = [h["id"] for h in _ask(notes, "notes", question, k=3, mode="dense")]
    hybrid = [h["id"] for h in _ask(notes, "notes", question, k=3, mode="hybrid")]
    assert "changelog" not in dense  # the diluted chunk is not among the 3 nearest vectors
    assert hybrid[0] == "changelog"


def test_hybrid_is_the_default_and_keeps_dense_distances(notes: str) -> None:
    default = _ask(notes, "notes", "SESSION_LINGER_MS", k=3)
    assert default[0]["id"] == "changelog"
    dense_all = {h["id"]: h["distance"] for h in _ask(notes, "notes", "SESSION_LINGER_MS", k=11, mode="dense")}
    assert all(h["distance"] == pytest.approx(dense_all[h["id"]]) for h in default)


def test_a_smaller_k_returns_the_first_hits_of_a_larger_one(tenant: str) -> None:
    """Found on Debian's libffi docs: "what does libffi do with structures" put the Structures
    page first with k=8 and left it out with k=5. A probe was rare when fewer records than the
    query's candidates (3k, at least k + 10) held it: "gaskets" below, in 21 records, was ranked
    for k=10 and ignored for k=3. Hybrid candidates are now at least 30 for any k. The record
    holding it rises above the dense list's later hits (not its first ones: a question in
    the user's own words, see fuse)."""
    guide = "The descriptor of a seal lists its size, alignment, type and elements; widgetlib then passes gaskets by value."
    docs = [{"id": "guide", "text": guide}]  # 10th nearest vector, first record holding "gaskets"
    docs += [{"id": f"short{i}", "text": f"Widgetlib {part}. See the project page."} for i, part in enumerate(("history", "authors", "platforms", "credits"))]
    docs += [{"id": f"log{i}", "text": f"Release 1.{i}: the installer, printing and charts changed; gaskets item {i} closed; the manual was rewritten."} for i in range(20)]
    topics = "history authors credits platforms releases support licence mirrors mailing-list bug-tracker downloads news"
    docs += [{"id": f"pad{i}", "text": f"Widgetlib {w}. See the widgetlib project page for details."} for i, w in enumerate(topics.split())]
    _ingest(tenant, "widgets", docs)
    question = "what does widgetlib do with gaskets"
    small, large = ([h["id"] for h in _ask(tenant, "widgets", question, k=k)] for k in (3, 10))
    dense = [h["id"] for h in _ask(tenant, "widgets", question, k=10, mode="dense")]
    assert small == large[:3] and large.index("guide") < dense.index("guide") == 9, (small, large, dense)


def test_distinct_results_fold_identical_texts_and_still_return_k(tenant: str) -> None:
    copies = [{"id": f"licence-{name}", "text": MIT, "metadata": {"path": f"{name}/copyright"}} for name in ("git", "git-man", "dbus")]
    others = [{"id": f"o{i}", "text": t} for i, t in enumerate(NEAR_MISSES[:4])]
    _ingest(tenant, "licences", copies + others)
    question = "may I copy the software free of charge?"
    folded = _ask(tenant, "licences", question, k=3, mode="dense")
    texts = [h["document"] for h in folded]
    assert len(folded) == 3 and len(set(texts)) == 3
    first = folded[0]
    assert first["document"] == MIT
    assert sorted([first["id"], *first["duplicates"]]) == sorted(c["id"] for c in copies)
    assert all("duplicates" not in h for h in folded[1:])
    every = _ask(tenant, "licences", question, k=3, mode="dense", distinct=False)
    assert [h["document"] for h in every] == [MIT, MIT, MIT]
    assert all("duplicates" not in h for h in every)


def test_a_page_in_two_formats_is_answered_once(tenant: str, tmp_path: Path) -> None:
    """Node.js ships its API docs as fs.md and fs.html side by side: the same passage came back
    from both, chunked at other bounds (not identical texts), and filled two of five places."""
    from flux_chroma.ingest import run_ingest

    sections = {
        "Reading files": "Use readFile to read a whole file into memory at once; for large files prefer a read stream, which hands the file over in pieces and keeps memory flat.",
        "Writing files": "Use writeFile to replace a file's contents; appendFile adds to the end, and the flag option chooses whether an existing file is truncated or kept.",
        "Watching files": "A watcher reports changes to a file or a folder; on some platforms it reports renames as two events, so compare the names before acting on them.",
    }
    markdown = "# File system\n\n" + "".join(f"## {t}\n\nStability: 2 - Stable. {body}\n\n" for t, body in sections.items())
    html = "<html><body><nav>Index | About this documentation</nav><h1>File system</h1>" + "".join(
        f"<h2>{t}</h2><p>Added in: v0.1.29</p><p>Stability: 2 - Stable. {body}</p>" for t, body in sections.items()
    ) + "</body></html>"
    folder = tmp_path / "api"
    folder.mkdir()
    (folder / "fs.md").write_text(markdown, encoding="utf-8")
    (folder / "fs.html").write_text(html, encoding="utf-8")
    job = {"tenant": tenant, "collection": "api", "sources": [{"kind": "files", "id": "api", "path": str(folder)}],
           "chunking": {"size": 40}}
    ctx = run_ingest(job)
    assert ctx.has_succeeded, ctx.output
    question = "how do I read a large file without loading it all into memory"
    for mode in ("dense", "hybrid"):
        every = _ask(tenant, "api", question, k=6, mode=mode, distinct=False)
        top = _ask(tenant, "api", question, k=3, mode=mode)
        assert {h["document"] for h in every[:2]} != {every[0]["document"]}  # two texts, one passage
        first = top[0]
        assert "read stream" in first["document"] and len(first["duplicates"]) == 1, top
        copy = next(h for h in every if h["id"] == first["duplicates"][0])
        assert copy["citation"]["document"] != first["citation"]["document"]  # the other format
        assert len(top) == 3 and not any("read stream" in h["document"] for h in top[1:]), top
        # Passages that only share a line ("Stability: 2 - Stable.") are not copies.
        assert any("writeFile" in h["document"] or "watcher" in h["document"] for h in top[1:]), top


def test_path_prefix_selects_a_folder_and_its_subfolders(tenant: str, tmp_path: Path) -> None:
    from flux_chroma.ingest import run_ingest

    files = {
        "docs/api/query.md": "The query task returns hits ranked by distance.",
        "docs/api/v2/search.md": "Search combines vectors and the full-text index.",
        "docs/apis.md": "A list of third-party APIs.",
        "docs/guide.md": "The guide explains how to ingest a folder.",
        "notes/api.md": "Notes about the api folder.",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    job = {"tenant": tenant, "collection": "site", "sources": [{"kind": "files", "id": "site", "path": str(tmp_path)}]}
    ctx = run_ingest(job)
    assert ctx.has_succeeded, ctx.output
    question = "how are results ranked?"
    paths = {h["metadata"]["path"] for h in _ask(tenant, "site", question, k=10, path_prefix="docs/api")}
    assert paths == {"docs/api/query.md", "docs/api/v2/search.md"}  # not docs/apis.md
    paths = {h["metadata"]["path"] for h in _ask(tenant, "site", question, k=10, path_prefix="docs/api/")}
    assert paths == {"docs/api/query.md", "docs/api/v2/search.md"}
    one = _ask(tenant, "site", question, k=10, path_prefix="docs/guide.md")
    assert [h["metadata"]["path"] for h in one] == ["docs/guide.md"]
    both = _ask(tenant, "site", question, k=10, path_prefix="docs", where={"path": {"$ne": "docs/apis.md"}})
    assert {h["metadata"]["path"] for h in both} == {"docs/api/query.md", "docs/api/v2/search.md", "docs/guide.md"}

    err = _fails(tenant, "site", question, where={"path": {"$contains": "docs/api"}})
    assert isinstance(err, InvalidQueryError)
    text = str(err)
    assert "where['path']" in text and "can never match" in text and "path_prefix='docs/api'" in text


def test_a_source_id_in_where_narrows_a_path_prefix_to_one_source(tenant: str, tmp_path: Path) -> None:
    """Paths are relative to each source's folder: ``where`` on ``fc_source`` picks the source."""
    from flux_chroma.ingest import run_ingest

    sources = []
    for name in ("alpha", "beta"):
        folder = tmp_path / name / "html"
        folder.mkdir(parents=True)
        (folder / "ranking.md").write_text(f"The {name} manual explains how results are ranked.")
        sources.append({"kind": "files", "id": name, "path": str(tmp_path / name)})
    ctx = run_ingest({"tenant": tenant, "collection": "two", "sources": sources})
    assert ctx.has_succeeded, ctx.output
    question = "how are results ranked?"
    both = _ask(tenant, "two", question, k=10, path_prefix="html")
    assert sorted(h["id"].split("/")[0] for h in both) == ["alpha", "beta"]
    one = _ask(tenant, "two", question, k=10, path_prefix="html", where={"fc_source": "beta"})
    assert [(h["id"].split("/")[0], h["metadata"]["path"]) for h in one] == [("beta", "html/ranking.md")]


def test_a_folder_that_is_not_there_is_no_hits_when_every_file_is_at_the_root(tenant: str, tmp_path: Path) -> None:
    """Files at the root carry no ``fc_dirs`` (Chroma refuses empty lists): still no error."""
    from flux_chroma.ingest import run_ingest

    (tmp_path / "readme.md").write_text("The readme explains how results are ranked.")
    job = {"tenant": tenant, "collection": "flat", "sources": [{"kind": "files", "path": str(tmp_path)}]}
    ctx = run_ingest(job)
    assert ctx.has_succeeded, ctx.output
    assert _ask(tenant, "flat", "how are results ranked?", k=5, path_prefix="docs") == []
    assert [h["metadata"]["path"] for h in _ask(tenant, "flat", "how are results ranked?", k=5)] == ["readme.md"]


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ({"where": {"path": {"$like": "docs%"}}}, "unknown operator '$like'"),
        ({"where_document": {"$matches": "x"}}, "unknown operator '$matches'"),
        ({"mode": "bm25"}, "mode='bm25'"),
        ({"path_prefix": "../etc"}, "not a relative folder path"),
        ({"path_prefix": "/docs"}, "not a relative folder path"),
        ({"distinct": "yes"}, "distinct must be True or False"),
    ],
    ids=["where-unknown-op", "where-document-unknown-op", "unknown-mode", "prefix-dotdot", "prefix-absolute", "distinct-not-bool"],
)
def test_bad_query_arguments_are_typed_errors(notes: str, extra: dict[str, Any], needle: str) -> None:
    err = _fails(notes, "notes", "anything", **extra)
    assert isinstance(err, InvalidQueryError), err
    assert needle in str(err)


@pytest.mark.parametrize(
    "question",
    [
        "the of and to is it",
        "?!... ,;: ---",
        "what does (?i)[a-z]+ \\d{2,} $^ | .* mean? (unclosed [bracket",
        ("SESSION_LINGER_MS " + "settings and sessions " * 500)[:10_000],
    ],
    ids=["stopwords", "punctuation", "regex-metacharacters", "10k-characters"],
)
def test_odd_questions_give_results_not_server_errors(notes: str, question: str) -> None:
    assert len(question) <= 10_000
    hits = _ask(notes, "notes", question, k=3)
    assert len(hits) == 3 and len({h["id"] for h in hits}) == 3


def test_k_larger_than_the_collection_returns_everything_once(notes: str) -> None:
    for mode in ("dense", "hybrid"):
        hits = _ask(notes, "notes", "SESSION_LINGER_MS", k=500, mode=mode)
        assert sorted(h["id"] for h in hits) == sorted(["changelog", *[f"d{i}" for i in range(10)]])


def test_a_collection_without_stored_documents_still_answers(tenant: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    _ingest(tenant, "vectors", [{"id": "seed", "text": "seed"}])
    coll = raw_client.get_collection(f"{tenant}__vectors")
    vectors = coll.get(ids=["seed"], include=["embeddings"])["embeddings"]
    coll.add(ids=["bare-1", "bare-2"], embeddings=[list(vectors[0]), [v * 0.5 for v in vectors[0]]])
    for mode in ("dense", "hybrid"):
        hits = _ask(tenant, "vectors", "SESSION_LINGER_MS seed", k=3, mode=mode)
        assert {h["id"] for h in hits} == {"seed", "bare-1", "bare-2"}
        assert {h["document"] for h in hits if h["id"] != "seed"} == {None}


def test_a_pasted_sentence_is_found_when_a_common_word_fills_the_full_text_answer(tenant: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    """Found on CMake's help pages: "CMake" is in nearly every chunk, so the one full-text request
    (any probe) came back cut at MAX_MATCHES, without the one page holding the pasted sentence,
    and so did the second (identifiers and the sentence). The sentence is now asked alone."""
    _ingest(tenant, "help", [{"id": "intro", "text": "CMake is a build system generator."}])
    vectors = np.random.default_rng(7).normal(size=(MAX_MATCHES, 384))
    raw_client.get_collection(f"{tenant}__help").add(
        ids=[f"filler{i}" for i in range(MAX_MATCHES)],
        embeddings=(vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).tolist(),
        documents=[f"CMake page {i}: a command, a variable or a property." for i in range(MAX_MATCHES)],
    )  # stored before the page the sentence is from: the server returns matches in that order
    sentence = "The generator expression can still be used with a CMake target if the project wants to be explicit about it."
    _ingest(tenant, "help", [{"id": "page", "text": "Predefined features. " + sentence + " It is not required."}])
    assert _ask(tenant, "help", sentence, k=3, mode="hybrid")[0]["id"] == "page"


def test_code_spans_are_quoted_terms_not_the_words_between_them() -> None:
    """reStructuredText and Markdown write ``OLD`` or ``NEW``: the old pattern read `` or `` as a
    quoted "or" (matching nearly every text) and, with the spans, left no room for the sentence."""
    found = probes("Use the :command:`cmake_policy` command to set it to ``OLD`` or ``NEW`` explicitly.")
    assert [(p.kind, p.term) for p in found][:3] == [("quoted", "cmake_policy"), ("quoted", "OLD"), ("quoted", "NEW")]
    assert found[3].kind == "phrase"
    assert [p.term for p in probes("the `$regex` clause and `where_document` filter")][:2] == ["$regex", "where_document"]


def test_an_identifier_typed_in_lower_case_finds_its_prose_spelling() -> None:
    """Found on the AWS CLI's examples: "ipv6" matched only option names (--ipv6-cidr-block),
    not the "IPv6" of the page that answers. Code-like spellings keep their case."""
    [ipv6] = [p for p in probes("how do I disassociate an ipv6 cidr block") if p.kind == "identifier"]
    assert contains(ipv6, "To disassociate an IPv6 CIDR block from a subnet")
    [linger] = [p for p in probes("what is session_linger_ms") if p.kind == "identifier"]
    assert not contains(linger, "The setting SESSION_LINGER_MS")


def test_a_how_or_what_question_is_probed_without_its_asking_words() -> None:
    """Found on the AWS CLI's examples: "how do I get information about a policy attached to an
    iam group" never matched the page's own title (**To get information about a policy attached
    to an IAM group**) word for word, because of "how do I get"."""
    [phrase] = [p for p in probes("How do I get information about a policy attached to an iam group?") if p.kind == "phrase"]
    assert contains(phrase, "**To get information about a policy attached to an IAM group**")
    pasted = "When the server starts, it opens the data directory."  # not a question: kept whole
    assert [p.term for p in probes(pasted) if p.kind == "phrase"] == [pasted.rstrip(".")]


def test_probes_escape_the_question_and_put_identifiers_first() -> None:
    found = probes('error "connection reset by peer" in libfoo-2.1 with --no-cache and ExecStart', limit=5)
    assert [p.kind for p in found][:2] == ["quoted", "phrase"]
    assert [p.term for p in found if p.kind == "identifier"][:3] == ["libfoo-2.1", "--no-cache", "ExecStart"]
    assert probes("the of and to is it") == []
    sentence = "On Debian systems, the complete text of the GNU General Public License version 2 can be found in /usr/share."
    assert len(sentence) > 100 and probes(sentence)[0].kind == "phrase"  # a pasted sentence is a phrase probe
    assert escape_regex("a+b (c)  d.*") == r"a\+b\s+\(c\)\s+d\.\*"
