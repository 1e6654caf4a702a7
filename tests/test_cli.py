"""The `flux-chroma` command against real servers: in-process (tests/cli_inproc.py) where no
process boundary is under test, as a real subprocess for the entry point and `server`.

Exit codes are part of the interface: 0 ok, 1 failed, 2 usage, 3 unreachable, 4 check failed.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from cli_inproc import run_cli

from flux_chroma import ChromaServer
from flux_chroma.chroma.pinning import PIN_KEY
from flux_chroma.cli.doctor import _satisfies
from flux_chroma.cli.host_checks import (
    ALLOW_MARKER,
    check_filesystems,
    check_persistent_client,
    filesystem_type,
)
from flux_chroma.cli.support import ExitCode, exit_code_for
from flux_chroma.errors import (
    ChromaUnavailableError,
    CollectionNotFoundError,
    ConfigurationError,
    InvalidQueryError,
    OneOwnerError,
    TenantError,
)

HANG_GUARD = 120  # seconds; only stops a broken test from hanging


def cli_process(*args: str, timeout: float = HANG_GUARD) -> subprocess.CompletedProcess[str]:
    """Run `python -m flux_chroma.cli ARGS` as a real process and capture its output."""
    return subprocess.run(
        [sys.executable, "-m", "flux_chroma.cli", *args], check=False, capture_output=True, text=True, timeout=timeout
    )


def cli(*args: str, env: dict[str, str | None] | None = None) -> subprocess.CompletedProcess[str]:
    """Run `flux-chroma ARGS` in this process (no process boundary is under test) and capture its output."""
    return run_cli(*args, env=env)


def as_json(done: subprocess.CompletedProcess[str]) -> Any:
    assert done.stdout.strip(), done.stderr
    return json.loads(done.stdout)


def closed_port_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def seed(url: str, tenant: str) -> str:
    """Give ``tenant`` a `handbook` holding the demo's three documents (via `demo --url`)."""
    done = cli("demo", "--url", url, "--tenant", tenant, "--json")
    assert done.returncode == 0, done.stderr
    result = as_json(done)
    assert result["receipt"]["physical_name"] == f"{tenant}__handbook"
    assert result["hits"][0]["document"] == "ChromaDB is an embedding database."
    return tenant


@pytest.fixture(scope="module")
def seeded(chroma_server: ChromaServer) -> str:
    """A tenant seeded once for this module's read-only tests."""
    return seed(chroma_server.url, f"cli-{os.getpid()}")


# --------------------------------------------------------------------------- basics


def test_help_lists_every_command_and_the_exit_codes() -> None:
    done = cli_process("--help")  # the real entry point, once
    assert done.returncode == 0
    for command in ("server", "query", "collections", "doctor", "demo", "ingest"):
        assert command in done.stdout
    assert "3 server unreachable" in " ".join(done.stdout.split())
    version = cli_process("--version")
    assert version.returncode == 0 and version.stdout.startswith("flux-chroma ")


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["query", "x", "--tenant", "acme"], "--collection"),
        (["query", "x", "-c", "handbook", "--tenant", "acme", "--where", "{bad"], "not valid JSON"),
        (["collections", "--tenant", "Bad_Tenant"], "tenant"),
        (["collections", "--tenant", "acme", "--url", "./chroma-data"], "filesystem path"),
    ],
    ids=["missing-option", "bad-where-json", "bad-tenant", "path-as-url"],
)
def test_usage_errors_exit_2(args: list[str], needle: str) -> None:
    done = cli(*args)
    assert done.returncode == ExitCode.USAGE, done.stderr
    assert needle in done.stderr
    assert "Traceback" not in done.stderr


def test_exit_codes_follow_the_error_type() -> None:
    assert exit_code_for(ChromaUnavailableError("down")) == 3
    assert exit_code_for(TenantError("t")) == 2
    assert exit_code_for(InvalidQueryError("q")) == 2
    assert exit_code_for(ConfigurationError("c")) == 2
    assert exit_code_for(OneOwnerError("o")) == 2
    assert exit_code_for(CollectionNotFoundError("n")) == 1
    assert exit_code_for(RuntimeError("bug")) == 1


# --------------------------------------------------------------------------- server


