"""The ``X-Service-*`` signature of outbound calls to a customer's endpoint (the
credential resolver, webhook tools; docs/byok.md says how to check it).

``X-Service-Signature`` is the lowercase hex HMAC-SHA256, keyed with the UTF-8 of
the organization's signing secret, over ``"{timestamp}.{nonce}.{raw body}"``;
during a rotation both signatures are sent, space-separated, newest first. The
timestamp (Unix seconds) and nonce (a UUID) are fresh per attempt.
"""

from __future__ import annotations

import hashlib
import hmac
import time
import uuid

__all__ = ["sign", "signed_headers"]


def sign(secret: str, timestamp: str, nonce: str, body: bytes) -> str:
    message = timestamp.encode() + b"." + nonce.encode() + b"." + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_headers(secrets: list[str], body: bytes) -> dict[str, str]:
    """The three headers for one attempt of sending ``body``."""
    timestamp = str(int(time.time()))
    nonce = str(uuid.uuid4())
    return {
        "X-Service-Timestamp": timestamp,
        "X-Service-Nonce": nonce,
        "X-Service-Signature": " ".join(sign(s, timestamp, nonce, body) for s in secrets),
    }
