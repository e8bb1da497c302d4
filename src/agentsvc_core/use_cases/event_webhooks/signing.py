"""Standard Webhooks signing (docs/webhooks.md), pure.

A secret is ``whsec_`` and the base64 of 32 random bytes (the specification
allows 24 to 64). A message's signature is the HMAC-SHA256, under the secret's
bytes, of ``{webhook-id}.{webhook-timestamp}.{body}``, sent as ``v1,`` and its
base64 in ``webhook-signature``; the timestamp is whole seconds since the epoch,
the time of the attempt (so a resend is not refused as old by a receiver's
tolerance). A receiver checks it with the specification's reference libraries
(``standardwebhooks`` in Python) or the Python client's ``verify_webhook``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from datetime import datetime

__all__ = ["SECRET_PREFIX", "new_secret", "secret_bytes", "signature", "signed_headers"]

SECRET_PREFIX = "whsec_"  # noqa: S105 - the format's prefix, not a secret
SECRET_BYTES = 32


def new_secret() -> str:
    """A fresh secret, as it is shown once."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(SECRET_BYTES)).decode("ascii")


def secret_bytes(secret: str) -> bytes:
    """The key a ``whsec_`` secret stands for."""
    return base64.b64decode(secret.removeprefix(SECRET_PREFIX))


def signature(secret: str, msg_id: str, timestamp: int, body: bytes) -> str:
    """``v1,<base64 of the HMAC-SHA256 of "{msg_id}.{timestamp}.{body}">``."""
    content = f"{msg_id}.{timestamp}.".encode() + body
    digest = hmac.new(secret_bytes(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode("ascii")


def signed_headers(secret: str, msg_id: str, at: datetime, body: bytes) -> dict[str, str]:
    """The three headers of a delivery attempt made at ``at``."""
    timestamp = int(at.timestamp())
    return {
        "webhook-id": msg_id,
        "webhook-timestamp": str(timestamp),
        "webhook-signature": signature(secret, msg_id, timestamp, body),
    }
