"""Pictures users upload (an agent's marketplace avatar): checked by their content,
not their name, and re-encoded, which drops whatever metadata they carried
(location, camera, comments). Decoding untrusted images is bounded in size,
pixels and time by the adapter (agentsvc_adapters/images.py)."""

from __future__ import annotations

from typing import Protocol

from agentsvc_core.errors import InvalidInput

__all__ = ["ImageRefused", "Images"]


class ImageRefused(InvalidInput):
    """Not a picture of an allowed type, too large, or unreadable (422)."""

    def __init__(self, detail: str) -> None:
        super().__init__("file", detail)


class Images(Protocol):
    async def reencode(
        self, data: bytes, *, types: tuple[str, ...], max_bytes: int, max_side: int
    ) -> tuple[str, bytes]:
        """(content type, bytes) of ``data`` decoded and encoded again in its own
        format, which must be one of ``types`` (``image/png``, ``image/jpeg``,
        ``image/webp``). Raises ``ImageRefused`` when ``data`` is over
        ``max_bytes``, not such a picture, or wider or taller than ``max_side``."""
        ...
