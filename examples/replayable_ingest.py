"""Replayable ingestion: kill a job mid-way, resume it by execution id, watch batches replay.

Run it inside the venv with ``python examples/replayable_ingest.py``. It:

1. starts a Chroma server it owns (temporary directory, free loopback port) and keeps Flux's
   state in SQLite in the same temporary directory;
2. writes a small corpus of markdown notes and plans the job (chunks, batches);
3. runs the job in a worker PROCESS that hangs right after batch 4 has been written (a
   stand-in for a worker that dies at any moment), and kills it with SIGKILL;
4. re-submits the same job in this process: the same execution id is resumed; the batches
   the dead worker finished replay from Flux's log, the interrupted one is redone
   idempotently (its chunks are already stored, so they are skipped), the rest are written;
5. runs the job once more: an incremental sync that writes and embeds nothing.

The job spec is a few hundred bytes of references; the documents never enter Flux's log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HANG_AFTER_BATCH = 3  # 0-based: the worker hangs after writing the 4th batch
TOPICS = ["replay", "checkpoint", "tenant", "embedding", "batch", "cleanup", "alias", "worker"]


def write_notes(folder: Path) -> None:
    """24 short notes, deterministic content."""
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(24):
        topic = TOPICS[i % len(TOPICS)]
        lines = [f"# Note {i}: {topic}", ""]
        lines += [f"Sentence {j} of note {i} explains how a {topic} behaves when a worker dies at step {j}." for j in range(8)]
        (folder / f"note-{i:02d}.md").write_text("\n".join(lines) + "\n")


def worker(job_path: str) -> int:
    """Child mode: run the job, report each written batch, hang after HANG_AFTER_BATCH."""
    from flux_chroma.ingest import run_ingest

    def on_progress(value: dict[str, Any]) -> None:
        if value.get("phase") == "batch" and value.get("status") == "done":
            print(f"batch {value['batch'] + 1}/{value['of']} written", flush=True)
            if value["batch"] == HANG_AFTER_BATCH:
                print("hanging", flush=True)  # the batch is stored, but Flux has not checkpointed it
                while True:
                    time.sleep(60)

    run_ingest(json.loads(Path(job_path).read_text()), on_progress=on_progress)
    return 0


def main() -> int:
    """Start a server, crash a worker mid-job, resume, sync again, stop the server."""
    with tempfile.TemporaryDirectory(prefix="flux-chroma-replay-") as tmp:
        root = Path(tmp)
        (root / "flux").mkdir()
        os.environ["FLUX_HOME"] = str(root / "flux")  # before flux reads its configuration
        os.environ["FLUX_DATABASE_URL"] = f"sqlite:///{root / 'flux' / 'flux.db'}"
        os.environ["FLUX_CHROMA_CACHE_DIR"] = str(root / "embedding-cache")

        import chromadb

        from flux_chroma import ChromaServer
        from flux_chroma.ingest import build_plan, ingest_execution_id, run_ingest

        write_notes(root / "notes")
        job = {
            "tenant": "demo",
            "collection": "notes",
            "sources": [{"kind": "files", "path": str(root / "notes")}],
            "chunking": {"size": 75, "overlap": 10},  # tokens of the model
            "batch_size": 16,
            "cleanup": "full",
        }
        (root / "job.json").write_text(json.dumps(job))
        plan = build_plan(job)
        eid = ingest_execution_id(job)

        with ChromaServer(root / "chroma", port=0) as server:
            os.environ["FLUX_CHROMA_URL"] = server.url
            print(f"Chroma server {server.url} (pid {server.pid})")
            print(f"job: {plan['docs']} notes -> {plan['chunks']} chunks in {len(plan['batches'])} batches, execution {eid}")

            child = subprocess.Popen(
                [sys.executable, __file__, "--worker", str(root / "job.json")],
                stdout=subprocess.PIPE,
                text=True,
                env=os.environ.copy(),
            )
            try:
                assert child.stdout is not None
                for line in child.stdout:
                    line = line.strip()
                    if line == "hanging":
                        break
                    print(f"  worker pid {child.pid}: {line}")
                os.kill(child.pid, signal.SIGKILL)
            finally:
                child.kill()
                child.wait()
            print(f"worker pid {child.pid} killed with SIGKILL after batch {HANG_AFTER_BATCH + 1} was written")

            resumed = run_ingest(job)
            if not resumed.has_succeeded:
                print(f"resume failed: {resumed.output}", file=sys.stderr)
                return 1
            report = resumed.output
            print(f"resumed execution {resumed.execution_id} in pid {os.getpid()} (same id: {resumed.execution_id == eid}):")
            for timing in report["batch_timings"]:
                if timing["pid"] == child.pid:
                    how = f"replayed from Flux's log (written by the killed worker, pid {child.pid})"
                elif timing["skipped"] == timing["chunks"]:
                    how = "redone idempotently (its chunks were already stored: skipped, not re-embedded)"
                else:
                    how = "written now"
                print(f"  batch {timing['batch'] + 1}/{report['batches']}: {timing['chunks']} chunks, {how}")
            print(
                f"report: added {report['added']}, skipped {report['skipped']}, deleted {report['deleted']}, "
                f"failed {report['failed']}, verified {report['verified']}"
            )
            client = chromadb.HttpClient(host="127.0.0.1", port=server.port)
            count = client.get_collection("demo__notes").count()
            print(f"collection demo__notes holds {count} records; the plan has {plan['chunks']} chunks")

            again = run_ingest(job)
            if not again.has_succeeded:
                print(f"sync failed: {again.output}", file=sys.stderr)
                return 1
            sync = again.output
            print(
                f"second run {again.execution_id}: added {sync['added']}, skipped {sync['skipped']}, "
                f"embedded {sync['embedded']}, deleted {sync['deleted']}"
            )
            return 0 if count == plan["chunks"] else 1


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        sys.exit(worker(sys.argv[2]))
    sys.exit(main())
