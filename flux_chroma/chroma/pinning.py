"""Embedding-function pinning: a collection is only ever used with the model it was built with.

A new collection's metadata (key ``fc_pin``) records the function's name, config, dimension,
distance space and output fingerprint; every write and query checks the configured function
against it before embedding (Chroma itself only compares names, when a function is passed).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypedDict

from flux_chroma._version import __version__
from flux_chroma.embedding.identity import (
    Fingerprint,
    compute_fingerprint,
    ef_identity,
    fingerprints_match,
)
from flux_chroma.errors import EmbeddingMismatchError, ModelNotAvailableError

__all__ = ["PIN_KEY", "Pin", "PinSummary", "check_pin", "ef_from_pin", "pin_for"]

PIN_KEY = "fc_pin"
DEFAULT_SPACE = "l2"
SPACES = ("l2", "cosine", "ip")


class PinSummary(TypedDict):
    """A pin as tasks report it (the ``embedding`` of a receipt, the ``pin`` of a listing).

    Attributes:
        fingerprint: Digest of the function's output on canary texts.
    """

    name: str
    config: dict[str, Any]
    dimension: int
    space: str
    fingerprint: str


@dataclass(frozen=True)
class Pin:
    """The embedding identity a collection is pinned to.

    Args:
        name: ``ef.name()``.
        config: ``ef.get_config()``, JSON-able.
        space: ``l2``, ``cosine`` or ``ip``.
        fingerprint: Fingerprint of the function's output on canary texts.
        version: flux-chroma version that wrote the pin.
    """

    name: str
    config: dict[str, Any]
    dimension: int
    space: str
    fingerprint: Fingerprint
    version: str = __version__

    def to_metadata(self) -> dict[str, str]:
        """The collection-metadata entry that stores this pin."""
        payload = {**self.summary(), "fingerprint": self.fingerprint.to_json()}
        payload["version"] = self.version
        return {PIN_KEY: json.dumps(payload, sort_keys=True, separators=(",", ":"))}

    @classmethod
    def from_metadata(cls, metadata: dict[str, Any] | None) -> Pin | None:
        """Read a pin from collection metadata (``None`` when the collection has none).

        Raises:
            EmbeddingMismatchError: The pin entry exists but cannot be parsed.
        """
        raw = (metadata or {}).get(PIN_KEY)
        if raw is None:
            return None
        try:
            data = json.loads(raw)
            return cls(
                name=str(data["name"]),
                config=dict(data["config"]),
                dimension=int(data["dimension"]),
                space=str(data["space"]),
                fingerprint=Fingerprint.from_json(data["fingerprint"]),
                version=str(data.get("version", "?")),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingMismatchError(
                f"the collection's pin ({PIN_KEY}) is unreadable ({exc}); it was edited by hand "
                "or by an incompatible tool. Migrate the data into a new collection."
            ) from None

    def describe(self) -> str:
        """One-line human description, e.g. ``default{} dim=384 space=l2 fp=1a2b...``."""
        config = json.dumps(self.config, sort_keys=True)
        return (
            f"{self.name}{config} dim={self.dimension} space={self.space} "
            f"fp={self.fingerprint.digest}"
        )

    def summary(self) -> PinSummary:
        """JSON-able summary for receipts and listings."""
        return {
            "name": self.name,
            "config": self.config,
            "dimension": self.dimension,
            "space": self.space,
            "fingerprint": self.fingerprint.digest,
        }


def pin_for(ef: Any, space: str = DEFAULT_SPACE) -> Pin:
    """Compute the pin of a chromadb embedding function (fingerprint cached per process).

    Raises:
        ModelNotAvailableError: The function's model is not available on this worker.
    """
    identity = ef_identity(ef)
    fingerprint = compute_fingerprint(ef)
    return Pin(identity["name"], identity["config"], fingerprint.dimension, space, fingerprint)


def check_pin(pinned: Pin, configured: Pin, *, collection: str) -> None:
    """Raise ``EmbeddingMismatchError`` when the ``configured`` pin differs from ``pinned``."""
    problems: list[str] = []
    if pinned.name != configured.name:
        problems.append(f"model {pinned.name!r} != {configured.name!r}")
    if json.dumps(pinned.config, sort_keys=True) != json.dumps(configured.config, sort_keys=True):
        problems.append(f"config {pinned.config} != {configured.config}")
    if pinned.dimension != configured.dimension:
        problems.append(f"dimension {pinned.dimension} != {configured.dimension}")
    if configured.space != pinned.space:
        problems.append(f"space {pinned.space!r} != {configured.space!r}")
    if not problems and not fingerprints_match(pinned.fingerprint, configured.fingerprint):
        problems.append(
            f"fingerprint {pinned.fingerprint.digest} != {configured.fingerprint.digest} "
            "(same name and config, different vectors: another model version or implementation)"
        )
    if problems:
        raise EmbeddingMismatchError(
            f"collection {collection!r} is pinned to {pinned.describe()} but this task is "
            f"configured with {configured.describe()} ({'; '.join(problems)}). Nothing was "
            "embedded or written. Use the pinned embedding function (or omit "
            "embedding_function= to rebuild it from the pin), or migrate the data into a new "
            "collection with flux_chroma.migrate_collection."
        )


def ef_from_pin(pin: Pin, *, collection: str) -> Any:
    """Rebuild the embedding function a collection is pinned to.

    ``default`` is served by ``FastDefaultEmbedding`` (same vectors); other names come from
    chromadb's registry of known functions.

    Raises:
        EmbeddingMismatchError: The pinned function is not available in this worker.
        ModelNotAvailableError: Its model files are missing.
    """
    if pin.name == "default":
        from flux_chroma.embedding import FastDefaultEmbedding

        return FastDefaultEmbedding()
    from chromadb.utils.embedding_functions import known_embedding_functions

    factory = known_embedding_functions.get(pin.name)
    if factory is None:
        raise EmbeddingMismatchError(
            f"collection {collection!r} is pinned to embedding function {pin.name!r}, which is "
            "not registered in this worker. Install/import the package that registers it "
            "(@register_embedding_function) or pass embedding_function= explicitly."
        )
    try:
        return factory.build_from_config(pin.config)
    except ModelNotAvailableError:
        raise
    except Exception as exc:  # noqa: BLE001 - any constructor failure means "not available"
        raise EmbeddingMismatchError(
            f"collection {collection!r} is pinned to {pin.describe()}, but it cannot be built in "
            f"this worker ({type(exc).__name__}: {exc}). Pass embedding_function= explicitly."
        ) from None
