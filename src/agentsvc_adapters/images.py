"""Uploaded pictures checked and re-encoded with Pillow (``Images``).

Untrusted input, so bounded before and while decoding: the bytes first (over
``max_bytes`` is refused unread); then the header alone gives the format and the
size, and a picture of another format or wider or taller than ``max_side`` is
refused before any pixel is decoded (a small file can claim a huge canvas: the
check of the header is what stops such a decompression bomb); decoding and encoding run in a
worker thread under a time limit, off the event loop. The re-encoded picture keeps
only its pixels (no EXIF, no ICC profile, no text chunks): whatever the file
carried about where or how it was taken is dropped."""

from __future__ import annotations

import io

import anyio
from PIL import Image, UnidentifiedImageError

from agentsvc_core.ports.images import ImageRefused, Images

__all__ = ["PillowImages"]

# Pillow's format names, by the content types an upload may have
_FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/webp": "WEBP"}
_TYPES = {v: k for k, v in _FORMATS.items()}
# what Pillow raises for a file that is not a picture it reads, or a damaged one
_UNREADABLE = (
    UnidentifiedImageError,
    Image.DecompressionBombError,
    OSError,
    SyntaxError,
    ValueError,
)


def _reencode(data: bytes, allowed: set[str], max_side: int) -> tuple[str, bytes]:
    try:
        with Image.open(io.BytesIO(data), formats=sorted(allowed)) as img:
            if img.width > max_side or img.height > max_side:
                raise ImageRefused(
                    f"the picture is {img.width}x{img.height}; at most {max_side}x{max_side}"
                )
            fmt = img.format or ""
            img.load()
            if fmt == "JPEG":
                clean = img.convert("RGB")
            elif img.mode in ("RGB", "RGBA", "L", "LA"):
                clean = img.copy()
            else:
                clean = img.convert("RGBA")
    except _UNREADABLE as exc:
        raise ImageRefused("not a PNG, JPEG or WebP picture, or a damaged one") from exc
    out = io.BytesIO()
    options = {"quality": 90} if fmt in ("JPEG", "WEBP") else {"optimize": True}
    clean.save(out, format=fmt, **options)
    return _TYPES[fmt], out.getvalue()


class PillowImages(Images):
    def __init__(self, *, time_limit_s: float = 10.0) -> None:
        self._time_limit_s = time_limit_s

    async def reencode(
        self, data: bytes, *, types: tuple[str, ...], max_bytes: int, max_side: int
    ) -> tuple[str, bytes]:
        if len(data) > max_bytes:
            raise ImageRefused(f"the picture is over {max_bytes} bytes")
        allowed = {_FORMATS[t] for t in types if t in _FORMATS}
        if not allowed:
            raise ImageRefused("no picture type is allowed")
        with anyio.fail_after(self._time_limit_s):
            return await anyio.to_thread.run_sync(_reencode, data, allowed, max_side)
