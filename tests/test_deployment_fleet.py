"""docs/deployment.md's fleet, started exactly as the doc says: its first job must complete.

The Flux server and worker blocks are cut out of docs/deployment.md (``fleet-server`` and
``fleet-worker`` markers) and run as written: every ``export`` line becomes the process's
environment, on top of nothing but ``HOME`` and ``PATH`` (no ``FLUX_LOG_LEVEL``, no
``PYTHONPATH``, no preloaded modules), and every ``flux`` command runs as a real process.
Only the doc's example hosts, ports and paths are replaced by loopback ones (the table
below); a variable or command the test does not know fails it, so the test breaks when the
doc changes. Then a ``parallel`` = 2 ingestion job with the default model runs through the
Flux server and must store exactly its chunks; ``flux-chroma doctor --flux`` must pass on
that fleet and name a worker on which flux-chroma cannot be imported, with its error.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import chromadb
import httpx
import pytest

from flux_chroma import ChromaServer
from flux_chroma.embedding import chroma_default_model_dir
from flux_chroma.local_fleet import LocalPostgres, free_port
from flux_chroma.local_fleet import Processes as Stack

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.slow

HANG_GUARD = 240.0  # seconds; only stops a broken test from hanging
BIN = Path(sys.executable).parent
DOC = ROOT / "docs" / "deployment.md"


def doc_block(marker: str) -> list[list[str]]:
    """The shell lines between ``<!-- marker:start -->`` and ``<!-- marker:end -->``, split."""
    text = DOC.read_text()
    body = text.split(f"<!-- {marker}:start -->", 1)[1].split(f"<!-- {marker}:end -->", 1)[0]
    code = re.search(r"```bash\n(.*?)```", body, flags=re.DOTALL)
    assert code, f"no bash block between the {marker} markers of {DOC}"
    return [shlex.split(line, comments=True) for line in code.group(1).splitlines() if line.strip()]


def plain_env() -> dict[str, str]:
    """What a fresh shell has before the doc's exports: HOME and PATH (this venv first)."""
    return {"HOME": os.environ["HOME"], "PATH": f"{BIN}{os.pathsep}/usr/local/bin:/usr/bin:/bin"}


class DocFleet:
    """The doc's Flux server and workers on loopback, stopped by pid."""

    def __init__(self, workdir: Path, chroma_url: str) -> None:
        self.workdir = workdir
        self.stack = Stack(workdir)
        self.postgres = LocalPostgres()
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.chroma_url = chroma_url
        self.token = ""
        self.server_env: dict[str, str] = {}

    def substitute(self, value: str) -> str:
        """The doc's example values -> this machine's (a value left unknown fails the test)."""
        table = {
            "postgresql+psycopg://flux@db.internal:5432/flux": self.postgres.url,
            "http://flux.internal:8080": self.url,
            "http://10.0.0.5:8000": self.chroma_url,
            "/var/lib/flux": str(self.workdir / "flux-home"),
            "/opt/models/all-MiniLM-L6-v2": str(chroma_default_model_dir()),
            "/var/cache/flux-chroma": str(self.workdir / "embedding-cache"),
            "0.0.0.0": "127.0.0.1",
            "8080": str(self.port),
            "...": self.token,
        }
        value = table.get(value, value)
        for doc_value, ours in table.items():
            if len(doc_value) > 4:
                value = value.replace(doc_value, ours)
        assert not re.search(r"internal|10\.0\.0\.5|/var/|/opt/", value), (
            f"docs/deployment.md has a value this test does not know: {value!r}; add it to the table"
        )
        return value

    def run_block(self, marker: str, on_command: Any) -> dict[str, str]:
        env = plain_env()
        for words in doc_block(marker):
            if words[0] == "export":
                for assignment in words[1:]:
                    name, _, value = assignment.partition("=")
                    env[name] = self.substitute(value)
            else:
                assert words[0] == "flux", f"unexpected command in the {marker} block: {words}"
                on_command([self.substitute(w) for w in words], env)
        return env

    def start(self, workers: int) -> DocFleet:
        self.postgres.start()

        def server_command(argv: list[str], env: dict[str, str]) -> None:
            if argv[1:3] == ["start", "server"]:
                self.stack.start("flux-server", [str(BIN / "flux"), *argv[1:]], env)
                wait(lambda: httpx.get(f"{self.url}/health", timeout=2).json()["status"] == "healthy", self.stack)
            elif argv[1:3] == ["server", "bootstrap-token"]:
                self.token = run([str(BIN / "flux"), *argv[1:]], env).strip()
            else:
                raise AssertionError(f"unexpected flux command in the server block: {argv}")

        self.server_env = self.run_block("fleet-server", server_command)
        assert self.token, "flux server bootstrap-token printed nothing"
        for n in range(1, workers + 1):
            self.start_worker(f"worker-{n}")
        wait(lambda: len(self.online()) >= workers, self.stack)
        return self

    def start_worker(self, name: str, **extra: str) -> None:
        def worker_command(argv: list[str], env: dict[str, str]) -> None:
            assert argv[1:3] == ["start", "worker"], f"unexpected flux command in the worker block: {argv}"
            self.stack.start(name, [str(BIN / "flux"), *argv[1:]], {**env, **extra})

        self.run_block("fleet-worker", worker_command)

    def online(self) -> list[dict[str, Any]]:
        workers = httpx.get(f"{self.url}/workers", timeout=5).json()
        return [w for w in workers if w.get("status") == "online"]

    def flux(self, *args: str) -> str:
        return run([str(BIN / "flux"), *args, "--server-url", self.url], self.server_env)

    def stop_process(self, name: str) -> None:
        for entry in list(self.stack.procs):
            if entry[0] == name:
                os.killpg(entry[1].pid, 15)
                entry[1].wait(timeout=30)
                self.stack.procs.remove(entry)

    def stop(self) -> None:
        self.stack.stop()
        self.postgres.stop()


