"""An embedding function that counts its calls: the fast default model, wrapped.

Kept out of :mod:`bench.flows` because Flux re-executes workflow modules; this module is
imported once, so its counter is the one every workflow copy sees.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from flux_chroma.embedding import FastDefaultEmbedding

__all__ = ["CountingEmbedding", "COUNTING_EF"]


class CountingEmbedding(FastDefaultEmbedding):
    """:class:`FastDefaultEmbedding` that counts model calls and texts (same name, same vectors).

    Attributes:
        calls: ``embed`` calls so far.
        texts: Texts embedded so far.
    """

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.texts = 0

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Embed and count (see :meth:`FastDefaultEmbedding.embed`)."""
        items = list(texts)
        self.calls += 1
        self.texts += len(items)
        return super().embed(items)

    def reset(self) -> tuple[int, int]:
        """Return ``(calls, texts)`` so far and start counting from zero."""
        out = (self.calls, self.texts)
        self.calls = self.texts = 0
        return out


COUNTING_EF = CountingEmbedding()
"""The one counting instance workflows use when their input says ``"count": true``."""
