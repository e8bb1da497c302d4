"""The HTTP layer's edges: bodies that are not UTF-8, not JSON or cut short,
strict types, media types, hardening headers, OPTIONS and duplicated credentials.

These are about the web layer alone, so they run on the in-memory storage."""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import httpx
import msgspec
import pytest
from litestar.testing import TestClient

from agentsvc_core.errors import DomainError
from agentsvc_web.app import create_app
from agentsvc_web.controllers.knowledge import FORM_OVERHEAD
from agentsvc_web.errors import EXCEPTION_HANDLERS
from agentsvc_web.settings import Settings
from tests.web.conftest import JWT_SECRET
from tests.web.live import serve
from tests.web.shared import shared_client

Client = TestClient[Any]
KEY = "ask_web_edges_0123456789abcdef0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
JSON = {**AUTH, "Content-Type": "application/json"}


def _settings() -> Settings:
    return Settings(
        storage="memory",
        migrate_on_start=False,
        bootstrap_api_key=KEY,
        bootstrap_org=f"edges-{uuid.uuid4().hex[:8]}",
        jwt_secret=JWT_SECRET,
        jwt_algorithms=("HS256",),
        max_body_bytes=64 * 1024,
    )


# KEY is the key of one organization of this module's, in each process
_ORG = f"edges-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def c(request: pytest.FixtureRequest) -> Iterator[Client]:
    """A client of this module's app, started once per process (tests/web/shared.py)."""
    with shared_client(request, msgspec.structs.replace(_settings(), bootstrap_org=_ORG)) as client:
        yield client


def error_of(r: Any, status: int, code: str) -> str:
    assert r.status_code == status, r.text
    body = r.json()
    assert body["error"] == code, body
    assert set(body) == {"error", "detail"}
    return str(body["detail"])


def _connect(url: str) -> socket.socket:
    parts = urlsplit(url)
    return socket.create_connection((parts.hostname or "", parts.port or 0), timeout=5)


def agent(c: Client) -> dict[str, Any]:
    r = c.post("/api/agents", json={"name": "edges"}, headers=AUTH)
    assert r.status_code == 201, r.text
    return dict(r.json())


# --- A: bodies that are not UTF-8 or end early ----------------------------------


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/api/agents"),
        ("POST", "/api/keys"),
        ("POST", "/api/threads"),
        ("POST", "/api/mcps"),
        ("POST", "/api/orgs/settings"),
    ],
)
def test_a_body_that_is_not_utf8_is_400_without_a_traceback(
    c: Client, caplog: pytest.LogCaptureFixture, method: str, path: str
) -> None:
    with caplog.at_level(logging.INFO):
        r = c.request(method, path, content=b'{"name": "caf\xe9"}', headers=JSON)
    assert "JSON" in error_of(r, 400, "BAD_REQUEST")
    assert not [x for x in caplog.records if x.levelno >= logging.ERROR or x.exc_info]


def test_a_body_shorter_than_its_content_length_is_a_client_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    uvicorn_log = logging.getLogger("uvicorn")  # it does not propagate to the root
    uvicorn_log.addHandler(caplog.handler)
    with serve(create_app(_settings())) as url, caplog.at_level(logging.INFO):
        with _connect(url) as s:
            head = (
                "POST /api/agents HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {KEY}\r\n"
                "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n"
            )
            s.sendall(head.encode() + b'{"name": "sho')
            s.shutdown(socket.SHUT_WR)  # the client is done: the body ends 87 bytes early
            answer = b""
            try:
                while chunk := s.recv(4096):
                    answer += chunk
            except OSError:
                pass
        assert not answer or answer.startswith(b"HTTP/1.1 400"), answer
    uvicorn_log.removeHandler(caplog.handler)
    errors = [x for x in caplog.records if x.levelno >= logging.ERROR or x.exc_info]
    assert not errors, [x.getMessage() for x in errors]
    assert any("ended before its Content-Length" in x.getMessage() for x in caplog.records)


# --- B: every error is mapped on purpose -----------------------------------------


class _Unmapped(DomainError):
    """A domain error the web layer's table does not list."""


