"""Bearer authentication for every ``/api/`` route (the OpenAPI document is public)."""

from __future__ import annotations

from typing import Any

from litestar.connection import ASGIConnection
from litestar.middleware import (
    AbstractAuthenticationMiddleware,
    AuthenticationResult,
    DefineMiddleware,
)

from agentsvc_core.entities import Principal
from agentsvc_core.errors import Unauthenticated
from agentsvc_core.use_cases import Authenticator


class BearerAuth(AbstractAuthenticationMiddleware):
    def __init__(self, app: Any, authenticator: Authenticator, **kwargs: Any) -> None:
        super().__init__(app, **kwargs)
        self._authenticator = authenticator

    async def authenticate_request(
        self, connection: ASGIConnection[Any, Any, Any, Any]
    ) -> AuthenticationResult:
        sent = connection.headers.getall("authorization", [])
        if len(sent) > 1 or "," in "".join(sent):
            # Two credentials (as two headers, or joined by a comma as proxies do; a
            # bearer token has no comma): which one a proxy or a library would pick
            # is anyone's guess, so neither is.
            raise Unauthenticated("send exactly one Authorization header")
        header = sent[0] if sent else ""
        scheme, _, token = header.partition(" ")
        if not header:
            raise Unauthenticated("missing Authorization header")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthenticated("Authorization must be 'Bearer <token>'")
        principal = await self._authenticator.authenticate(token.strip())
        return AuthenticationResult(user=principal, auth=principal.method)


def bearer_auth(authenticator: Authenticator) -> DefineMiddleware:
    return DefineMiddleware(
        BearerAuth,
        authenticator=authenticator,
        # the OAuth callback comes from the user's browser; its single-use state,
        # bound to organization, user and server, is what authenticates it
        # /readyz and /metrics are the operators' (/metrics has its own token)
        exclude=[
            "^/schema",
            # the playground's static files; its API calls carry the user's key
            "^/playground(/|$)",
            "^/healthz",
            "^/readyz$",
            "^/metrics$",
            "^/api/mcps/[0-9a-fA-F-]+/oauth/callback$",
            "^/api/mcps/managed-oauth/callback$",
            # a runner's inbound webhook: its token (which can start runs of one
            # runner and nothing else) is what authenticates it
            "^/api/runners/webhooks/[^/]+$",
            # a runner's button page and its script: the button trigger's token
            "^/api/runners/[0-9a-fA-F-]+/(button|embed\\.js)$",
            # an agent's marketplace avatar: a public picture, named by its digest
            "^/api/public/avatars/[0-9a-fA-F-]+/[^/]+$",
            # a published chat's public routes: a visitor token (which can use the
            # visitor's own threads of that chat and nothing else) authenticates
            # them; the public marketplace listing and the hosted chat page are
            # public by purpose
            "^/api/public/chat/",
            # a channel's inbound endpoint: the platform's proof (a signature, a
            # secret token) checked by the channel's type authenticates it
            "^/api/channels/[0-9a-fA-F-]+/webhook/?$",
            "^/api/public/marketplace/?$",
            "^/c/",
        ],
    )


def principal_of(connection: ASGIConnection[Any, Any, Any, Any]) -> Principal:
    user = connection.user
    assert isinstance(user, Principal)
    return user
