"""Contract tests of flux_chroma/seams.py: one per private API of another library, against the real library.

When an upgrade of flux-core, chromadb, httpx/httpcore, diskcache or Typer changes an internal
flux-chroma relies on, the test of that seam fails with the library, the attribute and what to
do. Nothing is mocked: real Flux executions, a real Chroma server, real SQLite, real Typer help.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import chromadb
import diskcache
import httpcore
import httpx
import pytest
import typer
from flux import ExecutionContext, task, workflow
from typer.core import TyperCommand
from typer.testing import CliRunner

from flux_chroma import ChromaServer, seams
from flux_chroma.seams import SeamError


@contextmanager
def contract(library: str, attribute: str) -> Iterator[None]:
    """Turn any failure inside into one readable message naming the seam."""
    try:
        yield
    except Exception as exc:  # noqa: BLE001 - every failure of a seam reads the same way
        pytest.fail(
            f"the {library} seam on {attribute} broke ({type(exc).__name__}: {exc}). "
            f"An upgrade of {library} changed an internal flux-chroma relies on: install the range "
            f"pyproject.toml declares for {library}, or update flux_chroma/seams.py for the new "
            "version (its docstring says what the seam relies on) and this test with it.",
            pytrace=False,
        )


def _client(server: ChromaServer, cls: Any = None) -> Any:
    settings = chromadb.config.Settings(
        chroma_api_impl="chromadb.api.fastapi.FastAPI",
        chroma_server_host="127.0.0.1",
        chroma_server_http_port=server.port,
        anonymized_telemetry=False,
    )
    return (cls or chromadb.api.client.Client)(settings=settings)


# ---------------------------------------------------------------------------------- flux-core


def test_flux_task_failures_go_through_adjust_failure() -> None:
    seen: list[tuple[str, int]] = []

    with contract("flux-core", "flux.task._task__handle_exception"):

        @seams.route_task_failures
        class Final(task):  # type: ignore[misc]
            def adjust_failure(
                self, ex: Exception, kwargs: dict[str, Any], retry_attempts: int
            ) -> tuple[Exception, int]:
                seen.append((type(ex).__name__, retry_attempts))
                return RuntimeError(f"adjusted: {ex}"), self.retry_max_attempts

        async def boom() -> None:
            raise ValueError("boom")

        failing = Final(boom, retry_max_attempts=3, retry_delay=0)

        @workflow
        async def seam_failures(ctx: ExecutionContext[Any]) -> None:
            await failing()

        ctx = seam_failures.run()
        assert ctx.has_failed, ctx
        # Once, not four times: the adjusted failure was final, Flux skipped its retries.
        assert seen == [("ValueError", 0)], seen
        stored = getattr(ctx.output, "inner_exception", ctx.output)
        assert "adjusted: boom" in str(stored), repr(stored)  # what adjust_failure returned


def test_flux_registers_saves_and_loads_an_execution() -> None:
    with contract("flux-core", "Workflow._ensure_registered / flux.context_managers.ContextManager"):

        @workflow
        async def seam_store(ctx: ExecutionContext[Any]) -> str:
            return "ok"

        workflow_id = seams.register_workflow(seam_store)
        assert workflow_id and workflow_id == seams.register_workflow(seam_store)
        eid = f"seam-{uuid.uuid4().hex}"
        ctx: ExecutionContext[Any] = ExecutionContext(
            workflow_id=workflow_id,
            workflow_namespace=seam_store.namespace,
            workflow_name=seam_store.name,
            input={"x": 1},
            execution_id=eid,
        )
        ctx.start(f"seam_store_{eid}")
        seams.save_execution(ctx)
        loaded = seams.execution_store().get(eid)
        assert loaded.execution_id == eid and loaded.input == {"x": 1}
        assert [e.type for e in loaded.events] == [e.type for e in ctx.events]


# ---------------------------------------------------------------------------------- chromadb


def test_chromadb_client_internals(chroma_server: ChromaServer) -> None:
    with contract("chromadb", "Client._server / FastAPI._session"):
        client = _client(chroma_server)
        server = seams.client_server(client)
        old = seams.http_session(server)
        sent: list[str] = []
        session = httpx.Client(
            headers=old.headers,
            event_hooks={"request": [lambda request: sent.append(request.url.path)]},
        )
        seams.set_http_session(server, session)
        client.heartbeat()
        assert sent == ["/api/v2/heartbeat"], f"chromadb did not send through the new session: {sent}"
        admin = chromadb.AdminClient(client.get_settings())
        assert isinstance(seams.http_session(seams.client_server(admin)), httpx.Client)


def test_chromadb_collection_server(chroma_server: ChromaServer) -> None:
    with contract("chromadb", "Collection._client"):
        client = _client(chroma_server)
        collection = client.get_or_create_collection(f"seam_{uuid.uuid4().hex[:8]}")
        try:
            assert int(seams.collection_server(collection).get_max_batch_size()) > 0
        finally:
            client.delete_collection(collection.name)


def test_chromadb_constructor_calls_the_hook_before_its_first_request(
    chroma_server: ChromaServer,
) -> None:
    order: list[str] = []

    def hook(server: Any) -> None:
        order.append("hook")
        session = seams.http_session(server)
        session.event_hooks["request"].append(lambda request: order.append(request.url.path))

    with contract("chromadb", "Client.__init__ calling get_user_identity() first"):
        _client(chroma_server, seams.client_class_with_first_call_hook(hook))
        assert order[:2] == ["hook", "/api/v2/auth/identity"], order


def test_chroma_server_command_is_what_the_chroma_script_runs() -> None:
    import inspect
    import subprocess

    from chromadb.cli import cli

    with contract("chromadb", "the `chroma` script handing sys.argv to chromadb_rust_bindings.cli"):
        assert "chromadb_rust_bindings.cli(args)" in inspect.getsource(cli.app)
        done = subprocess.run(
            [*seams.chroma_server_command(), "run", "--help"], check=False, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0 and "Usage: chroma run" in done.stdout, done.stdout + done.stderr
        assert "--path" in done.stdout and "--port" in done.stdout


_SKIPPED_CHECKS = """
import sys
from flux_chroma import seams
assert seams.skip_override_checks()
import chromadb, chromadb.api.fastapi as fastapi
assert fastapi.override is seams._marked_override, fastapi.override
assert fastapi.FastAPI.heartbeat.__override__
client = chromadb.HttpClient(host="127.0.0.1", port=int(sys.argv[1]))
assert client.heartbeat() > 0
assert not seams.skip_override_checks()  # chromadb is imported now
print("ok")
"""


def test_chromadb_imports_and_serves_without_override_checks(chroma_server: ChromaServer) -> None:
    with contract("overrides", "overrides.override and the __override__ marker EnforceOverrides reads"):
        done = subprocess.run(
            [sys.executable, "-c", _SKIPPED_CHECKS, str(chroma_server.port)],
            check=False, capture_output=True, text=True, timeout=120,
        )
        assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


# ---------------------------------------------------------------------------------- httpx


def test_httpx_transport_pool_is_replaceable(chroma_server: ChromaServer) -> None:
    connected: list[str] = []

    class Counting(httpcore.NetworkBackend):
        def __init__(self) -> None:
            self.inner = httpcore.SyncBackend()

        def connect_tcp(self, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
            connected.append(f"{host}:{port}")
            return self.inner.connect_tcp(host, port, *args, **kwargs)

    with contract("httpx", "HTTPTransport._pool"):
        transport = httpx.HTTPTransport()
        seams.set_connection_pool(transport, httpcore.ConnectionPool(network_backend=Counting()))
        with httpx.Client(transport=transport, timeout=10) as http:
            assert http.get(f"{chroma_server.url}/api/v2/heartbeat").status_code == 200
        assert connected == [f"127.0.0.1:{chroma_server.port}"], connected


# ---------------------------------------------------------------------------------- diskcache


def test_diskcache_internals(tmp_path: Path) -> None:
    with (
        contract("diskcache", "Cache._sql / Cache._con / Cache._disk / Disk._directory"),
        diskcache.Cache(str(tmp_path)) as cache,
    ):
        cache.set("k", b"v")
        ((count,),) = seams.cache_sql(cache)("SELECT count(*) FROM Cache").fetchall()
        assert count == 1
        assert isinstance(seams.cache_connection(cache), sqlite3.Connection)
        disk = seams.cache_disk(cache)
        assert isinstance(disk, diskcache.Disk)
        assert seams.disk_directory(disk) == str(tmp_path)


def test_diskcache_opening_statements_use_the_wrapped_runner(tmp_path: Path) -> None:
    wrapped: list[str] = []

    def wrap(sql: Any) -> Any:
        def execute(statement: str, *args: Any, **kwargs: Any) -> Any:
            wrapped.append(statement.split()[0])
            return sql(statement, *args, **kwargs)

        return execute

    with contract("diskcache", "Cache._sql_retry"):

        @seams.retry_cache_statements(wrap)
        class Wrapped(diskcache.Cache):  # type: ignore[misc]
            pass

        Wrapped(str(tmp_path)).close()
        assert "CREATE" in wrapped, wrapped  # Cache.__init__ creates its tables through it


# ---------------------------------------------------------------------------------- typer/click


def test_typer_arguments_show_their_metavar() -> None:
    class Plain(TyperCommand):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            seams.show_arguments_plain(self.params)

    app = typer.Typer(add_completion=False)

    @app.command(cls=Plain)
    def main(
        paths: Annotated[list[Path], typer.Argument(metavar="PATH...")],
        question: Annotated[str | None, typer.Argument()] = None,
    ) -> None:
        """Help."""

    with contract("typer", "TyperArgument._usage_display_name / display_type_rich"):
        shown = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "100", "TERM": "dumb"}).output
        assert "Usage: main [OPTIONS] PATH... [question]" in shown, shown
        assert "{PATH...}" not in shown and "<list[Path]>" not in shown, shown


# ---------------------------------------------------------------------------------- the message


def test_a_broken_seam_names_the_library_the_attribute_and_the_fix() -> None:
    with pytest.raises(SeamError) as caught:
        seams.client_server(object())
    text = str(caught.value)
    assert "chromadb's internal object._server is missing" in text, text
    assert "pyproject.toml" in text and "tests/test_seams.py" in text, text
    assert caught.value.library == "chromadb" and caught.value.attribute == "object._server"