def test_server_runs_in_foreground_and_stops_on_sigterm(tmp_path: Path) -> None:
    data = tmp_path / "data"
    proc = subprocess.Popen(
        [sys.executable, "-m", "flux_chroma.cli", "server", "--path", str(data), "--port", "0", "--json"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        info = json.loads(proc.stdout.readline())
        assert httpx.get(info["url"] + "/api/v2/heartbeat", timeout=5).status_code == 200
        second = cli("server", "--path", str(data), "--port", "0")
        assert second.returncode == ExitCode.FAILED
        assert "error:" in second.stderr and "hint:" in second.stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=HANG_GUARD) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with pytest.raises(ProcessLookupError):
        os.kill(info["pid"], 0)  # the chroma child is gone too
    with pytest.raises(httpx.TransportError):
        httpx.get(info["url"] + "/api/v2/heartbeat", timeout=2)


# --------------------------------------------------------------------------- demo, collections, query


def test_demo_text_output_ranks_chroma_first(url: str, tenant: str, tmp_path: Path) -> None:
    done = cli("demo", "--url", url, "--tenant", tenant, "--flux-home", str(tmp_path / "flux"))
    assert done.returncode == 0, done.stderr
    assert f"ingested 3 docs into {tenant}__handbook" in done.stdout
    lines = done.stdout.splitlines()
    first = next(i for i, ln in enumerate(lines) if ln.startswith(" 1. "))
    assert "chroma" in lines[first] and "ChromaDB is an" in lines[first + 1]  # header, then the text
    assert (tmp_path / "flux" / "flux.db").exists()  # Flux state went where we asked


def test_collections_and_query(url: str, seeded: str, tmp_path: Path) -> None:
    listed = as_json(cli("collections", "--url", url, "--tenant", seeded, "--json"))
    assert listed["tenant"] == seeded
    [coll] = listed["collections"]
    assert (coll["name"], coll["count"]) == ("handbook", 3)
    assert coll["pin"]["name"] == "default" and coll["pin"]["dimension"] == 384

    table = cli("collections", "--url", url, "--tenant", seeded)
    assert table.returncode == 0 and "handbook" in table.stdout and "384" in table.stdout

    found = as_json(
        cli("query", "what is chroma?", "-c", "handbook", "-k", "2", "--url", url, "--tenant", seeded, "--json")
    )
    assert found["hits"][0]["id"] == "chroma" and len(found["hits"]) == 2
    filtered = as_json(
        cli("query", "anything", "-c", "handbook", "--where", '{"topic": "flux"}', "--url", url, "--tenant", seeded, "--json")
    )
    assert sorted(h["id"] for h in filtered["hits"]) == ["flux", "sse"]
    assert "--flux-home" not in cli("query", "--help").stdout  # reads run no Flux execution


def test_ingest_reports_progress_per_batch_and_resyncs(url: str, tenant: str, tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "chroma.md").write_text("ChromaDB is an embedding database.")
    (docs / "flux.md").write_text("Flux persists every state transition.")
    (docs / "workers.txt").write_text("Workers claim executions over SSE.")
    (docs / "ignored.json").write_text("not matched by the default globs")
    args = ["ingest", str(docs), "-c", "notes", "--batch-size", "2", "--url", url, "--tenant", tenant]

    first = cli(*args)
    assert first.returncode == 0, first.stderr
    assert f"ingested 3 docs (3 chunks) into {tenant}/notes in 2 batches: added 3" in first.stdout
    progress = first.stderr.splitlines()
    assert sum(line.startswith("batch ") for line in progress) == 2  # stderr is not a tty: one line per batch
    assert progress[0] == f"planned {tenant}/notes: 3 chunks in 2 batches"

    again = as_json(cli(*args, "--json"))
    assert (again["docs"], again["added"], again["skipped"]) == (3, 0, 3)
    found = as_json(cli("query", "what is chroma?", "-c", "notes", "-k", "1", "--url", url, "--tenant", tenant, "--json"))
    assert found["hits"][0]["document"] == "ChromaDB is an embedding database."


def test_ingest_missing_path_is_a_usage_error(url: str, tenant: str, tmp_path: Path) -> None:
    done = cli("ingest", str(tmp_path / "nope"), "-c", "notes", "--url", url, "--tenant", tenant)
    assert done.returncode == ExitCode.USAGE
    assert "does not exist" in done.stderr


def test_query_errors_are_one_line_with_a_hint(url: str, tenant: str) -> None:
    done = cli("query", "x", "-c", "missing-coll", "--url", url, "--tenant", tenant)
    assert done.returncode == ExitCode.FAILED
    assert done.stderr.startswith("error: collection 'missing-coll'")
    assert "hint: list the tenant's collections" in done.stderr
    assert "Traceback" not in done.stderr

    debug = cli("query", "x", "-c", "missing-coll", "--url", url, "--tenant", tenant, "--debug", "--json")
    assert debug.returncode == ExitCode.FAILED
    assert "Traceback" in debug.stderr
    assert as_json(debug)["error"]["type"] == "CollectionNotFoundError"


def test_unreachable_server_exits_3(tenant: str, tmp_path: Path) -> None:
    done = cli("collections", "--url", closed_port_url(), "--tenant", tenant)
    assert done.returncode == ExitCode.UNREACHABLE, done.stderr
    assert "unreachable" in done.stderr and "hint: start a server" in done.stderr
    ingest = cli("ingest", str(tmp_path), "-c", "notes", "--url", closed_port_url(), "--tenant", tenant)
    assert ingest.returncode == ExitCode.UNREACHABLE, ingest.stderr


# --------------------------------------------------------------------------- doctor


def _checks(done: subprocess.CompletedProcess[str]) -> dict[str, dict[str, str]]:
    return {c["name"]: c for c in as_json(done)["checks"]}


def test_doctor_passes_on_a_healthy_setup(url: str, seeded: str, tmp_path: Path) -> None:
    done = cli("doctor", "--url", url, "--tenant", seeded, "--project", str(tmp_path), "--data-dir", str(tmp_path), "--json")
    assert done.returncode == 0, done.stdout
    checks = _checks(done)
    assert as_json(done)["ok"] is True
    for name in ("server", "version chromadb", "version flux-core", "version server", "model", "persistent-client"):
        assert checks[name]["status"] == "ok", checks[name]
    assert checks[f"pin {seeded}/handbook"]["status"] == "ok"
    assert checks["filesystem chroma data"]["status"] == "ok"


def test_doctor_catches_server_down_missing_model_and_persistent_client(tmp_path: Path) -> None:
    empty_model = tmp_path / "model"
    empty_model.mkdir()
    project = tmp_path / "project"
    project.mkdir()
    (project / "app.py").write_text("import chromadb\nclient = chromadb.PersistentClient(path='./db')\n")
    done = cli(
        "doctor", "--url", closed_port_url(), "--project", str(project), "--json",
        env={"FLUX_CHROMA_MODEL_DIR": str(empty_model)},
    )
    assert done.returncode == ExitCode.CHECK_FAILED
    checks = _checks(done)
    assert checks["server"]["status"] == "fail" and "unreachable" in checks["server"]["detail"]
    assert checks["model"]["status"] == "fail" and "FLUX_CHROMA_MODEL_DIR" in checks["model"]["detail"]
    assert checks["persistent-client"]["status"] == "fail" and "app.py:2" in checks["persistent-client"]["detail"]
    assert checks["pins"]["status"] == "skip"

    text = cli("doctor", "--url", closed_port_url(), "--project", str(project), env={"FLUX_CHROMA_MODEL_DIR": str(empty_model)})
    assert text.returncode == ExitCode.CHECK_FAILED
    assert any(line.startswith("fail  server") for line in text.stdout.splitlines())


def test_doctor_catches_a_wrong_pin(url: str, tenant: str, raw_client, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    seeded = seed(url, tenant)
    collection = raw_client.get_collection(f"{seeded}__handbook")
    pin = json.loads(collection.metadata[PIN_KEY])
    fingerprint = json.loads(pin["fingerprint"])
    fingerprint["probe"] = [p + 0.5 for p in fingerprint["probe"]]  # what another model would give
    pin["fingerprint"] = json.dumps(fingerprint)
    collection.modify(metadata={**collection.metadata, PIN_KEY: json.dumps(pin)})

    done = cli("doctor", "--url", url, "--tenant", seeded, "--project", str(tmp_path), "--json")
    assert done.returncode == ExitCode.CHECK_FAILED
    check = _checks(done)[f"pin {seeded}/handbook"]
    assert check["status"] == "fail" and "fingerprint" in check["detail"]


def test_persistent_client_scan_ignores_strings_and_marked_lines(tmp_path: Path) -> None:
    (tmp_path / "ok.py").write_text(
        '"""Never call PersistentClient( from a worker."""\n'
        "# chromadb.PersistentClient(path='x')\n"
        f"client = chromadb.PersistentClient(path='x')  # {ALLOW_MARKER}\n"
    )
    (tmp_path / ".venv").mkdir()
    (tmp_path / ".venv" / "lib.py").write_text("PersistentClient(path='x')\n")
    assert check_persistent_client(tmp_path).status == "ok"
    (tmp_path / "bad.py").write_text("from chromadb import PersistentClient\nc = PersistentClient('x')\n")
    result = check_persistent_client(tmp_path)
    assert result.status == "fail" and "bad.py:2" in result.detail and "ok.py" not in result.detail


def test_network_filesystems_are_warned_about(tmp_path: Path) -> None:
    nfs, fuse, local = tmp_path / "nfs share", tmp_path / "bucket", tmp_path / "local"
    for folder in (nfs, fuse, local):
        folder.mkdir()
    nfs_escaped = str(nfs).replace(" ", "\\040")
    mounts = tmp_path / "mounts"
    mounts.write_text(
        "/dev/root / ext4 rw 0 0\n"
        f"server:/export {nfs_escaped} nfs4 rw 0 0\n"
        f"gcsfuse {fuse} fuse.gcsfuse rw 0 0\n"
    )
    checks = check_filesystems({"data": nfs / "chroma", "cache": fuse, "home": local}, mounts)
    assert [c.status for c in checks] == ["warn", "warn", "ok"]
    assert "nfs4" in checks[0].detail and "fuse.gcsfuse" in checks[1].detail
    assert filesystem_type(local, mounts.read_text().splitlines()) == ("ext4", "/")


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [("1.5.9", "<1.6,>=1.5.0", True), ("1.6.0", "<1.6,>=1.5.0", False), ("0.87.5", ">=0.87.5,<0.88", True), ("0.88.1", "<0.88", False), ("1.5-local build", "<1.6", False)],
    ids=["inside", "above", "lower-bound", "next-minor", "not-pep-440"],
)
def test_version_ranges(version: str, spec: str, ok: bool) -> None:
    assert _satisfies(version, spec) is ok