def run(argv: list[str], env: dict[str, str]) -> str:
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, f"{argv[:4]} failed ({done.returncode}): {done.stderr or done.stdout}"
    return done.stdout


def wait(probe: Any, stack: Stack) -> None:
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        for name, proc, _ in stack.procs:
            assert proc.poll() is None, f"{name} exited {proc.returncode}:\n{stack.log_tail(name, 30)}"
        try:
            if probe():
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        time.sleep(0.3)
    raise AssertionError("the fleet did not come up:\n" + "\n".join(stack.log_tail(n, 20) for n, _, _ in stack.procs))


@pytest.fixture(scope="module")
def fleet(chroma_server: ChromaServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocFleet]:
    stack = DocFleet(tmp_path_factory.mktemp("doc-fleet"), chroma_server.url)
    try:
        yield stack.start(2)
    finally:
        stack.stop()


def corpus(root: Path) -> Path:
    """Eight small Markdown files: enough chunks for several batches and units."""
    root.mkdir(parents=True, exist_ok=True)
    topics = ["refunds", "shipping", "returns", "warranty", "support", "billing", "privacy", "security"]
    for n, topic in enumerate(topics):
        paragraphs = [f"Section {k} of the {topic} policy, clause {n}.{k}: terms apply as written." for k in range(6)]
        (root / f"{topic}.md").write_text(f"# {topic.title()}\n\n" + "\n\n".join(paragraphs) + "\n")
    return root


def test_a_parallel_job_completes_on_the_fleet_the_docs_describe(fleet: DocFleet, tmp_path: Path) -> None:
    fleet.flux("workflow", "register", str(ROOT / "flux_chroma" / "ingest" / "workflow.py"))
    job = {
        "tenant": "docfleet",
        "collection": "policies",
        "parallel": 2,
        "batch_size": 6,  # 24 chunks: 4 batches, 4 units (each a process that loads the model), 2 at a time
        "chunking": {"size": 40, "overlap": 0},
        "sources": [{"kind": "files", "path": str(corpus(tmp_path / "docs"))}],
    }
    out = fleet.flux("workflow", "run", "flux-chroma/ingest_job", json.dumps(job), "--mode", "async")
    eid = json.loads(out)["execution_id"]
    deadline = time.monotonic() + HANG_GUARD
    execution: dict[str, Any] = {}
    while time.monotonic() < deadline:
        execution = httpx.get(f"{fleet.url}/executions/{eid}", timeout=10).json()
        if execution.get("state") in ("COMPLETED", "FAILED", "CANCELLED"):
            break
        time.sleep(0.3)
    logs = "\n".join(fleet.stack.log_tail(n, 15) for n in ("worker-1", "worker-2"))
    assert execution.get("state") == "COMPLETED", f"{execution.get('state')}: {execution.get('output')}\n{logs}"
    report = execution["output"]
    assert report["added"] == report["chunks"] >= 16 and report["skipped"] == 0
    client = chromadb.HttpClient(host="127.0.0.1", port=int(fleet.chroma_url.rsplit(":", 1)[1]))
    stored = client.get_collection("docfleet__policies").get(include=["documents"])
    assert len(stored["ids"]) == len(set(stored["ids"])) == report["chunks"]
    texts = "\n".join(p.read_text() for p in (tmp_path / "docs").iterdir())
    assert all(doc and doc.strip()[:40] in texts for doc in stored["documents"] or [])


def test_doctor_flux_checks_every_worker_and_names_a_broken_one(fleet: DocFleet, tmp_path: Path) -> None:
    env = {**plain_env(), "FLUX_CHROMA_URL": fleet.chroma_url}
    doctor = [str(BIN / "flux-chroma"), "doctor", "--flux", fleet.url, "--tenant", "docfleet", "--json", "--project", str(tmp_path)]
    done = subprocess.run(doctor, env=env, capture_output=True, text=True, timeout=HANG_GUARD, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    checks = {c["name"]: c for c in json.loads(done.stdout)["checks"]}
    assert checks["flux"]["status"] == "ok"
    workers = [c for name, c in checks.items() if name.startswith("worker ")]
    assert workers and all(c["status"] in ("ok", "warn") for c in workers), workers
    assert any(c["status"] == "ok" and "flux-chroma 0." in c["detail"] for c in workers), workers

    # A worker whose environment cannot import flux-chroma (a broken install shadows it).
    broken = tmp_path / "broken-site" / "flux_chroma"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text('raise ImportError("flux-chroma is half-installed here")\n')
    for name in ("worker-1", "worker-2"):
        fleet.stop_process(name)
    fleet.start_worker("worker-broken", PYTHONPATH=str(broken.parent))
    wait(lambda: len(fleet.online()) == 1, fleet.stack)
    done = subprocess.run(doctor, env=env, capture_output=True, text=True, timeout=HANG_GUARD, check=False, cwd=tmp_path)
    assert done.returncode == 4, done.stdout + done.stderr
    failed = [c for c in json.loads(done.stdout)["checks"] if c["status"] == "fail"]
    assert len(failed) == 1 and failed[0]["name"].startswith("worker "), failed
    assert "ImportError: flux-chroma is half-installed here" in failed[0]["detail"]
    assert "install flux-chroma" in failed[0]["detail"]


def test_fleet_ports_are_below_the_ephemeral_range_and_free() -> None:
    """A fleet's Flux server connects to PostgreSQL before it binds its port: a port from the
    ephemeral range could be given to one of those connections meanwhile ("address already in
    use", seen once in a full run)."""
    low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(20):
        port = free_port()
        assert 1024 <= port < low
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", port))  # free when picked
