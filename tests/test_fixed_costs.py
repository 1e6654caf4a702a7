"""Fixed per-run costs: a run that embeds nothing loads no model, and a pin check of known
model files needs no model; a changed model file is noticed.

The all-skipped run happens in a fresh OS process (the way a new worker or CLI run starts),
which checks its own ``sys.modules`` and model sessions after the run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from workflows import ingest_wf

from flux_chroma.embedding import FastDefaultEmbedding, chroma_default_model_dir
from flux_chroma.embedding.identity import (
    Fingerprint,
    clear_fingerprint_cache,
    compute_fingerprint,
    fingerprint_dir,
    fingerprints_match,
    load_fingerprint,
    model_files_key,
)

TESTS = Path(__file__).resolve().parent
DOCS = [{"id": f"f{i}", "text": f"fixed cost document {i} about topic {i % 5}"} for i in range(40)]

RERUN = """
import json, sys
from workflows import ingest_wf
run = ingest_wf.run({"tenant": sys.argv[1], "collection": "fixed", "docs": json.loads(sys.argv[2]),
                     "options": {"cache": True}})
from flux_chroma.embedding import onnx_session as fd
print(json.dumps({"ok": run.has_succeeded, "output": run.output if run.has_succeeded else str(run.output),
                  "onnxruntime": "onnxruntime" in sys.modules, "sessions": len(fd._SESSIONS),
                  "tokenizers": len(fd._TOKENIZERS)}))
"""


def _fresh_process(code: str, *args: str) -> dict[str, object]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), str(TESTS.parent)])}
    done = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
        timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_unchanged_rerun_in_a_fresh_process_loads_no_model(tenant: str) -> None:
    first = ingest_wf.run({"tenant": tenant, "collection": "fixed", "docs": DOCS, "options": {"cache": True}})
    assert first.has_succeeded, first.output
    assert first.output["added"] == len(DOCS)

    again = _fresh_process(RERUN, tenant, json.dumps(DOCS))
    assert again["ok"], again
    receipt = again["output"]
    assert isinstance(receipt, dict)
    assert (receipt["skipped"], receipt["embedded"], receipt["upserted"]) == (len(DOCS), 0, 0)
    assert again == {**again, "onnxruntime": False, "sessions": 0, "tokenizers": 0}

    # A run with one new document does load the model, in the same kind of fresh process.
    more = _fresh_process(RERUN, tenant, json.dumps([*DOCS, {"id": "new", "text": "a new one"}]))
    assert more["ok"] and more["onnxruntime"] is True and more["sessions"] == 1, more
    assert isinstance(more["output"], dict) and more["output"]["added"] == 1


def _model_copy(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    shutil.copytree(chroma_default_model_dir(), folder)
    return folder


def test_fingerprint_is_persisted_per_model_files(tmp_path: Path) -> None:
    ef = FastDefaultEmbedding(model_dir=_model_copy(tmp_path))
    key = model_files_key(ef)
    assert key is not None and load_fingerprint(key) is None
    computed = compute_fingerprint(ef)
    assert load_fingerprint(key) == computed
    assert any(fingerprint_dir().glob("*.json"))

    # A fresh process finds it without loading the model.
    probe = (
        "import json, sys\n"
        "from flux_chroma.embedding import FastDefaultEmbedding, compute_fingerprint\n"
        "from flux_chroma.embedding import onnx_session as fd\n"
        f"fp = compute_fingerprint(FastDefaultEmbedding(model_dir={str(ef.model_dir)!r}))\n"
        "print(json.dumps({'fp': fp.to_json(), 'sessions': len(fd._SESSIONS),"
        " 'onnxruntime': 'onnxruntime' in sys.modules}))\n"
    )
    seen = _fresh_process(probe)
    assert seen == {"fp": computed.to_json(), "sessions": 0, "onnxruntime": False}


def _swap_vocab_ids(tokenizer_json: Path, a: str, b: str) -> None:
    """Swap two tokens' ids in the tokenizer file, keeping its size (ids of equal length)."""
    data = json.loads(tokenizer_json.read_text())
    vocab = data["model"]["vocab"]
    assert len(str(vocab[a])) == len(str(vocab[b]))
    text = tokenizer_json.read_text()
    swapped = text.replace(f'"{a}":{vocab[a]},', "@A@").replace(f'"{b}":{vocab[b]},', "@B@")
    swapped = swapped.replace("@A@", f'"{a}":{vocab[b]},').replace("@B@", f'"{b}":{vocab[a]},')
    assert swapped != text and len(swapped) == len(text)
    tokenizer_json.write_text(swapped)


def test_changed_model_file_invalidates_the_persisted_fingerprint(tmp_path: Path) -> None:
    folder = _model_copy(tmp_path)
    ef = FastDefaultEmbedding(model_dir=folder)
    original = compute_fingerprint(ef)
    old_key = model_files_key(ef)
    assert old_key is not None and load_fingerprint(old_key) == original

    # Change the tokenizer in place: same size, and the old mtime put back.
    target = folder / "tokenizer.json"
    before = target.stat()
    _swap_vocab_ids(target, "fox", "dog")
    os.utime(target, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = target.stat()
    assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    new_key = model_files_key(ef)
    assert new_key is not None and new_key != old_key
    assert load_fingerprint(new_key) is None

    # A fresh process notices: it loads the changed model and fingerprints what it now does.
    probe = (
        "import json\n"
        "from flux_chroma.embedding import FastDefaultEmbedding, compute_fingerprint\n"
        "from flux_chroma.embedding import onnx_session as fd\n"
        f"fp = compute_fingerprint(FastDefaultEmbedding(model_dir={str(folder)!r}))\n"
        "print(json.dumps({'fp': fp.to_json(), 'sessions': len(fd._SESSIONS)}))\n"
    )
    seen = _fresh_process(probe)
    assert seen["sessions"] == 1
    changed = Fingerprint.from_json(str(seen["fp"]))
    assert not fingerprints_match(changed, original)
    assert load_fingerprint(new_key) == changed


def test_damaged_entry_is_ignored_and_rewritten(tmp_path: Path) -> None:
    ef = FastDefaultEmbedding(model_dir=_model_copy(tmp_path))
    key = model_files_key(ef)
    assert key is not None
    computed = compute_fingerprint(ef)
    entries = sorted(fingerprint_dir().glob("*.json"), key=lambda p: p.stat().st_mtime_ns)
    entry = entries[-1]
    data = json.loads(entry.read_text())
    assert data["key"] == key
    data["fingerprint"] = data["fingerprint"].replace('"dim":384', '"dim":385')
    entry.write_text(json.dumps(data))  # check sum no longer matches
    assert load_fingerprint(key) is None
    entry.write_text("{not json")
    assert load_fingerprint(key) is None
    clear_fingerprint_cache()
    assert compute_fingerprint(ef) == computed
    assert load_fingerprint(key) == computed
