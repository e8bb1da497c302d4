"""The end-to-end suite's secret scan finds what it is for (tests/e2e/secret_scan.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx

from tests.e2e.secret_scan import SecretScan
from tests.web.live import serve

SECRET = "mcp-header-secret-0123456789"


class Echo:
    """An ASGI app answering each path with a fixed body (the "leaks" under test)."""

    def __init__(self, answers: dict[str, bytes]) -> None:
        self.answers = answers

    async def __call__(self, scope: dict, receive: object, send: object) -> None:  # type: ignore[type-arg]
        if scope["type"] != "http":
            return
        body = self.answers.get(scope["path"], b"{}")
        await send({"type": "http.response.start", "status": 200, "headers": []})  # type: ignore[operator]
        await send({"type": "http.response.body", "body": body})  # type: ignore[operator]


def _run(
    answers: dict[str, bytes],
    calls: Iterator[tuple[str, str, object]] | list[tuple[str, str, object]],
) -> SecretScan:
    scan = SecretScan()
    with serve(Echo(answers)) as url, scan.tapping(), httpx.Client(base_url=url) as c:
        for method, path, body in calls:
            c.request(method, path, json=body)
    return scan


def test_a_configured_mcp_credential_in_any_answer_is_found() -> None:
    scan = _run(
        {"/api/mcps": b'{"hasCredentials": true}', "/api/mcps/x": SECRET.encode()},
        [
            (
                "POST",
                "/api/mcps",
                {"credentials": {"headers": {"Authorization": f"Bearer {SECRET}"}}},
            ),
            ("GET", "/api/mcps/x", None),
        ],
    )
    assert scan.findings() == ["MCP credential (headers) in the answer to GET /api/mcps/x"]


def test_a_database_password_in_any_answer_is_found() -> None:
    password = "db-pass%2Fword-0123"  # percent-encoded in the URL, plain in a leak
    connection = f"postgresql://reader:{password}@db.example/shop"
    scan = _run(
        {
            "/api/integrations": b'{"has_connection": true}',
            "/api/integrations/x": b'{"detail": "db-pass/word-0123"}',
            "/api/integrations/y": connection.encode(),
        },
        [
            ("POST", "/api/integrations", {"name": "Shop", "connection": connection}),
            ("GET", "/api/integrations/x", None),
            ("GET", "/api/integrations/y", None),
        ],
    )
    assert scan.findings() == [
        "database connection string in the answer to GET /api/integrations/y",
        "database password in the answer to GET /api/integrations/x",
    ]


def test_a_connection_changed_by_a_patch_is_learned_too() -> None:
    connection = "postgresql://reader:patched-pw-5566@db.example/shop"
    scan = _run(
        {
            "/api/integrations/x": b'{"has_connection": true}',
            "/api/integrations/y": b'{"detail": "patched-pw-5566"}',
        },
        [
            ("PATCH", "/api/integrations/x", {"connection": connection}),
            ("GET", "/api/integrations/y", None),
            # an agent's attachment names no connection: nothing learned from it
            ("POST", "/api/agents/a/integrations", {"connection": "not-learned-0123"}),
            ("GET", "/api/integrations/not-learned-0123", None),
        ],
    )
    assert scan.findings() == ["database password in the answer to GET /api/integrations/y"]


def test_an_oauth_token_in_the_grant_status_is_found() -> None:
    token = "oauth-at-secret-0123456789"
    scan = SecretScan()
    scan.secret(token, "an OAuth access token")
    answers = {
        "/api/mcps/x/oauth": f'{{"connected": true, "token": "{token}"}}'.encode(),
        "/api/mcps/y/oauth": b'{"connected": true, "expiresAt": null, "scope": "tools"}',
    }
    with serve(Echo(answers)) as url, scan.tapping(), httpx.Client(base_url=url) as c:
        c.get("/api/mcps/x/oauth")
        c.get("/api/mcps/y/oauth")
        c.delete("/api/mcps/x/oauth")
    # the echo answers DELETE with the same body: that answer is scanned too
    assert scan.findings() == [
        "an OAuth access token in the answer to DELETE /api/mcps/x/oauth",
        "an OAuth access token in the answer to GET /api/mcps/x/oauth",
    ]


def test_a_new_api_key_may_only_be_in_the_answer_that_made_it() -> None:
    key = b"ask_abcdefghijklmnopqrstuvwxyz"
    ok = _run({"/api/keys": b'{"key": "' + key + b'"}'}, [("POST", "/api/keys", {})])
    assert ok.findings() == []
    leaked = _run(
        {"/api/keys": b'{"key": "' + key + b'"}', "/api/agents": key},
        [("POST", "/api/keys", {}), ("GET", "/api/agents", None)],
    )
    assert leaked.findings() == ["a key or token in the answer to GET /api/agents"]


def test_an_identity_secret_and_a_visitor_token_only_in_the_answer_that_made_them() -> None:
    made = b'{"slug": "s", "identity_secret": "pcs_0123456789abcdef"}'
    session = b'{"token": "vt_v1.k.0123456789abcdef"}'
    scan = _run(
        {
            "/api/agents/a/publish": made,
            "/api/public/chat/s/sessions": session,
            "/api/agents/a": b"pcs_0123456789abcdef",
            "/api/public/chat/s": b"vt_v1.k.0123456789abcdef",
        },
        [
            ("POST", "/api/agents/a/publish", {}),
            ("POST", "/api/public/chat/s/sessions", {}),
            ("GET", "/api/agents/a", None),
            ("GET", "/api/public/chat/s", None),
        ],
    )
    assert scan.findings() == [
        "a key or token in the answer to GET /api/agents/a",
        "a key or token in the answer to GET /api/public/chat/s",
    ]


def test_the_signing_secret_belongs_to_the_settings_answers_only() -> None:
    body = b'{"signing_secret": "whsec_0123456789abcdef"}'
    scan = _run(
        {"/api/orgs/settings": body, "/api/agents": b"whsec_0123456789abcdef"},
        [("GET", "/api/orgs/settings", None), ("GET", "/api/agents", None)],
    )
    assert scan.findings() == ["signing secret in the answer to GET /api/agents"]


def test_secrets_of_the_environment_in_a_log_are_found(tmp_path: Path) -> None:
    scan = SecretScan()
    log = tmp_path / "svc.log"
    log.write_text("INFO starting\nDEBUG key=sk-provider-key-123456\n")
    scan.service_env(
        {"AGENTSVC_BETA_API_KEY": "sk-provider-key-123456", "AGENTSVC_PORT": "80"}, None
    )
    scan.log_file(log)
    assert scan.findings() == ["AGENTSVC_BETA_API_KEY in the service log svc.log"]
    data = tmp_path / "data"
    data.mkdir()
    (data / "encryption-keys").write_text("k1:QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=\n")
    scan.service_env({}, str(data))
    log.write_text("oops QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo=")
    assert scan.findings() == ["generated encryption key in the service log svc.log"]


def test_the_embedding_providers_key_is_learned_from_the_service_env(tmp_path: Path) -> None:
    scan = SecretScan()
    log = tmp_path / "svc.log"
    log.write_text("WARNING embeddings failed: key emb-key-0123456789abcdef refused\n")
    scan.service_env(
        {
            "AGENTSVC_EMBEDDINGS_API_KEY": "emb-key-0123456789abcdef",
            "AGENTSVC_EMBEDDINGS_MODEL": "m",
        },
        None,
    )
    scan.log_file(log)
    assert scan.findings() == ["AGENTSVC_EMBEDDINGS_API_KEY in the service log svc.log"]


def test_a_streamed_answer_is_scanned_too() -> None:
    scan = SecretScan()
    scan.secret("byok-user-key-987654321", "BYOK key")
    answers = {"/s": b'event: token\ndata: {"delta": "byok-user-key-987654321"}\n\n'}
    with (
        serve(Echo(answers)) as url,
        scan.tapping(),
        httpx.Client(base_url=url) as c,
        c.stream("POST", "/s") as r,
    ):
        assert list(r.iter_lines())
    assert scan.findings() == ["BYOK key in the answer to POST /s"]
