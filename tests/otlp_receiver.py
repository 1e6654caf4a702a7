"""A minimal OTLP/gRPC receiver for the tests: what an OpenTelemetry collector would be sent.

It implements OTLP's trace, metrics and logs services with the generated stubs that ship in
``opentelemetry-proto`` (installed by ``flux-core[observability]``) on a free loopback port,
and keeps every span and metric data point it receives as plain dicts.
"""

from __future__ import annotations

import threading
from concurrent import futures
from typing import Any, Self

import grpc
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc


class Receiver:
    """``with Receiver() as r:`` listens on ``r.endpoint``; ``r.spans`` / ``r.metrics`` fill up."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.metrics: list[dict[str, Any]] = []
        self.raw: list[str] = []  # every request as JSON text (for content checks)
        self._lock = threading.Lock()
        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        receiver = self

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                data = MessageToDict(request)
                with receiver._lock:
                    receiver.raw.append(str(data))
                    for resource in data.get("resourceSpans", []):
                        for scoped in resource.get("scopeSpans", []):
                            receiver.spans.extend(scoped.get("spans", []))
                return trace_service_pb2.ExportTraceServiceResponse()

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                data = MessageToDict(request)
                with receiver._lock:
                    receiver.raw.append(str(data))
                    for resource in data.get("resourceMetrics", []):
                        for scoped in resource.get("scopeMetrics", []):
                            receiver.metrics.extend(scoped.get("metrics", []))
                return metrics_service_pb2.ExportMetricsServiceResponse()

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                with receiver._lock:
                    receiver.raw.append(str(MessageToDict(request)))
                return logs_service_pb2.ExportLogsServiceResponse()

        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), self._server)
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self._server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), self._server)
        port = self._server.add_insecure_port("127.0.0.1:0")
        self.endpoint = f"http://127.0.0.1:{port}"

    def __enter__(self) -> Self:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop(grace=1)

    def metric_names(self) -> set[str]:
        """Names of every metric received."""
        with self._lock:
            return {m["name"] for m in self.metrics}

    def span_names(self) -> set[str]:
        """Names of every span received."""
        with self._lock:
            return {s["name"] for s in self.spans}