def test_b_an_unmapped_domain_error_is_500_without_its_detail(
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = EXCEPTION_HANDLERS[DomainError]
    with caplog.at_level(logging.ERROR):
        r = handler(None, _Unmapped("secret sk-live-123 in a message"))
    assert r.status_code == 500
    assert (r.content.error, r.content.detail) == ("INTERNAL_ERROR", "internal error")
    assert "sk-live-123" not in caplog.text
    assert "_Unmapped" in caplog.text


def test_b_a_framework_400_shows_a_fixed_detail(c: Client) -> None:
    r = c.post("/api/agents", content=b"{", headers={**JSON, "Content-Length": "x"})
    assert error_of(r, 400, "BAD_REQUEST") == "malformed request"


# --- C: strict types in bodies ------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"enabled": 1}, "enabled"),
        ({"enabled": "true"}, "enabled"),
        ({"enabled": False, "timeoutMs": "5000"}, "timeoutMs"),
        ({"enabled": False, "timeoutMs": 5000.5}, "timeoutMs"),
    ],
)
def test_c_lax_types_are_422_naming_the_field(c: Client, body: dict[str, Any], field: str) -> None:
    a = agent(c)
    r = c.put(f"/api/agents/{a['id']}/credentials", json=body, headers=AUTH)
    assert error_of(r, 422, "VALIDATION_ERROR").startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/api/agents/{id}/compaction", {"alphaPauseAfter": 0}, "alphaPauseAfter"),
        ("/api/agents/{id}/compaction", {"alphaTriggerTokens": "60000"}, "alphaTriggerTokens"),
        ("/api/orgs/settings", {"rotateSigningSecret": "true"}, "rotateSigningSecret"),
        ("/api/threads", {"agentId": "{id}", "metadata": {"a": 1}}, "metadata"),
        ("/api/agents", {"name": 5}, "name"),
    ],
)
def test_c_strictness_applies_to_every_body(
    c: Client, path: str, body: dict[str, Any], field: str
) -> None:
    a = agent(c)
    raw = str(body).replace("'", '"').replace("False", "false").replace("{id}", a["id"])
    method = "PUT" if "compaction" in path else "POST"
    r = c.request(method, path.replace("{id}", a["id"]), content=raw.encode(), headers=JSON)
    assert error_of(r, 422, "VALIDATION_ERROR").startswith(field)


def test_c_a_missing_field_is_still_422_and_valid_bodies_pass(c: Client) -> None:
    r = c.post("/api/agents", json={"description": "x"}, headers=AUTH)
    assert "`name`" in error_of(r, 422, "VALIDATION_ERROR")
    a = agent(c)
    for sent in ("2500", "2500.0", "2.5e3"):  # one JSON number, written three ways
        r = c.put(
            f"/api/agents/{a['id']}/credentials",
            content=f'{{"enabled": false, "timeoutMs": {sent}}}'.encode(),
            headers=JSON,
        )
        assert r.status_code == 200, r.text
        assert r.json()["timeout_ms"] == 2500


# --- E: media types ----------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "application/jsonx", "json", None],
)
def test_e_a_body_that_is_not_declared_json_is_415(c: Client, content_type: str | None) -> None:
    headers = dict(AUTH) if content_type is None else {**AUTH, "Content-Type": content_type}
    r = c.post("/api/agents", content=b'{"name": "n"}', headers=headers)
    error_of(r, 415, "UNSUPPORTED_MEDIA_TYPE")


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/merge-patch+json",
    ],
)
def test_e_json_media_types_are_accepted(c: Client, content_type: str) -> None:
    r = c.post(
        "/api/agents", content=b'{"name": "n"}', headers={**AUTH, "Content-Type": content_type}
    )
    assert r.status_code == 201, r.text


def test_e_a_bodyless_post_needs_no_content_type(c: Client) -> None:
    a = agent(c)
    t = c.post("/api/threads", json={"agentId": a["id"]}, headers=AUTH).json()
    r = c.post(f"/api/threads/{t['id']}/stop", headers=AUTH)
    assert (r.status_code, r.json()) == (200, {"ok": False})


# --- F: hardening headers ---------------------------------------------------------------


def _hardened(r: Any, *, no_store: bool) -> None:
    assert r.headers["x-content-type-options"] == "nosniff", (r.request.url, r.headers)
    if no_store:
        assert r.headers["cache-control"] == "no-store", (r.request.url, r.headers)


def test_f_every_answer_is_nosniff_and_api_answers_are_not_stored(c: Client) -> None:
    _hardened(c.get("/schema/openapi.json"), no_store=False)
    _hardened(c.get("/healthz"), no_store=False)
    _hardened(c.get("/playground"), no_store=False)  # public page (test_playground_files.py)
    _hardened(c.get("/nowhere"), no_store=False)
    _hardened(c.get("/api/nowhere", headers=AUTH), no_store=True)
    _hardened(c.get("/api/agents"), no_store=True)  # 401
    _hardened(c.put("/api/agents", json={}, headers=AUTH), no_store=True)  # 405
    _hardened(c.post("/api/agents", content=b"{", headers=JSON), no_store=True)  # 400
    _hardened(c.post("/api/keys", json={"name": "k"}, headers=AUTH), no_store=True)
    _hardened(c.get("/api/orgs/settings", headers=AUTH), no_store=True)
    _hardened(c.post("/api/orgs/settings", json={}, headers=AUTH), no_store=True)


def test_f_a_streamed_reply_is_hardened_and_still_streams() -> None:
    with serve(create_app(_settings())) as url, httpx.Client(base_url=url, timeout=10) as h:
        a = h.post("/api/agents", json={"name": "s", "defaultModel": "local"}, headers=AUTH).json()
        t = h.post("/api/threads", json={"agentId": a["id"]}, headers=AUTH).json()
        with h.stream(
            "POST", f"/api/threads/{t['id']}/messages", json={"content": "hi"}, headers=AUTH
        ) as r:
            _hardened(r, no_store=True)
            assert r.headers["content-type"].startswith("text/event-stream")
            lines = r.iter_lines()
            assert next(lines) == "id: 1"  # the first event arrives before the reply ends
            assert next(lines) == "event: meta"


