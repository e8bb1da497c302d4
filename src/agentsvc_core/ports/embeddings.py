"""Text embeddings (``Embedder``), for the vector half of knowledge search: a
text becomes a fixed-length vector, and texts that mean alike get vectors that
are close. Optional: without a configured provider, knowledge search is full-text
only. Adapter: ``agentsvc_adapters/embeddings.py`` (OpenAI-compatible endpoints)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["Embedder"]


class Embedder(Protocol):
    """An embeddings model behind an API the operator configured.

    ``model`` and ``dimensions`` are fixed for the adapter's life: stored vectors
    are only comparable with vectors of the same model and length, so storage
    records the model with each vector and its column has ``dimensions``.
    """

    model: str  # the provider's model id, e.g. text-embedding-3-small
    dimensions: int  # the length of every vector ``embed`` returns

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in the order of ``texts``, each of length
        ``dimensions``; no texts, no vectors (and no call). An adapter may cut a
        long text to a limit of its own before embedding it (its docstring says).

        Raises ``Upstream`` when the provider fails (an HTTP status, no answer in
        time, refused by the outbound guard, an answer of the wrong shape or
        length); its detail never holds the API key nor any of the texts.
        """
        ...
