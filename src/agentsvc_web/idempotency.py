"""``Idempotency-Key`` on every POST (use_cases/idempotency.py says what it means).

The send (``sendMessage``) claims its key in the use case, with its run: its retry
re-attaches to the reply. Every other POST passes through ``IdempotencyKeys``, an
ASGI middleware behind authentication (the key belongs to the caller's
organization): it reads the body, claims the key with the request's fingerprint
(a hash of method, path and body), runs the handler, and keeps a 2xx response
(sealed) for the retries; a failed request releases the key. A retry is answered
with the kept response and ``Idempotent-Replayed: true``. Requests without the
header cost one header lookup.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging

from litestar.enums import ScopeType
from litestar.exceptions import HTTPException
from litestar.middleware import DefineMiddleware
from litestar.types import (
    ASGIApp,
    HTTPDisconnectEvent,
    HTTPRequestEvent,
    HTTPScope,
    Message,
    Receive,
    ReceiveMessage,
    Scope,
    Send,
)

from agentsvc_core.entities import Principal
from agentsvc_core.errors import DomainError
from agentsvc_core.use_cases.idempotency import Idempotency, RequestKey, check_key

__all__ = ["HEADER", "idempotency_keys", "request_key"]

log = logging.getLogger("agentsvc.web")

HEADER = b"idempotency-key"
# the routes whose use case claims the key itself
IN_USE_CASE = frozenset({"sendMessage", "editMessage", "regenerateReply", "startRunnerRun"})


def _header(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == HEADER:
            return value.decode("latin-1")
    return None


def fingerprint(method: str, path: str, body: bytes) -> bytes:
    return hashlib.sha256(b"%s %s\n%s" % (method.encode(), path.encode(), body)).digest()


def request_key(scope: HTTPScope, body: bytes) -> RequestKey | None:
    """The request's key and fingerprint, if it sent one (``InvalidInput`` when the
    key is malformed)."""
    raw = _header(scope)
    if raw is None:
        return None
    return RequestKey(
        key=check_key(raw), fingerprint=fingerprint(scope["method"], scope["path"], body)
    )


class IdempotencyKeys:
    def __init__(self, app: ASGIApp, idempotency: Idempotency, max_body: int) -> None:
        self.app = app
        self._idempotency = idempotency
        self._max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] != ScopeType.HTTP
            or scope["method"] != "POST"
            or _header(scope) is None
            or getattr(scope.get("route_handler"), "operation_id", None) in IN_USE_CASE
        ):
            await self.app(scope, receive, send)
            return
        who = scope.get("user")
        if not isinstance(who, Principal):  # a public route (the OAuth callback)
            await self.app(scope, receive, send)
            return
        body = await self._read(receive)
        key = request_key(scope, body)
        assert key is not None
        replay = await self._idempotency.claim(who.org_id, key)
        if replay is not None:
            await send(
                {
                    "type": "http.response.start",
                    "status": replay.status,
                    "headers": [
                        (b"content-type", replay.content_type.encode("latin-1")),
                        (b"content-length", str(len(replay.body)).encode()),
                        (b"idempotent-replayed", b"true"),
                    ],
                }
            )
            await send({"type": "http.response.body", "body": replay.body, "more_body": False})
            return
        await self._answer(scope, body, send, who.org_id, key)

    async def _answer(
        self, scope: Scope, body: bytes, send: Send, org_id: str, key: RequestKey
    ) -> None:
        status = 0
        content_type = "application/json"
        chunks: list[bytes] = []
        sent_body = False
        settled = False

        async def replayed() -> ReceiveMessage:
            nonlocal sent_body
            if sent_body:
                gone: HTTPDisconnectEvent = {"type": "http.disconnect"}
                return gone
            sent_body = True
            whole: HTTPRequestEvent = {"type": "http.request", "body": body, "more_body": False}
            return whole

        async def capture(message: Message) -> None:
            nonlocal status, content_type, settled
            if message["type"] == "http.response.start":
                status = message["status"]
                for name, value in message.get("headers", []):
                    if name.lower() == b"content-type":
                        content_type = value.decode("latin-1")
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
                if not message.get("more_body", False) and not settled:
                    # the key is settled before the last byte leaves: a client that
                    # retries the moment it has the answer finds it kept (or free)
                    settled = True
                    await self._settle(org_id, key, status, content_type, b"".join(chunks))
            await send(message)

        try:
            await self.app(scope, replayed, capture)
        except BaseException:
            if not settled:
                await self._idempotency.release(org_id, key)
            raise
        if not settled:  # no body was sent
            await self._settle(org_id, key, status, content_type, b"".join(chunks))

    async def _settle(
        self, org_id: str, key: RequestKey, status: int, content_type: str, body: bytes
    ) -> None:
        """Keeps a 2xx answer for the retries; frees the key after any other."""
        try:
            if 200 <= status < 300:
                await self._idempotency.complete(org_id, key, status, content_type, body)
            else:
                await self._idempotency.release(org_id, key)
        except DomainError as exc:
            # the key could not be kept: free it (a retry then runs again)
            log.warning("idempotency key not recorded: %s", exc.detail)
            with contextlib.suppress(DomainError):
                await self._idempotency.release(org_id, key)

    async def _read(self, receive: Receive) -> bytes:
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            body += message.get("body", b"")
            if len(body) > self._max_body:
                raise HTTPException(status_code=413, detail="request body is too large")
            if not message.get("more_body", False):
                break
        return bytes(body)


def idempotency_keys(idempotency: Idempotency, max_body: int) -> DefineMiddleware:
    return DefineMiddleware(IdempotencyKeys, idempotency=idempotency, max_body=max_body)
