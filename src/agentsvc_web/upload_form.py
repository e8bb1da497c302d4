"""An upload's ``multipart/form-data`` body (a knowledge document, an avatar), read
with the parser Litestar uses (``multipart``), but here, so that every bad body is
the client's error:

- a text field that is not UTF-8 (nor in the charset its part names) is 400 naming
  the field; ``request.form()`` raises ``UnicodeDecodeError`` there (a 500), and
  leaves the file parts it had spooled to temporary files open;
- a body over the route's cap, or a ``Content-Length`` announcing one, is 413
  (``request.stream()`` raises it; ``request.form()`` callers cannot tell it from
  a malformed form without catching Litestar's subclass first);
- a body that is not a multipart form is 422 ``file: the multipart body could not
  be read``, as before; one cut short is 400 (``agentsvc_web.body``).

The file is kept in memory (the use case reads it whole anyway; the route's body cap
bounds it), the text fields asked for as strings, other parts are skipped.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from litestar import Request
from litestar.exceptions.http_exceptions import RequestEntityTooLarge
from litestar.openapi.spec import OpenAPIMediaType, OpenAPIType, Operation, RequestBody, Schema
from multipart import MultipartSegment, ParserError, ParserLimitReached, PushMultipartParser

from agentsvc_core.errors import InvalidInput, TooLarge
from agentsvc_web.body import MalformedBody

__all__ = ["UploadForm", "read_upload_form"]

MAX_PARTS = 32  # a file and a few fields; a form of thousands of parts is refused


@dataclass
class UploadForm:
    """What the form held: the first part named ``file`` that has a file name, and
    the text fields asked for (the first of each name)."""

    data: bytes | None = None
    filename: str | None = None
    content_type: str | None = None
    fields: dict[str, str] = field(default_factory=dict)


class _Reader:
    def __init__(self, text_fields: frozenset[str]) -> None:
        self.form = UploadForm()
        self._text_fields = text_fields
        self._segment: MultipartSegment | None = None
        self._buffer: bytearray | None = None  # the current part's, if it is kept

    def event(self, event: MultipartSegment | bytes | bytearray | None) -> None:
        if isinstance(event, MultipartSegment):
            self._segment = event
            self._buffer = bytearray() if self._wanted(event) else None
        elif event is not None:
            if self._buffer is not None:
                self._buffer.extend(event)
        else:
            self._end_of_part()

    def _wanted(self, segment: MultipartSegment) -> bool:
        if segment.filename:  # a file part (Litestar's reading: a name, not "")
            return segment.name == "file" and self.form.data is None
        return segment.name in self._text_fields and segment.name not in self.form.fields

    def _end_of_part(self) -> None:
        segment, buffer = self._segment, self._buffer
        self._segment = self._buffer = None
        if segment is None or buffer is None:
            return
        if segment.filename:
            self.form.data = bytes(buffer)
            self.form.filename = segment.filename
            # Litestar's default for a file part without a type, kept
            self.form.content_type = segment.content_type or "text/plain"
            return
        try:
            self.form.fields[str(segment.name)] = buffer.decode(segment.charset or "utf-8")
        except (UnicodeDecodeError, LookupError):
            raise MalformedBody(
                f"{segment.name}: not UTF-8 text (nor in the charset its part names)"
            ) from None


async def read_upload_form(
    request: Request[Any, Any, Any], text_fields: frozenset[str], max_file_bytes: int
) -> UploadForm:
    """The upload's form; raises the client's error for a body it cannot take."""
    boundary = request.content_type[1].get("boundary")
    if not boundary:
        raise InvalidInput("file", "the multipart body could not be read")
    reader = _Reader(text_fields)
    try:
        with PushMultipartParser(boundary.encode(), max_segment_count=MAX_PARTS) as parser:
            async for chunk in request.stream():  # ends with b"": the end of input
                for event in parser.parse(chunk):
                    reader.event(event)
                if parser.closed:
                    break
    except RequestEntityTooLarge:
        raise TooLarge(
            f"the body is larger than a {max_file_bytes}-byte file and its form"
        ) from None
    except (ParserError, ParserLimitReached, UnicodeDecodeError):
        # UnicodeDecodeError: part headers that are not UTF-8
        raise InvalidInput("file", "the multipart body could not be read") from None
    return reader.form


def form_operation(properties: Mapping[str, Schema], required: list[str]) -> type[Operation]:
    """The OpenAPI operation of a route that reads its form itself (so Litestar
    sees no body to document): the form is stated here."""

    @dataclass
    class FormOperation(Operation):
        def __post_init__(self) -> None:
            form = Schema(type=OpenAPIType.OBJECT, required=required, properties=dict(properties))
            self.request_body = RequestBody(
                required=True, content={"multipart/form-data": OpenAPIMediaType(schema=form)}
            )

    return FormOperation
