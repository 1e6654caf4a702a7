"""Source identity: two jobs whose folders share a base name never delete each other's records.

Issue 22, item 3: a files source's id defaulted to the folder's base name, so jobs reading
``.../legal/docs`` and ``.../hr/docs`` into one collection were both source ``docs`` and the
second job's ``cleanup="full"`` deleted every record of the first. Real server, real Flux
executions, the real CLI; the default model embeds.
"""

from __future__ import annotations

import json
import pickle
import subprocess
from pathlib import Path
from typing import Any

import pytest
from cli_inproc import run_cli
from flux.utils import FluxEncoder
from ingest_workflows import embedded_texts
from workflows import housekeeping_wf

from flux_chroma import ChromaOptions
from flux_chroma.errors import ConfigurationError, SourceConflictError
from flux_chroma.ingest import IngestJob, register_loader, run_ingest
from flux_chroma.ingest.cleanup import cleanup_stale
from flux_chroma.ingest.sources import iter_units, source_location

HANG_GUARD = 180  # seconds; only stops a broken test from hanging

LEGAL = {f"contract-{i}": f"Legal contract {i}: the supplier shall deliver item {i} within {i + 2} days." for i in range(5)}
HR = {f"policy-{i}": f"HR policy {i}: employees may take {i + 20} days of leave per year." for i in range(3)}


def write_folder(root: Path, files: dict[str, str]) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / f"{name}.md").write_text(text, encoding="utf-8")
    return root


def two_folders(tmp_path: Path) -> tuple[Path, Path]:
    """``legal/docs`` (5 files) and ``hr/docs`` (3 files): one base name, two folders."""
    return write_folder(tmp_path / "legal" / "docs", LEGAL), write_folder(tmp_path / "hr" / "docs", HR)


def job(tenant: str, folder: Path, **source: Any) -> dict[str, Any]:
    return {
        "tenant": tenant,
        "collection": "shared",
        "sources": [{"kind": "files", "path": str(folder), **source}],
        "cleanup": "full",
    }


def contents(raw_client: Any, tenant: str) -> dict[str, tuple[str, dict[str, Any]]]:
    """``{id: (document, metadata)}`` of the tenant's ``shared`` collection (plain client)."""
    got = raw_client.get_collection(f"{tenant}__shared").get(include=["documents", "metadatas"])
    return {rid: (doc, meta) for rid, doc, meta in zip(got["ids"], got["documents"], got["metadatas"], strict=True)}


def texts(records: dict[str, tuple[str, dict[str, Any]]]) -> list[str]:
    return sorted(doc for doc, _ in records.values())


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*args)  # in-process: what it prints, stores and exits with is under test


# --------------------------------------------------------------------------- the bug


def test_two_folders_with_one_base_name_keep_their_records_through_the_library(
    tmp_path: Path, tenant: str, url: str, raw_client: Any
) -> None:
    legal, hr = two_folders(tmp_path)
    first = run_ingest(job(tenant, legal))
    assert first.has_succeeded, first.output
    assert (first.output["added"], first.output["deleted"]) == (5, 0)
    legal_records = contents(raw_client, tenant)

    second = run_ingest(job(tenant, hr))
    assert second.has_succeeded, second.output
    assert (second.output["added"], second.output["deleted"]) == (3, 0)
    both = contents(raw_client, tenant)
    assert texts(both) == sorted([*LEGAL.values(), *HR.values()])
    assert {rid: both[rid] for rid in legal_records} == legal_records  # the first job's records, untouched

    again = run_ingest(job(tenant, legal))  # and the first job's own full cleanup spares the second's
    assert again.has_succeeded, again.output
    assert (again.output["added"], again.output["skipped"], again.output["deleted"]) == (0, 5, 0)
    assert contents(raw_client, tenant) == both


