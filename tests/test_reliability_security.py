"""Security: credentials never leak, the token option works behind an auth proxy, loopback only.

The Chroma 1.5 server has no authentication. ``token=``/``headers=``/``FLUX_CHROMA_TOKEN`` are
for a token-checking proxy (or Chroma Cloud) in front of it; :class:`fault_tools.AuthProxy`
stands in for one. Every run below uses random credentials; afterwards the Flux database and
state folder, the embedding cache, the Chroma server log, the captured stdout/stderr/logging
and every output/error (str, repr, pickle) are scanned byte for byte for them.

Elsewhere: tampered embedding-cache entries are misses and pickles never load
(tests/test_embedding_cache.py); hostile tenant names stay inside their namespace
(tests/test_tenancy.py); ``url=`` with user:password is refused (tests/test_errors.py).
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import fault_tools as ft
import pytest

from flux_chroma import ChromaServer
from flux_chroma import errors as E

TOKEN, HEADER_KEY, WRONG, ROTATED = (
    f"fc-{kind}-{secrets.token_hex(12)}" for kind in ("tok", "hdr", "wrong", "rot")
)
NEEDLES = (TOKEN, HEADER_KEY, WRONG)


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """``(address, port)`` of every TCP socket process ``pid`` listens on (Linux /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table in ("tcp", "tcp6"):
        for row in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = row.split()
            if fields[3] == "0A" and fields[9] in inodes:
                hex_ip, hex_port = fields[1].split(":")
                raw = bytes.fromhex(hex_ip)
                if len(raw) == 4:
                    address = ".".join(str(b) for b in raw[::-1])
                else:  # IPv6: four little-endian 32-bit words
                    words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                    address = ":".join(words[i : i + 2].hex() for i in range(0, 16, 2))
                found.add((address, int(hex_port, 16)))
    return found


_SCAN = """
import json, sys
from pathlib import Path
roots, wanted = json.loads(sys.argv[1])
hits = []
for root in map(Path, roots):
    files = [root] if root.is_file() else [p for p in root.rglob("*") if p.is_file()]
    for path in files:
        data = path.read_bytes()
        hits += [f"{path}: {n}" for n in wanted if n.encode() in data]
print(json.dumps(hits))
"""


def scan_bytes(roots: Iterable[Path], needles: Iterable[str]) -> list[str]:
    """``"file: needle"`` for every file under ``roots`` whose bytes contain a needle.

    The files are read by a child process: closing a file descriptor of a SQLite database
    releases every POSIX lock this process holds on it, so reading Flux's live database
    (and its WAL) from here would break the locking of this process's own connections.
    """
    argv = json.dumps([[str(r) for r in roots], list(needles)])
    done = subprocess.run([sys.executable, "-c", _SCAN, argv], capture_output=True, text=True, check=True, timeout=120)
    hits: list[str] = json.loads(done.stdout)
    return hits


def everything(collection: str) -> list[dict[str, Any]]:
    """One call of every public task."""
    return [
        *ft.ingest_steps(collection, [ft.docs("sec", 3)]),
        {"task": "query", "args": [collection, "sec document number 1"], "kwargs": {"k": 1}},
        {"task": "list_collections"},
        {"task": "delete_documents", "args": [collection], "kwargs": {"ids": ["sec-0"]}},
        {"task": "delete_collection", "args": [collection]},
    ]


@pytest.fixture
def proxies(url: str) -> Iterator[tuple[ft.AuthProxy, ft.AuthProxy]]:
    """A token-checking proxy and a hostile one that echoes the credentials it receives."""
    plain, echo = ft.AuthProxy(url, TOKEN), ft.AuthProxy(url, TOKEN, echo=True)
    try:
        yield plain, echo
    finally:
        plain.close()
        echo.close()


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials reach workflows through the environment, never through their input."""
    monkeypatch.setenv("FC_TEST_TOKEN", TOKEN)
    monkeypatch.setenv("FC_TEST_WRONG", WRONG)
    monkeypatch.setenv("FC_TEST_HEADERS", json.dumps({"X-Client-Key": HEADER_KEY}))


def run(tenant: str, proxy_url: str, steps: list[dict[str, Any]], **extra: Any) -> Any:
    """Run ``steps`` through ``proxy_url`` with retries configured (which must not be used)."""
    options = {
        "url": proxy_url,
        "retry_max_attempts": 2,
        "retry_delay": 1,
        **extra.pop("options", {}),
    }
    return ft.steps_wf.run(
        {"tenant": tenant, "hash_dim": 16, "options": options, "steps": steps, **extra}
    )


def assert_refused(ctx: Any) -> None:
    """A clear, permanent credentials error (never retried)."""
    assert ctx.has_failed
    assert type(ctx.output) is E.ChromaRequestError, repr(ctx.output)
    assert "401" in str(ctx.output) and "token=" in str(ctx.output)
    assert ft.retry_failures(ctx.events) == 0


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_token_proxy_end_to_end_and_no_credential_anywhere(
    tenant: str,
    proxies: tuple[ft.AuthProxy, ft.AuthProxy],
    secret_env: None,
    chroma_server: ChromaServer,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    plain, echo = proxies
    outputs: list[Any] = []

    # The right token (task option) plus an extra header: every task works through the proxy.
    ok = run(
        tenant,
        plain.url,
        everything("guarded"),
        token_env="FC_TEST_TOKEN",
        headers_env="FC_TEST_HEADERS",
    )
    assert ok.has_succeeded, ok.output
    assert [h["id"] for h in ok.output[1]] == ["sec-1"]
    assert plain.forwarded > 0 and plain.rejected == 0
    # The same token from FLUX_CHROMA_TOKEN.
    monkeypatch.setenv("FLUX_CHROMA_TOKEN", TOKEN)
    from_env = run(tenant, plain.url, everything("from-env"))
    assert from_env.has_succeeded, from_env.output
    monkeypatch.delenv("FLUX_CHROMA_TOKEN")
    outputs += [ok.output, from_env.output]

    # No token and a wrong token: refused by the proxy, permanent, readable.
    for ctx in (
        run(tenant, plain.url, everything("no-token")),
        run(tenant, plain.url, everything("wrong"), token_env="FC_TEST_WRONG"),
        run(tenant, echo.url, everything("echoed"), token_env="FC_TEST_WRONG"),
    ):
        assert_refused(ctx)
        outputs.append(ctx.output)
    assert plain.rejected == 2

    # The token is rotated while a worker holds a connected client; the hostile proxy's
    # rejection body quotes the stale credentials back. The error must not carry them.
    assert run(tenant, echo.url, everything("rotation"), token_env="FC_TEST_TOKEN").has_succeeded
    echo.token = ROTATED
    stale = run(tenant, echo.url, everything("rotation"), token_env="FC_TEST_TOKEN")
    assert_refused(stale)
    echo.status = 400  # not an auth status: the body reaches the message, scrubbed
    scrubbed = run(tenant, echo.url, everything("rotation"), token_env="FC_TEST_TOKEN")
    assert type(scrubbed.output) is E.ChromaRequestError and ft.retry_failures(scrubbed.events) == 0
    assert "invalid credentials '***'" in str(scrubbed.output)
    outputs += [stale.output, scrubbed.output]

    # Error paths with a valid token: bad input, missing collection, unreachable server.
    bad_doc = run(
        tenant,
        plain.url,
        ft.ingest_steps("guarded", [[{"id": "x", "text": ""}]]),
        token_env="FC_TEST_TOKEN",
    )
    missing = run(
        tenant, plain.url, [{"task": "query", "args": ["absent", "q"]}], token_env="FC_TEST_TOKEN"
    )
    dead = run(
        tenant,
        f"http://127.0.0.1:{_closed_port()}",
        everything("dead"),
        token_env="FC_TEST_TOKEN",
        headers_env="FC_TEST_HEADERS",
        options={"retry_max_attempts": 1, "retry_delay": 0},
    )
    assert type(bad_doc.output) is E.InvalidDocumentError
    assert type(missing.output) is E.CollectionNotFoundError
    assert type(dead.output) is E.ChromaUnavailableError and "gave up after 2 attempts" in str(
        dead.output
    )
    outputs += [bad_doc.output, missing.output, dead.output]

    texts = [str(o) for o in outputs] + [repr(o) for o in outputs]
    assert not [n for n in NEEDLES if any(n in t for t in texts)]
    assert not [n for n in NEEDLES if any(n.encode() in pickle.dumps(o) for o in outputs)]
    captured = capfd.readouterr()
    assert not [n for n in NEEDLES if n in captured.out + captured.err + caplog.text]
    roots = [Path(os.environ["FLUX_HOME"]), Path(os.environ["FLUX_CHROMA_CACHE_DIR"])]
    if chroma_server.log_path is not None:
        roots.append(chroma_server.log_path)
    assert scan_bytes(roots, NEEDLES) == []
    assert scan_bytes(roots, [tenant])  # the scan does read the files that hold these runs


def test_chroma_server_listens_on_loopback_only(chroma_server: ChromaServer) -> None:
    assert chroma_server.pid is not None
    assert listening_addresses(chroma_server.pid) == {("127.0.0.1", chroma_server.port)}
