"""A small OAuth 2.1 authorization server (and protected-resource metadata) for tests.

Serves, under one base URL: RFC 9728 metadata for ``{base}/mcp``, RFC 8414 metadata
for the issuer ``{base}/as``, RFC 7591 registration, an authorization endpoint that
approves at once (redirects with a code), and a token endpoint that checks PKCE
S256, the client, the redirect URI and the RFC 8707 resource, and counts refreshes;
an RFC 7009 revocation endpoint (``/as/revoke``) that records what it was asked.

For a managed provider (an OAuth app registered beforehand, not dynamically):
``clients`` maps a client id to its secret, which the token and revocation
endpoints then require; ``resource`` is the MCP server's URL the token requests name.
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
from typing import Any
from urllib.parse import parse_qs, urlencode


class AuthServer:
    def __init__(self) -> None:
        self.base = ""
        self.s256 = True
        self.expires_in = 3600
        self.codes: dict[str, dict[str, str]] = {}
        self.refreshes = 0
        self.issued: list[str] = []
        self.registrations = 0
        self.token_requests: list[dict[str, str]] = []
        # tokens are f"{prefix}at-{n}": a long prefix makes them worth a secret scan
        self.token_prefix = ""
        self.clients: dict[str, str] = {}
        self.resource: str | None = None
        self.revocations: list[dict[str, str]] = []
        self.revoked: set[str] = set()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        status, headers, payload = self.handle(
            scope["method"], scope["path"], scope["query_string"].decode(), body
        )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.encode(), v.encode()) for k, v in headers],
            }
        )
        await send({"type": "http.response.body", "body": payload})

    def _json(self, data: object, status: int = 200) -> tuple[int, list[tuple[str, str]], bytes]:
        return status, [("content-type", "application/json")], json.dumps(data).encode()

    def handle(
        self, method: str, path: str, query: str, body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        b = self.base
        if path == "/.well-known/oauth-protected-resource/mcp":
            return self._json(
                {
                    "resource": f"{b}/mcp",
                    "authorization_servers": [f"{b}/as"],
                    "scopes_supported": ["tools"],
                }
            )
        if path == "/.well-known/oauth-authorization-server/as":
            return self._json(
                {
                    "issuer": f"{b}/as",
                    "authorization_endpoint": f"{b}/as/authorize",
                    "token_endpoint": f"{b}/as/token",
                    "registration_endpoint": f"{b}/as/register",
                    "code_challenge_methods_supported": ["S256"] if self.s256 else ["plain"],
                }
            )
        if path == "/as/register" and method == "POST":
            self.registrations += 1
            data = json.loads(body)
            assert data["token_endpoint_auth_method"] == "none"
            return self._json(
                {
                    "client_id": f"client-{self.registrations}",
                    "redirect_uris": data["redirect_uris"],
                },
                201,
            )
        if path == "/as/authorize":
            q = {k: v[0] for k, v in parse_qs(query).items()}
            assert q["response_type"] == "code"
            assert q["code_challenge_method"] == "S256"
            code = secrets.token_urlsafe(16)
            self.codes[code] = q
            return (
                302,
                [
                    (
                        "location",
                        f"{q['redirect_uri']}?{urlencode({'code': code, 'state': q['state']})}",
                    )
                ],
                b"",
            )
        if path == "/as/revoke" and method == "POST":
            return self._revoke({k: v[0] for k, v in parse_qs(body.decode()).items()})
        if path == "/as/token" and method == "POST":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            self.token_requests.append(form)
            if not self._client_ok(form):
                return self._json({"error": "invalid_client"}, 401)
            if form.get("grant_type") == "authorization_code":
                asked = self.codes.pop(form.get("code", ""), None)
                challenge = (
                    base64.urlsafe_b64encode(
                        hashlib.sha256(form.get("code_verifier", "").encode()).digest()
                    )
                    .decode()
                    .rstrip("=")
                )
                if (
                    asked is None
                    or challenge != asked["code_challenge"]
                    or form.get("client_id") != asked["client_id"]
                    or form.get("redirect_uri") != asked["redirect_uri"]
                    or form.get("resource") != (self.resource or f"{b}/mcp")
                ):
                    return self._json({"error": "invalid_grant"}, 400)
                return self._json(self._tokens())
            if (
                form.get("grant_type") == "refresh_token"
                and form.get("refresh_token", "").startswith(f"{self.token_prefix}rt-")
                and form["refresh_token"] not in self.revoked
            ):
                self.refreshes += 1
                return self._json(self._tokens())
            return self._json({"error": "unsupported_grant_type"}, 400)
        return self._json({"error": "not_found"}, 404)

    def _client_ok(self, form: dict[str, str]) -> bool:
        """A registered (managed) client must authenticate with its secret."""
        client = form.get("client_id", "")
        return client not in self.clients or form.get("client_secret") == self.clients[client]

    def _revoke(self, form: dict[str, str]) -> tuple[int, list[tuple[str, str]], bytes]:
        """RFC 7009: the client authenticates, ``token`` is required, the answer is
        200 whether or not the token was known (2.2)."""
        self.revocations.append(form)
        if not self._client_ok(form) or "client_id" not in form:
            return self._json({"error": "invalid_client"}, 401)
        if not form.get("token"):
            return self._json({"error": "invalid_request"}, 400)
        self.revoked.add(form["token"])
        return 200, [], b""

    def _tokens(self) -> dict[str, object]:
        n = len(self.issued) + 1
        p = self.token_prefix
        self.issued.append(f"{p}at-{n}")
        return {
            "access_token": f"{p}at-{n}",
            "token_type": "Bearer",
            "refresh_token": f"{p}rt-{n}",
            "expires_in": self.expires_in,
            "scope": "tools",
        }