def test_two_folders_with_one_base_name_keep_their_records_through_the_cli(
    tmp_path: Path, tenant: str, url: str, raw_client: Any
) -> None:
    legal, hr = two_folders(tmp_path)
    common = ["-c", "shared", "--cleanup", "full", "--url", url, "--tenant", tenant, "--json"]
    first = cli("ingest", str(legal), *common)
    assert first.returncode == 0, first.stderr
    legal_records = contents(raw_client, tenant)
    assert len(legal_records) == 5

    second = cli("ingest", str(hr), *common)
    assert second.returncode == 0, second.stderr
    report = json.loads(second.stdout)
    assert (report["added"], report["deleted"]) == (3, 0)
    both = contents(raw_client, tenant)
    assert texts(both) == sorted([*LEGAL.values(), *HR.values()])
    assert {rid: both[rid] for rid in legal_records} == legal_records


# --------------------------------------------------------------------------- default ids


def test_default_ids_are_a_name_plus_a_digest_of_the_absolute_path(tmp_path: Path, monkeypatch: Any) -> None:
    legal, hr = tmp_path / "legal" / "docs", tmp_path / "hr" / "docs"
    a, b = (IngestJob.from_dict(job("acme", folder)).sources[0] for folder in (legal, hr))
    assert a["id"] != b["id"] and a["id"].startswith("docs-") and b["id"].startswith("docs-")
    assert (source_location(a), source_location(b)) == (str(legal), str(hr))
    monkeypatch.chdir(tmp_path / "..")
    spelled = IngestJob.from_dict(job("acme", Path(tmp_path.name) / "hr" / ".." / "legal" / "docs")).sources[0]
    assert spelled == a  # a relative spelling with '..' is the same source
    faq = IngestJob.from_dict({**job("acme", legal), "sources": [{"kind": "jsonl", "path": str(tmp_path / "faq.jsonl")}]})
    assert faq.sources[0]["id"].startswith("faq-")
    explicit = IngestJob.from_dict(job("acme", legal, id="legal-docs")).sources[0]
    assert explicit["id"] == "legal-docs" and source_location(explicit) == str(legal)
    assert "relocate" not in explicit and IngestJob.from_dict(job("acme", legal, relocate=True)).sources[0]["relocate"] is True


@pytest.mark.parametrize(
    ("source", "needle"),
    [
        ({"relocate": "yes"}, "relocate must be true or false"),
        ({"relocate": 1}, "relocate must be true or false"),
        ({"id": "a#b"}, "without '#'"),
    ],
    ids=["relocate-string", "relocate-int", "hash-in-id"],
)
def test_bad_source_identity_fields_are_configuration_errors(tmp_path: Path, source: dict[str, Any], needle: str) -> None:
    with pytest.raises(ConfigurationError, match=needle):
        IngestJob.from_dict(job("acme", tmp_path, **source))


def test_a_custom_loader_is_located_by_its_kind_and_parameters() -> None:
    seen: list[dict[str, Any]] = []

    @register_loader("identity-probe")
    def load(params: dict[str, Any]) -> list[dict[str, Any]]:
        seen.append(params)
        return [{"id": "r1", "text": "one record"}]

    open_ = IngestJob.from_dict({"tenant": "acme", "collection": "tickets", "sources": [{"kind": "identity-probe", "id": "t", "query": "open", "relocate": True}]})
    closed = IngestJob.from_dict({"tenant": "acme", "collection": "tickets", "sources": [{"kind": "identity-probe", "id": "t", "query": "closed"}]})
    assert source_location(open_.sources[0]) == 'identity-probe:{"query":"open"}'
    assert source_location(open_.sources[0]) != source_location(closed.sources[0])
    long = {"kind": "identity-probe", "id": "t", "query": "x" * 300}
    assert source_location(IngestJob.from_dict({**open_.to_dict(), "sources": [long]}).sources[0]).startswith("identity-probe:sha256:")
    list(iter_units(open_.sources[0]))
    assert seen == [{"id": "t", "query": "open"}]  # 'relocate' is the job's, not the loader's


# --------------------------------------------------------------------------- conflicts


def test_one_explicit_id_from_two_folders_is_refused_naming_both(tmp_path: Path, tenant: str, url: str, raw_client: Any) -> None:
    legal, hr = two_folders(tmp_path)
    assert run_ingest(job(tenant, legal, id="docs")).has_succeeded
    before = contents(raw_client, tenant)

    second = run_ingest(job(tenant, hr, id="docs"))
    assert second.has_failed
    err = second.output
    assert isinstance(err, SourceConflictError), err
    text = str(err)
    assert f"reads {hr}," in text and f"read from {legal}." in text and "'docs'" in text
    assert "Nothing was written" in text and "'relocate': true" in text and "another id" in text
    assert f"read from {legal}" in json.dumps(err, cls=FluxEncoder)  # readable across a JSON hop
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is SourceConflictError and str(back) == text
    assert contents(raw_client, tenant) == before  # nothing written, nothing deleted


