"""HTTP sessions whose every request is bounded AS A WHOLE, not per byte.

httpx's read timeout restarts at every byte: a server trickling one byte every 0.5 s keeps a
``read_timeout=2`` call alive for minutes (and chromadb's session has no timeout at all). Here
connecting is bounded by ``connect_timeout`` and everything after it (send, status, headers,
body) by ``read_timeout``, enforced in the network stream below httpx, so a trickled status
line or header is caught too.
"""

from __future__ import annotations

import functools
import ssl
import threading
import time
from collections.abc import Iterable
from typing import Any

import httpcore
import httpx

from flux_chroma.seams import set_connection_pool

__all__ = ["BoundedSession", "RequestDeadlineError"]

_state = threading.local()  # .budget: seconds after connect; .end: time.monotonic() deadline


class RequestDeadlineError(httpx.ReadTimeout):
    """A request got no complete answer within ``budget`` s (``read_timeout``).

    Attributes:
        what: ``"METHOD /path"`` of the request.
    """

    def __init__(self, what: str, budget: float, request: httpx.Request) -> None:
        super().__init__(f"{what} got no complete answer within {budget:g} s (read_timeout)", request=request)
        self.what = what
        self.budget = budget


def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    """The socket timeout to use now: the smaller of ``timeout`` and the time left."""
    end: float | None = getattr(_state, "end", None)
    if end is None:
        return timeout
    left = end - time.monotonic()
    if left <= 0:
        raise expired("whole-request deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        inner = self._inner.start_tls(ssl_context, server_hostname, _left(timeout, httpcore.ConnectTimeout))
        return _DeadlineStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    """httpcore's sync backend, every stream bounded by the current request's deadline.

    TCP only: the pool below is built without ``uds``, so no Unix socket is ever opened.
    """

    def __init__(self) -> None:
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        budget: float | None = getattr(_state, "budget", None)
        if budget is not None:
            _state.end = time.monotonic() + budget  # the budget counts from a ready connection
        return _DeadlineStream(stream)


@functools.cache
def _ssl_context(verify: bool) -> ssl.SSLContext:
    """One context per process: loading the CA bundle costs ~70 ms, once per context."""
    return httpx.create_ssl_context(verify=verify)


def _transport(verify: bool, limits: httpx.Limits) -> httpx.HTTPTransport:
    transport = httpx.HTTPTransport(verify=_ssl_context(verify), limits=limits)
    # httpx has no public hook for httpcore's network backend; the pool is rebuilt the way
    # HTTPTransport builds it (tests/test_reliability_hangs.py proves the deadline holds).
    pool = httpcore.ConnectionPool(
        ssl_context=_ssl_context(verify),
        max_connections=limits.max_connections,
        max_keepalive_connections=limits.max_keepalive_connections,
        keepalive_expiry=limits.keepalive_expiry,
        network_backend=_DeadlineBackend(),
    )
    set_connection_pool(transport, pool)
    return transport


class BoundedSession(httpx.Client):
    """An ``httpx.Client`` whose every request finishes within its budget or fails.

    Args:
        connect_timeout: Seconds to open a connection.
        read_timeout: Seconds for the whole exchange once connected (send + full answer).
    """

    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        headers: Any = None,
        verify: bool = True,
        limits: httpx.Limits | None = None,
    ) -> None:
        super().__init__(
            timeout=httpx.Timeout(read_timeout, connect=connect_timeout, pool=connect_timeout),
            headers=headers,
            transport=_transport(verify, limits or httpx.Limits()),
        )
        self.read_timeout = float(read_timeout)

    def send(self, request: httpx.Request, **kwargs: Any) -> httpx.Response:
        """Send ``request`` within ``read_timeout`` once connected.

        Raises:
            RequestDeadlineError: No complete answer within ``read_timeout``.
        """
        _state.budget = self.read_timeout
        _state.end = time.monotonic() + self.read_timeout
        try:
            return super().send(request, **kwargs)
        except httpx.TimeoutException as exc:
            if isinstance(exc, (httpx.ConnectTimeout, httpx.PoolTimeout)):
                raise  # opening the connection: connect_timeout, reported as unreachable
            what = f"{request.method} {request.url.path}"
            raise RequestDeadlineError(what, self.read_timeout, request) from None
        finally:
            _state.budget = _state.end = None
