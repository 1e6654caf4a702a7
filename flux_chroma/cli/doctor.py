"""``flux-chroma doctor``: server, versions, model and pin checks, run in order by
:func:`run_doctor` with the host checks of :mod:`flux_chroma.cli.host_checks`."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from flux_chroma.chroma.settings import ConnectionSettings
from flux_chroma.cli.host_checks import Check, Status, check_filesystems, check_persistent_client
from flux_chroma.errors import FluxChromaError

__all__ = [
    "Check",
    "Status",
    "check_server",
    "check_versions",
    "check_model",
    "check_pins",
    "run_doctor",
]

def check_server(settings: ConnectionSettings) -> tuple[Check, dict[str, Any] | None]:
    """Probe the server's heartbeat; return the check and the server info (None: unreachable)."""
    from flux_chroma.chroma.connection import server_info

    try:
        info = server_info(settings)
    except FluxChromaError as exc:
        return Check("server", "fail", str(exc)), None
    version = info.get("version") or "?"
    return (
        Check("server", "ok", f"{settings.url} answers (API version {version}, max batch {info['max_batch_size']})"),
        info,
    )


def _satisfies(version: str, spec: str) -> bool:
    try:
        return SpecifierSet(spec).contains(Version(version), prereleases=True)
    except InvalidVersion:  # not PEP 440: it cannot be shown to be inside the range
        return False


def _major(version: str) -> int | None:
    try:
        return Version(version).major
    except InvalidVersion:
        return None


def _declared_ranges() -> dict[str, str]:
    try:
        requires = importlib.metadata.requires("flux-chroma") or []
    except importlib.metadata.PackageNotFoundError:
        requires = []
    wanted = (Requirement(line) for line in requires)
    return {r.name.lower(): str(r.specifier) for r in wanted if r.marker is None}


def check_versions(server: dict[str, Any] | None) -> list[Check]:
    """Compare installed chromadb/flux-core with the declared ranges, and the server's API.

    Args:
        server: The server info from :func:`check_server`, or None when unreachable.
    """
    ranges = _declared_ranges()
    checks: list[Check] = []
    client_version = "?"
    for dist in ("chromadb", "flux-core"):
        spec = ranges.get(dist, "")
        try:
            installed = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            checks.append(Check(f"version {dist}", "fail", f"{dist} is not installed."))
            continue
        if dist == "chromadb":
            client_version = installed
        if not spec or _satisfies(installed, spec):
            checks.append(Check(f"version {dist}", "ok", f"{installed} (flux-chroma supports {spec or 'any'})"))
            continue
        detail = (
            f"{installed} is outside the range flux-chroma supports ({spec}); install a "
            f"matching version: pip install '{dist}{spec}'."
        )
        checks.append(Check(f"version {dist}", "fail", detail))
    if server is None:
        return [*checks, Check("version server", "skip", "server unreachable")]
    api = str(server.get("version") or "")
    api_major = _major(api)
    if api_major is not None and api_major == _major(client_version):
        detail = f"server API {api} matches chromadb client {client_version}"
        return [*checks, Check("version server", "ok", detail)]
    detail = (
        f"server reports API version {api or 'unknown'}, but the chromadb {client_version} "
        "client needs the same major version. Run the server from the same chromadb "
        "release (`flux-chroma server` or `chroma run` from this environment)."
    )
    return [*checks, Check("version server", "fail", detail)]


def check_model() -> tuple[Check, Any]:
    """Check that the default model loads from local files (never downloads).

    Returns:
        The check, and the loaded ``FastDefaultEmbedding`` (None when unavailable).
    """
    from flux_chroma.embedding import FastDefaultEmbedding, compute_fingerprint

    # FastDefaultEmbedding resolves FLUX_CHROMA_MODEL_DIR itself (authoritative, no fallback),
    # and its error names every folder it looked in.
    ef = FastDefaultEmbedding()
    try:
        folder = ef.ensure_available()
        fingerprint = compute_fingerprint(ef)
    except FluxChromaError as exc:
        return Check("model", "fail", str(exc)), None
    return (
        Check("model", "ok", f"all-MiniLM-L6-v2 loads offline from {folder} (dim {fingerprint.dimension})"),
        ef,
    )


