"""Bad knowledge uploads get a client error with the one error body: a text field
that is not UTF-8 is 400 (not a 500 from the multipart parser), and a body or a
``Content-Length`` over the upload's cap is 413 (not the 422 of a form that cannot
be read), as docs/api.md says. The web layer refuses each before any storage is
reached, so they run on the memory storage only (uploads that are stored run on
both: tests/client/test_client_tour.py, tests/e2e/test_knowledge_e2e.py)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient

from agentsvc_web.controllers.knowledge import FORM_OVERHEAD
from agentsvc_web.settings import Settings
from tests.web.conftest import memory_only
from tests.web.shared import shared_client

Client = TestClient[Any]
MAX_FILE = 4096  # AGENTSVC_KNOWLEDGE_MAX_BYTES of this module's app
BOUNDARY = "b0undary"
MULTIPART = f"multipart/form-data; boundary={BOUNDARY}"

pytestmark = memory_only


@pytest.fixture
def c(request: pytest.FixtureRequest, settings: Settings) -> Iterator[Client]:
    small = msgspec.structs.replace(settings, knowledge_max_bytes=MAX_FILE)
    with shared_client(request, small) as client:
        yield client


def form(*parts: tuple[str, bytes, str | None]) -> bytes:
    """A multipart body of ``(name, value, filename or None)`` parts, byte for byte."""
    out = b""
    for name, value, filename in parts:
        disposition = f'form-data; name="{name}"'
        if filename is not None:
            disposition += f'; filename="{filename}"\r\nContent-Type: text/plain'
        out += f"--{BOUNDARY}\r\nContent-Disposition: {disposition}\r\n\r\n".encode()
        out += value + b"\r\n"
    return out + f"--{BOUNDARY}--\r\n".encode()


def error_of(r: Any, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == code, body
    assert set(body) == {"error", "detail"}
    return str(body["detail"])


@pytest.mark.parametrize("field", ["title", "threadId", "agentId"])
def test_a_text_field_that_is_not_utf8_is_400(
    c: Client, auth: dict[str, str], field: str, caplog: pytest.LogCaptureFixture
) -> None:
    body = form(("file", b"# Notes\nsome text", "notes.md"), (field, b"\xff\xfe", None))
    with caplog.at_level(logging.INFO):
        r = c.post(
            "/api/knowledge/upload", content=body, headers={**auth, "Content-Type": MULTIPART}
        )
    assert error_of(r, 400, "BAD_REQUEST").startswith(f"{field}: not UTF-8")
    assert not [rec for rec in caplog.records if rec.levelno >= logging.ERROR]
    assert "Traceback" not in caplog.text
    # the same form with the field as text is taken
    good = form(("file", b"# Notes\nsome text", "notes.md"), ("title", b"Notes", None))
    r = c.post("/api/knowledge/upload", content=good, headers={**auth, "Content-Type": MULTIPART})
    assert r.status_code == 202, r.text


def test_a_field_naming_an_unknown_charset_is_400(c: Client, auth: dict[str, str]) -> None:
    body = form(("file", b"text", "a.txt")).replace(
        f"--{BOUNDARY}--".encode(),
        f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="title"\r\n'.encode()
        + b"Content-Type: text/plain; charset=no-such-charset\r\n\r\nabc\r\n"
        + f"--{BOUNDARY}--".encode(),
    )
    r = c.post("/api/knowledge/upload", content=body, headers={**auth, "Content-Type": MULTIPART})
    assert error_of(r, 400, "BAD_REQUEST").startswith("title: ")


def test_a_part_header_that_is_not_utf8_is_422(c: Client, auth: dict[str, str]) -> None:
    body = form(("file", b"text", "a.txt")).replace(b'filename="a.txt"', b'filename="\xff.txt"')
    r = c.post("/api/knowledge/upload", content=body, headers={**auth, "Content-Type": MULTIPART})
    assert error_of(r, 422, "VALIDATION_ERROR").startswith("file: ")


def test_a_body_over_the_upload_cap_is_413(c: Client, auth: dict[str, str]) -> None:
    big = b"x" * (MAX_FILE + FORM_OVERHEAD + 1)
    r = c.post(
        "/api/knowledge/upload", files={"file": ("big.txt", big, "text/plain")}, headers=auth
    )
    assert str(MAX_FILE) in error_of(r, 413, "PAYLOAD_TOO_LARGE")
    # a file just over the cap, in a body under it: the use case's 413
    r = c.post(
        "/api/knowledge/upload",
        files={"file": ("over.txt", b"x" * (MAX_FILE + 1), "text/plain")},
        headers=auth,
    )
    error_of(r, 413, "PAYLOAD_TOO_LARGE")


def test_a_content_length_over_the_cap_is_413_before_the_body(
    c: Client, auth: dict[str, str]
) -> None:
    r = c.post(
        "/api/knowledge/upload",
        content=form(("file", b"small", "a.txt")),
        headers={**auth, "Content-Type": MULTIPART, "Content-Length": "1073741824"},
    )
    error_of(r, 413, "PAYLOAD_TOO_LARGE")


def test_a_form_that_cannot_be_read_is_still_422(c: Client, auth: dict[str, str]) -> None:
    r = c.post(
        "/api/knowledge/upload",
        content=b"--elsewhere\r\nnot a form",
        headers={**auth, "Content-Type": MULTIPART},
    )
    assert error_of(r, 422, "VALIDATION_ERROR").startswith("file: ")


def test_a_field_that_is_not_a_uuid_or_no_file_part_is_422(c: Client, auth: dict[str, str]) -> None:
    r = c.post(
        "/api/knowledge/upload",
        files={"file": ("a.md", b"# A", "text/markdown")},
        data={"agentId": "not-a-uuid"},
        headers=auth,
    )
    assert error_of(r, 422, "VALIDATION_ERROR").startswith("agentId: ")
    r = c.post(
        "/api/knowledge/upload",
        content=form(("title", b"no file", None), ("file", b"text, not a file part", None)),
        headers={**auth, "Content-Type": MULTIPART},
    )
    assert error_of(r, 422, "VALIDATION_ERROR").startswith("file: ")
