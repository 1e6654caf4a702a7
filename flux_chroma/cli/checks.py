"""The result type of ``flux-chroma doctor``'s checks (shared by doctor and host checks)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["Check", "Status"]

Status = Literal["ok", "warn", "fail", "skip"]
"""A check's outcome: only ``fail`` makes ``flux-chroma doctor`` exit with 4."""


@dataclass(frozen=True)
class Check:
    """One result line of ``flux-chroma doctor``.

    Attributes:
        name: The check, e.g. ``server`` or ``pin acme/handbook``.
        status: ``ok``, ``warn``, ``fail`` or ``skip``.
        detail: What was found, and for warn/fail what to do.
    """

    name: str
    status: Status
    detail: str

    def to_dict(self) -> dict[str, str]:
        """JSON-able form."""
        return {"name": self.name, "status": self.status, "detail": self.detail}
