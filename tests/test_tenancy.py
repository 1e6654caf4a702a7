"""Tenant isolation: hostile names never leave the tenant's namespace, and no request for
another tenant's collection ever reaches the server."""

from __future__ import annotations

import uuid

import pytest
from recording_proxy import RecordingProxy
from workflows import hostile_wf, housekeeping_wf, ingest_then_query_wf, ingest_wf

from flux_chroma import errors as E
from flux_chroma.chroma.naming import Namespace

VICTIM_DOC = [{"id": "v1", "text": "the victim's private salary data"}]


def _hostile_names(victim: str, victim_id: str) -> list[tuple[str, object]]:
    return [
        ("other-tenant-full-name", f"{victim}__secret"),
        ("dotdot-slash", f"../{victim}__secret"),
        ("dotdot-prefix", "..secret"),
        ("path-traversal", "secret/../x"),
        ("leading-separator", "__secret"),
        ("trailing-separator", "secret__"),
        ("leading-underscore", "_secret"),
        ("trailing-hyphen", "secret-"),
        ("leading-hyphen", "-secret"),
        ("leading-dot", ".secret"),
        ("double-dot-inside", "secret..x"),
        ("victim-uuid", victim_id),
        ("uuid-looking", str(uuid.UUID(int=7))),
        ("cyrillic-lookalike", "\u0455ecret"),
        ("fullwidth-lookalike", "\uff53\uff45\uff43\uff52\uff45\uff54"),
        ("zero-width-space", "secret\u200b"),
        ("513-chars", "a" * 513),
        ("600-chars", "b" * 600),
        ("empty", ""),
        ("whitespace", "   "),
        ("leading-space", " secret"),
        ("newline", "secret\n"),
        ("nul-byte", "secret\x00"),
        ("percent-encoded", "%2e%2e%2fsecret"),
        ("ip-address", "192.168.0.1"),
        ("wildcard", "*"),
        ("query-string", "secret?x=1"),
        ("fragment", "secret#frag"),
        ("none", None),
        ("int", 123),
        ("list", ["secret"]),
        ("uppercase-copy", "SECRET"),
        ("default-tenant-name", "default_tenant"),
        ("prefix-collision", "2__secret"),
    ]


def test_hostile_names_stay_inside_the_tenant(url: str, raw_client) -> None:  # type: ignore[no-untyped-def]
    # "acme" vs "acme-2" is the classic prefix collision; both exist on the same server.
    base = f"acme{uuid.uuid4().hex[:6]}"
    attacker, victim = base, f"{base}-2"
    assert ingest_wf.run({"tenant": victim, "collection": "secret", "docs": VICTIM_DOC}).has_succeeded
    victim_coll = raw_client.get_collection(f"{victim}__secret")
    names = _hostile_names(victim, str(victim_coll.id))
    assert len(names) >= 25

    with RecordingProxy(url) as proxy:
        for label, name in names:
            run = hostile_wf.run({"tenant": attacker, "name": name, "options": {"url": proxy.url}})
            assert run.has_succeeded, (label, run.output)
            for op, outcome in run.output.items():
                if outcome.startswith("ok:") and op == "add":
                    assert outcome == f"ok:{attacker}__{name}", (label, op, outcome)
                elif outcome.startswith("rejected:"):
                    assert outcome in (
                        "rejected:InvalidNameError",
                        "rejected:CollectionNotFoundError",  # accepted names that are gone after delete
                    ), (label, op, outcome)
        seen = proxy.seen()

    assert seen, "the proxy saw no traffic: the test would prove nothing"
    for request in seen:
        segments = request.path.split("?")[0].split("/")
        assert not any(seg.startswith(f"{victim}__") for seg in segments), request.path
        assert str(victim_coll.id) not in segments, request.path  # never addressed by id
        assert f"{victim}__".encode() not in request.body, request.path
    # The victim's data is untouched.
    assert victim_coll.count() == 1
    # And the attacker's probes left nothing behind (each accepted name was deleted again).
    assert [c.name for c in raw_client.list_collections() if c.name.startswith(f"{attacker}__")] == []


@pytest.mark.parametrize(
    "bad_tenant",
    ["ACME", "ac", "a" * 64, "acme_x", "acme__x", "acme--x", "-acme", "acme-", "\uff41cme", "", " acme", "acme\n", 7, None],
    ids=["upper", "too-short", "too-long", "underscore", "separator", "double-hyphen", "leading-hyphen",
         "trailing-hyphen", "fullwidth", "empty", "space", "trailing-newline", "int", "none"],
)
def test_invalid_tenants_are_rejected_before_any_request(bad_tenant: object) -> None:
    with pytest.raises(E.TenantError):
        Namespace(bad_tenant)  # type: ignore[arg-type]
    run = ingest_wf.run({"tenant": bad_tenant, "collection": "handbook", "docs": VICTIM_DOC})
    assert run.has_failed and isinstance(run.output, E.TenantError), run.output


def test_two_tenants_same_short_name_never_see_each_other(raw_client) -> None:  # type: ignore[no-untyped-def]
    suffix = uuid.uuid4().hex[:6]
    a, b = f"alpha{suffix}", f"beta{suffix}"
    run = ingest_then_query_wf.run(
        {
            "collection": "handbook",
            "question": "vacation policy",
            "by_tenant": {
                a: [{"id": "a1", "text": "Alpha's vacation policy: 30 days."}, {"id": "shared", "text": "alpha copy"}],
                b: [{"id": "b1", "text": "Beta's vacation policy: 20 days."}, {"id": "shared", "text": "beta copy"}],
            },
        }
    )
    assert run.has_succeeded, run.output
    assert {h["id"] for h in run.output[a]} == {"a1", "shared"}
    assert {h["id"] for h in run.output[b]} == {"b1", "shared"}
    assert {h["document"] for h in run.output[a]} == {"Alpha's vacation policy: 30 days.", "alpha copy"}
    assert {h["document"] for h in run.output[b]} == {"Beta's vacation policy: 20 days.", "beta copy"}


def test_listing_and_deleting_respect_prefix_collisions(raw_client) -> None:  # type: ignore[no-untyped-def]
    base = f"acme{uuid.uuid4().hex[:6]}"
    for tenant in (base, f"{base}-2"):
        assert ingest_wf.run({"tenant": tenant, "collection": "docs", "docs": VICTIM_DOC}).has_succeeded
    listed = housekeeping_wf.run({"tenant": base, "op": "list"})
    assert [c["name"] for c in listed.output] == ["docs"]
    assert housekeeping_wf.run({"tenant": base, "op": "delete_collection", "collection": "docs"}).output["deleted"]
    assert raw_client.get_collection(f"{base}-2__docs").count() == 1


def test_database_tenancy_mode(raw_client, url: str) -> None:  # type: ignore[no-untyped-def]
    import chromadb

    tenant = f"dbmode{uuid.uuid4().hex[:6]}"
    opts = {"tenancy": "database"}
    run = ingest_wf.run({"tenant": tenant, "collection": "handbook", "docs": VICTIM_DOC, "options": opts})
    assert run.has_succeeded, run.output
    assert run.output["physical_name"] == "handbook"
    _, port = url.rsplit(":", 1)
    own_db = chromadb.HttpClient(host="127.0.0.1", port=int(port), database=tenant)
    assert own_db.get_collection("handbook").count() == 1
    assert "handbook" not in [c.name for c in raw_client.list_collections()]  # not in the default db
    listed = housekeeping_wf.run({"tenant": tenant, "op": "list", "options": opts})
    assert listed.has_succeeded and [c["name"] for c in listed.output] == ["handbook"]