def _pin_check(collection: Any, label: str, model_ef: Any) -> Check:
    from flux_chroma.chroma.pinning import Pin, check_pin, ef_from_pin, pin_for

    name = f"pin {label}"
    try:
        pin = Pin.from_metadata(collection.metadata)
    except FluxChromaError as exc:
        return Check(name, "fail", str(exc))
    if pin is None:
        return Check(
            name,
            "warn",
            "no pin: created outside flux-chroma, so tasks refuse it unless adopt=True is set "
            "(which pins it to the configured embedding function).",
        )
    if pin.name == "default" and model_ef is None:
        return Check(name, "skip", f"pinned to {pin.describe()}; model unavailable, cannot compare")
    try:
        ef = model_ef if pin.name == "default" else ef_from_pin(pin, collection=label)
        check_pin(pin, pin_for(ef, pin.space), collection=label)
        sample = collection.get(limit=1, include=["embeddings"])
        vectors = sample.get("embeddings")
        if vectors is not None and len(vectors) > 0 and len(vectors[0]) != pin.dimension:
            return Check(
                name,
                "fail",
                f"holds {len(vectors[0])}-dimensional vectors but is pinned to dimension "
                f"{pin.dimension}: something wrote to it without flux-chroma. Migrate the data "
                "into a new collection.",
            )
    except FluxChromaError as exc:
        return Check(name, "fail", str(exc))
    return Check(name, "ok", f"pinned to {pin.describe()}; {collection.count()} records")


def check_pins(settings: ConnectionSettings, tenant: str | None, tenancy: str, model_ef: Any) -> list[Check]:
    """Check that each collection of ``tenant`` (None: the default database) has a matching pin.

    ``model_ef`` is the loaded default embedding function (None when unavailable).
    """
    from flux_chroma.chroma.connection import get_client
    from flux_chroma.chroma.naming import Namespace
    from flux_chroma.errors import CollectionNotFoundError, classify_chroma_error

    namespace = Namespace(tenant, tenancy) if tenant else None  # type: ignore[arg-type]
    scope = f"tenant {tenant!r}" if tenant else "the default database"
    none = [Check("pins", "ok", f"no collections in {scope}")]
    try:
        client = get_client(settings, namespace.database if namespace else None)
        collections = [c for c in client.list_collections() if namespace is None or namespace.owns(c.name)]
    except Exception as exc:  # noqa: BLE001 - classified below
        mapped = classify_chroma_error(exc, action=f"list collections of {scope}", url=settings.url)
        if isinstance(mapped, CollectionNotFoundError):  # database mode: no database yet
            return none
        return [Check("pins", "fail", str(mapped))]
    return [
        _pin_check(c, f"{tenant}/{namespace.short(c.name)}" if namespace else c.name, model_ef)
        for c in sorted(collections, key=lambda c: c.name)
    ] or none


def run_doctor(
    settings: ConnectionSettings,
    *,
    tenant: str | None = None,
    tenancy: str = "prefix",
    project: Path | None = None,
    paths: dict[str, Path] | None = None,
) -> list[Check]:
    """Run every check in order and return the results.

    Args:
        settings: Where the server is.
        tenant: Check this tenant's collections (None: every collection of the default database).
        tenancy: ``prefix`` or ``database``.
        project: Folder scanned for PersistentClient use (None: skip the scan).
        paths: Folders whose filesystem is checked, by what they hold.
    """
    server_check, info = check_server(settings)
    checks = [server_check, *check_versions(info)]
    model_check, ef = check_model()
    checks.append(model_check)
    if info is None:
        checks.append(Check("pins", "skip", "server unreachable"))
    else:
        checks.extend(check_pins(settings, tenant, tenancy, ef))
    if project is not None:
        checks.append(check_persistent_client(project))
    return checks + check_filesystems(paths or {})
