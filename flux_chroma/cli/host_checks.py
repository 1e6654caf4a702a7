"""``flux-chroma doctor``'s result type (:class:`Check`) and host checks: PersistentClient
use in a project, network filesystems. ``Check``/``Status`` are re-exported by the doctor module."""

from __future__ import annotations

import ast
import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Literal

__all__ = [
    "Check",
    "Status",
    "NETWORK_FS_TYPES",
    "ALLOW_MARKER",
    "check_persistent_client",
    "check_filesystems",
    "filesystem_type",
]

Status = Literal["ok", "warn", "fail", "skip"]
"""A check's outcome: only ``fail`` makes ``flux-chroma doctor`` exit with 4."""


@dataclass(frozen=True)
class Check:
    """One result line of ``flux-chroma doctor``.

    Attributes:
        name: The check, e.g. ``server`` or ``pin acme/handbook``.
        status: The outcome.
        detail: What was found, and for warn/fail what to do.
    """

    name: str
    status: Status
    detail: str

    def to_dict(self) -> dict[str, str]:
        """JSON-able form."""
        return {"name": self.name, "status": self.status, "detail": self.detail}


NETWORK_FS_TYPES = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "afs", "ceph", "glusterfs", "lustre", "gpfs", "beegfs", "davfs", "fuse"}
)
"""Filesystem types reported as network/FUSE filesystems (plus every ``fuse.*`` type)."""

ALLOW_MARKER = "flux-chroma: allow-persistent-client"
"""A comment that exempts one line from the PersistentClient scan (e.g. a test of the refusal)."""

_PERSISTENT = re.compile(r"\bPersistentClient\s*\(")
_SKIP_DIRS = frozenset({"node_modules", "site-packages", "__pycache__", "build", "dist", "venv", "env"})
_MAX_FILES = 20_000


def _python_files(root: Path) -> Iterator[Path]:
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in _SKIP_DIRS)
        yield from (Path(folder) / name for name in sorted(files) if name.endswith(".py"))


def _persistent_calls(source: str) -> list[int]:
    """Line numbers of ``PersistentClient(...)`` / ``x.PersistentClient(...)`` calls."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):  # not parseable: fall back to a line scan
        return [
            n for n, line in enumerate(source.splitlines(), start=1) if _PERSISTENT.search(line.split("#", 1)[0])
        ]
    calls = [node for node in ast.walk(tree) if isinstance(node, ast.Call)]
    names = [(c.lineno, getattr(c.func, "id", getattr(c.func, "attr", ""))) for c in calls]
    return sorted(number for number, name in names if name == "PersistentClient")


def check_persistent_client(project: Path) -> Check:
    """Fail on ``PersistentClient(`` calls in a project's ``.py`` files, naming up to five.

    Two processes opening one PersistentClient path serve stale search results; with Flux
    every worker is such a process. Hidden folders and virtualenvs are skipped; a line
    carrying :data:`ALLOW_MARKER` is exempt.
    """
    if not project.is_dir():
        return Check("persistent-client", "skip", f"{project} is not a folder")
    found: list[str] = []
    scanned = 0
    for path in islice(_python_files(project), _MAX_FILES):
        scanned += 1
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if "PersistentClient" not in text:
            continue
        lines = text.splitlines()
        for number in _persistent_calls(text):
            if not (0 < number <= len(lines) and ALLOW_MARKER in lines[number - 1]):
                found.append(f"{path.relative_to(project)}:{number}")
    if not found:
        return Check("persistent-client", "ok", f"no PersistentClient( call in {scanned} .py files under {project}")
    shown = ", ".join(found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
    return Check(
        "persistent-client",
        "fail",
        f"PersistentClient( used at {shown}. Two processes opening one path serve stale "
        "results: run one `flux-chroma server --path DIR` and connect with its URL (mark a "
        f"deliberate use with `# {ALLOW_MARKER}`).",
    )


def filesystem_type(path: Path, mounts: Iterable[str]) -> tuple[str, str]:
    """``(fstype, mount point)`` holding ``path`` or its nearest existing ancestor.

    ``mounts`` are lines in ``/proc/mounts`` format; ``("unknown", "")`` when none matches.
    """
    probe = path.expanduser().absolute()
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    target = str(probe.resolve())
    best = ("unknown", "")
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        # /proc/mounts writes a space in a mount point as \040
        point = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[1])
        inside = target == point or target.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[1]):
            best = (fields[2], point)
    return best


def check_filesystems(paths: dict[str, Path], mounts_file: Path = Path("/proc/mounts")) -> list[Check]:
    """Warn when a folder flux-chroma relies on sits on a network or FUSE filesystem.

    SQLite (Chroma's data, Flux's state) and the embedding cache rely on POSIX locks and
    atomic renames that NFS, SMB and FUSE bucket mounts do not reliably provide.

    Args:
        paths: ``{what: folder}``, e.g. ``{"embedding cache": Path(...)}``.
        mounts_file: The mount table.
    """
    try:
        mounts = mounts_file.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return [Check("filesystem", "skip", f"cannot read {mounts_file} (not Linux?)")]
    checks = []
    for what, path in paths.items():
        fstype, point = filesystem_type(path, mounts)
        if fstype in NETWORK_FS_TYPES or fstype.startswith("fuse."):
            status: Status = "warn"
            detail = (
                f"{path} is on {fstype} (mounted at {point}). Keep Chroma's data on a local "
                "disk or a single-attach volume, never NFS/SMB or a FUSE bucket: SQLite "
                "locking and the embedding cache's atomic renames are not safe there."
            )
        else:
            status, detail = "ok", f"{path} is on {fstype} ({point or '?'})"
        checks.append(Check(f"filesystem {what}", status, detail))
    return checks