# --- G: one credential -------------------------------------------------------------------


def test_g_two_authorization_headers_are_401(c: Client) -> None:
    # the test client joins the two with a comma, as a proxy may
    r = c.get("/api/agents", headers=[("Authorization", AUTH["Authorization"])] * 2)
    assert "exactly one Authorization header" in error_of(r, 401, "UNAUTHORIZED")
    assert r.headers["www-authenticate"].startswith("Bearer")
    assert c.get("/api/agents", headers=AUTH).status_code == 200


def test_g_two_authorization_lines_on_the_wire_are_401() -> None:
    with serve(create_app(_settings())) as url, _connect(url) as s:
        line = f"Authorization: Bearer {KEY}\r\n"
        s.sendall(f"GET /api/agents HTTP/1.1\r\nHost: x\r\n{line}{line}\r\n".encode())
        assert s.recv(4096).startswith(b"HTTP/1.1 401 ")


# --- H: the OAuth callback repeats nothing it is given -------------------------------------


def test_h_the_oauth_callback_does_not_echo_the_error(c: Client) -> None:
    r = c.get(
        f"/api/mcps/{uuid.uuid4()}/oauth/callback",
        params={
            "error": "<script>alert(1)</script>",
            "error_description": "<b>call 555-0100</b>",
            "state": "x",
        },
    )
    assert error_of(r, 400, "BAD_REQUEST") == "the authorization server refused the request"
    for echoed in ("script", "alert", "555-0100", "<b>"):
        assert echoed not in r.text


# --- I: OPTIONS --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "allow"),
    [
        ("/api/agents", "GET, OPTIONS, POST"),
        ("/api/agents/{id}", "DELETE, GET, OPTIONS, PATCH"),
        ("/api/agents/{id}/mcps", "DELETE, GET, OPTIONS, POST"),
        ("/api/threads/{id}/stop", "OPTIONS, POST"),
        ("/api/orgs/settings", "GET, OPTIONS, POST"),
    ],
)
def test_i_options_lists_the_methods_of_the_path(c: Client, path: str, allow: str) -> None:
    r = c.options(path.replace("{id}", str(uuid.uuid4())), headers=AUTH)
    assert (r.status_code, r.headers["allow"]) == (204, allow)


def test_i_options_on_an_unknown_path_is_404(c: Client) -> None:
    error_of(c.options("/api/nothing-here", headers=AUTH), 404, "NOT_FOUND")


# --- J: the document says what the service does ------------------------------------------


def test_j_the_document_marks_public_operations_and_415(c: Client) -> None:
    doc = c.get("/schema/openapi.json").json()
    paths = doc["paths"]
    assert paths["/healthz"]["get"]["security"] == []
    assert paths["/api/mcps/{mcp_id}/oauth/callback"]["get"]["security"] == []
    assert "security" not in paths["/api/agents"]["get"]  # the global bearer requirement
    assert "415" in paths["/api/agents"]["post"]["responses"]
    slug = doc["components"]["schemas"]["McpCreateBody"]["properties"]["slug"]
    assert slug["not"] == {}


def test_j_every_operation_that_reads_a_body_declares_413(c: Client) -> None:
    """Those with a body, and every authenticated POST: the idempotency middleware
    reads its body when an Idempotency-Key comes with it (and answers 413 past its cap)."""
    doc = c.get("/schema/openapi.json").json()
    missing = [
        f"{method.upper()} {path}"
        for path, item in doc["paths"].items()
        for method, op in item.items()
        if ("requestBody" in op or (method == "post" and op.get("security") != []))
        and "413" not in op["responses"]
    ]
    assert missing == []
    stop = doc["paths"]["/api/threads/{thread_id}/stop"]["post"]["responses"]["413"]
    error_body = {"$ref": "#/components/schemas/ErrorBody"}
    assert stop["content"]["application/json"]["schema"] == error_body
    assert "413" in doc["paths"]["/api/knowledge/upload"]["post"]["responses"]
    assert "413" in doc["paths"]["/api/runners/webhooks/{token}"]["post"]["responses"]


def test_j_a_bodyless_post_with_an_idempotency_key_answers_the_declared_413(c: Client) -> None:
    # the idempotency middleware's cap: the largest body any route takes (the upload's)
    settings = _settings()
    over = settings.knowledge_max_bytes + FORM_OVERHEAD + 1
    r = c.post(
        f"/api/threads/{uuid.uuid4()}/stop",
        content=b"x" * over,
        headers={**AUTH, "Idempotency-Key": f"k-{uuid.uuid4().hex}"},
    )
    error_of(r, 413, "PAYLOAD_TOO_LARGE")