def test_the_cli_refuses_one_source_id_from_two_folders_and_takes_a_moved_one_over(
    tmp_path: Path, tenant: str, url: str, raw_client: Any
) -> None:
    legal, hr = two_folders(tmp_path)
    common = ["-c", "shared", "--cleanup", "full", "--url", url, "--tenant", tenant]
    assert cli("ingest", str(legal), "--source-id", "docs", *common).returncode == 0
    before = contents(raw_client, tenant)

    clash = cli("ingest", str(hr), "--source-id", "docs", *common)
    assert clash.returncode == 2, clash.stderr  # a usage problem: change the arguments
    flat = " ".join(clash.stderr.split())
    assert str(hr) in flat and str(legal) in flat and "hint: add --source-id NAME" in flat
    assert "Traceback" not in clash.stderr
    assert contents(raw_client, tenant) == before

    mismatch = cli("ingest", str(legal), str(hr), "--source-id", "docs", *common)
    assert mismatch.returncode == 2 and "got 1 --source-id values for 2 paths" in mismatch.stderr

    moved = tmp_path / "archive" / "docs"
    moved.parent.mkdir()
    legal.rename(moved)
    (moved / "contract-4.md").unlink()
    refused = cli("ingest", str(moved), "--source-id", "docs", *common)
    assert refused.returncode == 2 and str(legal) in " ".join(refused.stderr.split())
    taken = cli("ingest", str(moved), "--source-id", "docs", "--relocate", *common, "--json")
    assert taken.returncode == 0, taken.stderr
    report = json.loads(taken.stdout)
    assert (report["added"], report["skipped"], report["deleted"], report["embedded"]) == (0, 4, 1, 0)
    assert report["sources"][0]["relocated"] == 5 and report["sources"][0]["location"] == str(moved)
    after = contents(raw_client, tenant)
    assert sorted(after) == sorted(rid for rid in before if "contract-4" not in rid)
    assert {meta["fc_loc"] for _, meta in after.values()} == {str(moved)}


