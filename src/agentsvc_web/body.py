"""Request bodies: JSON only, decoded strictly into the handler's body type.

Litestar decodes a ``JSONBody`` in two steps, the JSON into Python values and
those into the handler's type with msgspec's lax rules (``"5000"`` becomes
``5000``, ``1`` and ``"true"`` become ``True``). ``JsonRequest`` is the app's
request class: it keeps the first step and makes the second strict, so a client
whose types are wrong hears 422 instead of having them guessed. Litestar then
finds a value of the right type and keeps it as it is.

Each refusal is an exception of its own, mapped on purpose in ``errors.py``:

- 415 when the body is not declared JSON (``application/json`` or
  ``application/*+json``; parameters such as ``charset=utf-8`` are allowed);
- 400 when it is not JSON (malformed, or not UTF-8), is not a JSON object, or
  ends before its ``Content-Length`` (the client went away mid-body);
- 422 when a field is missing, of the wrong type or out of bounds, named
  as the client sent it.

A request without a body is not decoded at all, so a body-less POST needs no
``Content-Type``.
"""

from __future__ import annotations

import re
from collections.abc import AsyncGenerator
from typing import Any

import msgspec
from litestar import Request
from litestar.exceptions import ClientException, InternalServerException

__all__ = ["BodyCutShort", "BodyInvalid", "JsonRequest", "MalformedBody", "UnsupportedMediaType"]

_JSON_MEDIA_TYPE = re.compile(r"application/(?:[a-z0-9!#$&^_.-]+\+)?json")
# msgspec names where a value failed: "Expected `int`, got `str` - at `$.timeoutMs`"
_AT = re.compile(r"(?s)(.*) - at `\$\.?(.*)`")


class MalformedBody(ClientException):
    """400: the body is not JSON (malformed or not UTF-8), or not a JSON object; or
    a text field of an upload's form is not UTF-8 (``agentsvc_web.upload_form``)."""


class BodyInvalid(ClientException):
    """422: a field is missing, of the wrong type or out of bounds; the detail names
    it as the client sent it (``timeoutMs: Expected `int`, got `str```)."""

    status_code = 422


class BodyCutShort(ClientException):
    """400: the client closed the connection before sending all of its body."""

    def __init__(self) -> None:
        super().__init__("the request body ended before its Content-Length")


class UnsupportedMediaType(ClientException):
    """415: a body whose Content-Type is not JSON."""

    status_code = 415

    def __init__(self) -> None:
        super().__init__("the request body must be application/json")


def _number(text: str) -> int | float:
    """JSON has one number type: ``5000.0`` is the integer 5000 (JSON Schema says
    so too), so a whole number is an int wherever a float has it exactly."""
    value = float(text)
    return int(value) if value.is_integer() and abs(value) <= _EXACT else value


_EXACT = 2**53
_decoder = msgspec.json.Decoder(float_hook=_number)


def decode_body(raw: bytes, body_type: Any) -> Any:
    """``raw`` as a ``body_type``, strictly; raises ``MalformedBody`` or ``BodyInvalid``."""
    try:
        value = _decoder.decode(raw)
    except (msgspec.DecodeError, UnicodeDecodeError):
        raise MalformedBody("request body is not valid JSON (UTF-8)") from None
    if not isinstance(value, dict):
        raise MalformedBody("request body must be a JSON object")
    try:
        return msgspec.convert(value, body_type, strict=True)
    except msgspec.ValidationError as exc:
        found = _AT.fullmatch(str(exc))
        # without a path it is about the object itself: "Object missing required field `name`"
        detail = str(exc) if found is None else f"{found.group(2)}: {found.group(1)}"
        raise BodyInvalid(detail) from None


class JsonRequest(Request[Any, Any, Any]):
    async def json(self) -> Any:
        media_type, _ = self.content_type
        if not _JSON_MEDIA_TYPE.fullmatch(media_type.lower()):
            raise UnsupportedMediaType
        field = self.route_handler.parsed_data_field
        body_type = field.annotation if field is not None else Any
        return decode_body(await self.body(), body_type)

    async def stream(self) -> AsyncGenerator[bytes, None]:
        try:
            async for chunk in super().stream():
                yield chunk
        except InternalServerException:
            # Litestar's two: "stream consumed" (a second read: our bug, not
            # connected any more) and a disconnect before the body's end (still
            # connected as far as the stream knows): the client's doing.
            if self.is_connected:
                raise BodyCutShort from None
            raise
