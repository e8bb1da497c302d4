"""An organization's signed webhook calls, as the use cases make them (webhook
tools, runners' webhook steps): the headers such a call may carry, its
``Idempotency-Key``, the secrets it is signed with, and the call itself.

The signature (``X-Service-*``, docs/byok.md) is the caller's to compute
(``WebhookCaller``; ``agentsvc_adapters/signing.py``): here the call is given the
organization's signing secrets, newest first, so that during a rotation a
receiver can check either. A call's own headers may not replace the ones the
service sets for the signature and the body.
"""

from __future__ import annotations

import hashlib
from typing import Protocol
from uuid import UUID

import msgspec

from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import SecretBox, WebhookAnswer, WebhookCall, WebhookCaller
from agentsvc_core.rules import check_header, check_text

__all__ = [
    "MAX_HEADERS",
    "SigningSecrets",
    "checked_headers",
    "idempotency_key",
    "opened_headers",
    "signed_call",
]

MAX_HEADERS = 32
# headers the service sets itself: a call's own headers may not replace them
_OWN_HEADERS = frozenset(
    {
        "content-type",
        "content-length",
        "host",
        "idempotency-key",
        "transfer-encoding",
        "connection",
        "x-service-timestamp",
        "x-service-nonce",
        "x-service-signature",
    }
)
_headers = msgspec.json.Decoder(dict[str, str])


class SigningSecrets(Protocol):
    async def signing_secrets(self, org: str) -> list[str]:
        """The organization's signing secrets, newest first (``OrgSettings``)."""
        ...


def idempotency_key(org: str, scope: UUID | None, call_id: str) -> str:
    """``Idempotency-Key`` of a call: the same for a retried call, and unlike any
    other call's. ``call_id`` is unique only within ``scope``: a model's tool call
    id within its thread, a runner step's id within its run."""
    return hashlib.sha256(f"{org}:{scope}:{call_id}".encode()).hexdigest()


def checked_headers(field: str, headers: dict[str, str]) -> dict[str, str]:
    """Headers an organization's webhook call may carry (a tool's, a runner step's):
    a bounded number of valid, ASCII headers, none of those the service sets."""
    if len(headers) > MAX_HEADERS:
        raise InvalidInput(field, f"at most {MAX_HEADERS} headers")
    for name, value in headers.items():
        check_header(field, name, value)
        if not value.isascii():  # HTTP/1.1 header values are bytes; the value is not echoed
            raise InvalidInput(field, f"the value of {name!r} must be ASCII")
        check_text(field, value, max_len=8192)
        if name.lower() in _OWN_HEADERS:
            raise InvalidInput(field, f"{name!r} is set by the service")
    return headers


def opened_headers(box: SecretBox, sealed: str | None, where: str) -> dict[str, str]:
    """A call's own headers, sealed under the context ``where`` (none: ``{}``)."""
    return _headers.decode(box.open(sealed, where)) if sealed else {}


async def signed_call(
    caller: WebhookCaller,
    signing: SigningSecrets,
    *,
    org: str,
    url: str,
    method: str,
    headers: dict[str, str],
    body: bytes,
    timeout_ms: int,
    max_bytes: int,
    key: str,
) -> WebhookAnswer:
    """One call of the organization ``org`` to ``url``: ``body`` sent with the
    call's own ``headers``, signed with the organization's secrets of now, within
    ``timeout_ms`` and ``max_bytes``, ``key`` its ``Idempotency-Key``. The answer
    says what happened: a failed call is an answer, never an exception."""
    return await caller.call(
        WebhookCall(
            url=url,
            method=method,
            headers=headers,
            body=body,
            secrets=await signing.signing_secrets(org),
            timeout_ms=timeout_ms,
            max_bytes=max_bytes,
            idempotency_key=key,
        )
    )