def test_a_moved_folder_with_an_explicit_id_is_taken_over_only_with_relocate(
    tmp_path: Path, tenant: str, url: str, raw_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "embedded.jsonl"
    monkeypatch.setenv("FC_EMBED_LOG", str(log))
    legal = write_folder(tmp_path / "legal" / "docs", LEGAL)
    spec = {**job(tenant, legal, id="legal"), "embedding_function": {"name": "counting-default"}}
    assert run_ingest(spec).has_succeeded
    before = contents(raw_client, tenant)
    embedded_before = len(embedded_texts(log))

    moved = tmp_path / "legal-2024"
    legal.rename(moved)
    (moved / "contract-0.md").write_text("Legal contract 0, amended: delivery within 30 days.", encoding="utf-8")
    at_new = {**spec, "sources": [{"kind": "files", "path": str(moved), "id": "legal"}]}
    refused = run_ingest(at_new)
    assert isinstance(refused.output, SourceConflictError) and str(legal) in str(refused.output)
    assert contents(raw_client, tenant) == before

    taken = run_ingest({**at_new, "sources": [{**at_new["sources"][0], "relocate": True}]})
    assert taken.has_succeeded, taken.output
    report = taken.output
    assert (report["added"], report["skipped"], report["deleted"]) == (1, 4, 1)  # the amended contract
    assert report["sources"][0]["relocated"] == 5
    assert [t for _, t in embedded_texts(log)[embedded_before:]] == [(moved / "contract-0.md").read_text()]
    after = contents(raw_client, tenant)
    for rid in set(before) & set(after):  # kept records: only their location changed
        assert after[rid] == (before[rid][0], {**before[rid][1], "fc_loc": str(moved)})
    assert {meta["fc_loc"] for _, meta in after.values()} == {str(moved)}

    plain = run_ingest(at_new)  # the id now belongs to the new folder: no flag needed any more
    assert plain.has_succeeded, plain.output
    assert (plain.output["added"], plain.output["skipped"], plain.output["deleted"]) == (0, 5, 0)
    assert "relocated" not in plain.output["sources"][0]


def test_a_moved_folder_with_a_default_id_is_a_new_source_and_the_old_records_stay_until_removed(
    tmp_path: Path, tenant: str, url: str, raw_client: Any
) -> None:
    legal = write_folder(tmp_path / "legal" / "docs", LEGAL)
    first = run_ingest(job(tenant, legal))
    assert first.has_succeeded
    old = first.output["sources"][0]
    before = contents(raw_client, tenant)

    moved = tmp_path / "archive" / "docs"
    moved.parent.mkdir()
    legal.rename(moved)
    second = run_ingest(job(tenant, moved))
    assert second.has_succeeded, second.output
    new = second.output["sources"][0]
    assert new["id"] != old["id"] and new["location"] == str(moved)
    assert (second.output["added"], second.output["deleted"]) == (5, 0)
    after = contents(raw_client, tenant)
    assert len(after) == 10 and {rid: after[rid] for rid in before} == before  # the old records are untouched

    removed = housekeeping_wf.run(
        {"tenant": tenant, "op": "delete_documents", "collection": "shared", "where": {"fc_loc": old["location"]}}
    )
    assert removed.has_succeeded, removed.output
    assert sorted(contents(raw_client, tenant)) == sorted(set(after) - set(before))


def test_records_without_a_location_are_adopted_only_with_relocate(tmp_path: Path, tenant: str, url: str, raw_client: Any) -> None:
    legal = write_folder(tmp_path / "legal" / "docs", LEGAL)
    spec = job(tenant, legal, id="legal")
    assert run_ingest(spec).has_succeeded
    collection = raw_client.get_collection(f"{tenant}__shared")
    ids = collection.get(include=[])["ids"]
    collection.update(ids=ids, metadatas=[{"fc_loc": None} for _ in ids])  # as an earlier release wrote them
    legacy = contents(raw_client, tenant)
    assert all("fc_loc" not in meta for _, meta in legacy.values())

    refused = run_ingest(spec)
    assert isinstance(refused.output, SourceConflictError)
    assert "no recorded location" in str(refused.output) and str(legal) in str(refused.output)
    assert contents(raw_client, tenant) == legacy

    adopted = run_ingest(job(tenant, legal, id="legal", relocate=True))
    assert adopted.has_succeeded, adopted.output
    assert (adopted.output["added"], adopted.output["skipped"], adopted.output["deleted"]) == (0, 5, 0)
    assert contents(raw_client, tenant) == {rid: (doc, {**meta, "fc_loc": str(legal)}) for rid, (doc, meta) in legacy.items()}


def test_cleanup_spares_a_record_of_another_location_whatever_its_ids_say(tmp_path: Path, tenant: str, url: str, raw_client: Any) -> None:
    legal = write_folder(tmp_path / "legal" / "docs", LEGAL)
    spec = IngestJob.from_dict(job(tenant, legal, id="docs"))
    assert run_ingest(spec).has_succeeded
    collection = raw_client.get_collection(f"{tenant}__shared")
    dimension = len(collection.get(limit=1, include=["embeddings"])["embeddings"][0])
    # Written between this job's plan and its cleanup by a job reading another folder under the
    # same id (the plan's check cannot see the future): same id scheme, same source id.
    foreign = {"fc_source": "docs", "fc_loc": "/srv/hr/docs", "fc_hash": "0" * 32, "path": "policy-9.md"}
    collection.add(ids=["docs/policy-9.md#0:000000000000"], documents=["HR policy 9"], metadatas=[foreign], embeddings=[[0.1] * dimension])
    (legal / "contract-4.md").unlink()

    result = cleanup_stale(ChromaOptions(tenant=tenant, url=url).target("shared"), spec, None)
    assert result["deleted"] == 1  # the vanished contract, and nothing else
    left = contents(raw_client, tenant)
    assert left["docs/policy-9.md#0:000000000000"] == ("HR policy 9", foreign)
    assert not any("contract-4" in rid for rid in left) and len(left) == 5
