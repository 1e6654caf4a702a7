"""The fleet canary: a Flux workflow that checks flux-chroma on whichever worker runs it.

``flux-chroma doctor --flux URL`` ships only this file and runs it once per online worker. It
imports nothing but Flux at module level, so a worker where ``import flux_chroma`` fails returns
that error instead of dying. It is ``transient``: Flux 0.87 re-dispatches forever a durable
execution whose worker child dies before reporting. Definitions only (Flux re-executes it).
"""

from __future__ import annotations

from typing import Any

from flux import ExecutionContext, workflow


@workflow.with_options(namespace="flux-chroma", name="canary", durability="transient")
async def canary(ctx: ExecutionContext[dict[str, Any]]) -> dict[str, Any]:
    """Import flux-chroma as an ingestion job would and report what this worker has.

    Returns:
        ``{"ok", "pid", "python", "flux_chroma", "chromadb", "model", "chroma", "server_url",
        "error"}``: ``ok`` is False with ``error`` (and ``traceback``) when the import fails;
        ``model`` and ``chroma`` say whether the model files are here and the server answers.
    """
    import os
    import platform
    import traceback

    report: dict[str, Any] = {"ok": False, "pid": os.getpid(), "python": platform.python_version()}
    try:
        import flux_chroma
        import flux_chroma.ingest.workflow  # what an ingestion job imports
        from flux_chroma.errors import FluxChromaError

        report["flux_chroma"] = flux_chroma.__version__
        import chromadb

        report["chromadb"] = chromadb.__version__
    except Exception as exc:  # noqa: BLE001 - the point: report it instead of dying
        frames = traceback.format_exception(exc, limit=-4)
        report["error"] = f"{type(exc).__name__}: {exc}"
        report["traceback"] = "".join(frames)[-2000:]
        return report
    from flux.config import Configuration

    from flux_chroma.chroma.settings import ConnectionSettings
    from flux_chroma.cli.doctor import check_model, check_server

    try:  # where this worker starts child executions (an ingestion job's units)
        report["server_url"] = str(Configuration.get().settings.workers.server_url)
    except AttributeError:
        report["server_url"] = None
    model = check_model()[0]
    report["model"] = f"{model.status}: {model.detail}"
    try:
        server = check_server(ConnectionSettings.resolve(None))[0]
        report["chroma"] = f"{server.status}: {server.detail}"
    except FluxChromaError as exc:
        report["chroma"] = f"fail: {exc}"
    report["ok"] = not any(report[k].startswith("fail") for k in ("model", "chroma"))
    return report
