"""Verify the service's event webhooks (``/api/webhooks``): Standard Webhooks.

Each delivery carries ``webhook-id`` (the event's id: the same for every retry and
resend of it, so a receiver can drop repeats), ``webhook-timestamp`` (Unix seconds
of the attempt) and ``webhook-signature``: ``v1,`` and the base64 HMAC-SHA256,
keyed with the base64-decoded part of the endpoint's ``whsec_`` secret, over
``"{webhook-id}.{webhook-timestamp}.{raw body}"``. Several space-separated
signatures may be sent; one matching is enough.

::

    from agentsvc_client import verify_webhook, WebhookVerificationError

    try:
        event = verify_webhook(secret, request.headers, raw_body)
    except WebhookVerificationError as exc:
        return 400, exc.reason
    # event == {"type": "message.created", "timestamp": "...", "data": {...}}

Any Standard Webhooks library verifies them too (``standardwebhooks`` in Python).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

from agentsvc_client.webhooks import WebhookVerificationError

__all__ = ["DEFAULT_TOLERANCE_S", "WebhookVerificationError", "verify_webhook"]

DEFAULT_TOLERANCE_S = 300  # five minutes, as the specification's libraries
PREFIX = "whsec_"


def _key(secret: str) -> bytes:
    try:
        key = base64.b64decode(secret.removeprefix(PREFIX), validate=True)
    except (binascii.Error, ValueError):
        raise WebhookVerificationError("the secret is not a whsec_ secret") from None
    if not key:
        raise WebhookVerificationError("the secret is empty")
    return key


def verify_webhook(
    secret: str,
    headers: Mapping[str, str],
    body: bytes | str,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    now: float | None = None,
) -> Any:
    """The delivery's event (its JSON body, parsed) when ``headers`` sign ``body``
    with ``secret`` within ``tolerance_s`` of ``now`` (Unix seconds; the current
    time when None); otherwise raises ``WebhookVerificationError``. Pass the raw
    body as received: parsing and serialising it again changes the bytes."""
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id = lower.get("webhook-id")
    stamp = lower.get("webhook-timestamp")
    signatures = lower.get("webhook-signature")
    if not (msg_id and stamp and signatures):
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        at = int(stamp)
    except ValueError:
        raise WebhookVerificationError("the timestamp is not a whole number") from None
    current = time.time() if now is None else now
    if abs(current - at) > tolerance_s:
        raise WebhookVerificationError("the timestamp is outside the tolerance")
    raw = body.encode() if isinstance(body, str) else bytes(body)
    content = f"{msg_id}.{at}.".encode() + raw
    expected = hmac.new(_key(secret), content, hashlib.sha256).digest()
    for candidate in signatures.split(" "):
        version, _, value = candidate.partition(",")
        if version != "v1":
            continue
        try:
            given = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            continue
        if hmac.compare_digest(expected, given):
            return json.loads(raw)
    raise WebhookVerificationError("no signature matches")
