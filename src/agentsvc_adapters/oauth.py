"""OAuth 2.1 over HTTP for MCP servers (httpx): discovery, registration, tokens.

- Protected-resource metadata (RFC 9728): ``/.well-known/oauth-protected-resource``
  inserted before the resource's path, then at the root.
- Authorization-server metadata (RFC 8414): ``/.well-known/oauth-authorization-server``
  inserted before the issuer's path, then OpenID ``/.well-known/openid-configuration``.
  A server that does not list ``S256`` in ``code_challenge_methods_supported`` is
  refused (OAuth 2.1 requires PKCE).
- Dynamic client registration (RFC 7591) as a public client
  (``token_endpoint_auth_method: none``).
- Token requests send the RFC 8707 ``resource``. Redirects are never followed,
  answers are capped in size, and every URL, learned from metadata included,
  passes the outbound URL policy first; every connection goes through the outbound
  guard (``agentsvc_adapters.outbound``), which checks the address it resolves to.
  A network failure reads ``could not reach <host>``, whatever it was.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
import msgspec

from agentsvc_adapters.outbound import OutboundGuard, failure, note_refusal
from agentsvc_core.errors import Upstream
from agentsvc_core.ports.oauth import AuthServer, ClientRegistration, OAuthNetwork, TokenSet

_MAX_BYTES = 256 * 1024
_json = msgspec.json.Decoder(dict[str, Any])


def _fail(detail: str) -> Upstream:
    return Upstream(detail, code="OAUTH_ERROR")


def _well_known(url: str, name: str) -> list[str]:
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    root = urlunsplit((parts.scheme, parts.netloc, f"/.well-known/{name}", "", ""))
    inserted = urlunsplit((parts.scheme, parts.netloc, f"/.well-known/{name}{path}", "", ""))
    return [inserted, root] if path else [root]


class HttpOAuth(OAuthNetwork):
    def __init__(self, guard: OutboundGuard, *, timeout_s: float = 10.0) -> None:
        self._guard = guard
        self._http = guard.http_client(timeout=timeout_s)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _call(self, method: str, url: str, **kw: Any) -> tuple[int, dict[str, Any]]:
        why = self._guard.refusal(url)
        if why:
            note_refusal(f"OAuth: {why}")
            raise _fail(f"refused to contact {url}: {why}")
        try:
            async with self._http.stream(
                method, url, headers={"Accept": "application/json"}, **kw
            ) as r:
                body = b""
                async for chunk in r.aiter_bytes():
                    body += chunk
                    if len(body) > _MAX_BYTES:
                        raise _fail(f"{url} answered too much")
                status = r.status_code
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            raise _fail(failure(exc, url)) from None
        try:
            data = _json.decode(body) if body else {}
        except msgspec.DecodeError:
            data = {}
        return status, data

    async def _first(self, urls: list[str]) -> dict[str, Any] | None:
        for url in urls:
            status, data = await self._call("GET", url)
            if status == 200 and data:
                return data
        return None

    async def discover(self, resource_url: str) -> AuthServer:
        prm = await self._first(_well_known(resource_url, "oauth-protected-resource"))
        if prm is None or not prm.get("authorization_servers"):
            raise _fail(f"{resource_url} publishes no protected-resource metadata (RFC 9728)")
        issuer = str(prm["authorization_servers"][0])
        meta = await self._first(
            [
                *_well_known(issuer, "oauth-authorization-server"),
                issuer.rstrip("/") + "/.well-known/openid-configuration",
            ]
        )
        if meta is None:
            raise _fail(f"{issuer} publishes no authorization-server metadata (RFC 8414)")
        if "S256" not in (meta.get("code_challenge_methods_supported") or []):
            raise _fail(f"{issuer} does not support PKCE with S256, which OAuth 2.1 requires")
        try:
            return AuthServer(
                resource=str(prm.get("resource") or resource_url),
                issuer=str(meta.get("issuer") or issuer),
                authorization_endpoint=str(meta["authorization_endpoint"]),
                token_endpoint=str(meta["token_endpoint"]),
                registration_endpoint=meta.get("registration_endpoint"),
                scopes=tuple(str(s) for s in prm.get("scopes_supported") or ()),
            )
        except KeyError as exc:
            raise _fail(f"{issuer} metadata lacks {exc.args[0]}") from None

    async def register(self, server: AuthServer, redirect_uri: str) -> ClientRegistration:
        assert server.registration_endpoint is not None
        status, data = await self._call(
            "POST",
            server.registration_endpoint,
            json={
                "client_name": "agentsvc",
                "redirect_uris": [redirect_uri],
                "grant_types": ["authorization_code", "refresh_token"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "none",
            },
        )
        if status not in (200, 201) or "client_id" not in data:
            raise _fail(f"client registration at {server.issuer} failed ({status})")
        return ClientRegistration(
            client_id=str(data["client_id"]), client_secret=data.get("client_secret")
        )

    async def _token(
        self, server: AuthServer, client: ClientRegistration, form: dict[str, str]
    ) -> TokenSet:
        form = {**form, "client_id": client.client_id, "resource": server.resource}
        if client.client_secret:
            form["client_secret"] = client.client_secret
        status, data = await self._call("POST", server.token_endpoint, data=form)
        if status != 200 or "access_token" not in data:
            reason = data.get("error", "no token")
            raise _fail(f"the token endpoint of {server.issuer} answered {status} ({reason})")
        expires_in = data.get("expires_in")
        now = datetime.now(UTC)
        return TokenSet(
            access_token=str(data["access_token"]),
            token_type=str(data.get("token_type", "Bearer")),
            refresh_token=data.get("refresh_token"),
            expires_at=now + timedelta(seconds=float(expires_in))
            if isinstance(expires_in, int | float)
            else None,
            issued_at=now,
            scope=data.get("scope"),
        )

    async def exchange(
        self,
        server: AuthServer,
        client: ClientRegistration,
        *,
        code: str,
        verifier: str,
        redirect_uri: str,
    ) -> TokenSet:
        return await self._token(
            server,
            client,
            {
                "grant_type": "authorization_code",
                "code": code,
                "code_verifier": verifier,
                "redirect_uri": redirect_uri,
            },
        )

    async def refresh(
        self, server: AuthServer, client: ClientRegistration, refresh_token: str
    ) -> TokenSet:
        return await self._token(
            server, client, {"grant_type": "refresh_token", "refresh_token": refresh_token}
        )

    async def revoke(
        self, server: AuthServer, client: ClientRegistration, token: str, hint: str
    ) -> bool:
        if server.revocation_endpoint is None:
            return False
        form = {"token": token, "token_type_hint": hint, "client_id": client.client_id}
        if client.client_secret:
            form["client_secret"] = client.client_secret
        try:
            status, _ = await self._call("POST", server.revocation_endpoint, data=form)
        except Upstream:
            return False
        return status == 200
