"""The proofs of a published chat, pure functions: the identity a customer's server
signs for a visitor of a private chat, and the identity secret's rotation.

A customer's server proves who a visitor is with
``HMAC-SHA256(identity_secret, "{visitorId}.{expiresAt}")`` in hex, ``expiresAt``
in Unix seconds, in the future and at most 24 hours ahead (``MAX_IDENTITY_S``).
The signature is compared in constant time with the current secret's, and with
the previous secret's for an hour after a rotation (``ROTATION_GRACE``)."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime, timedelta

__all__ = [
    "MAX_IDENTITY_S",
    "ROTATION_GRACE",
    "VISITOR_ID",
    "identity_signature",
    "new_identity_secret",
    "new_visitor_id",
    "signed_by",
]

MAX_IDENTITY_S = 24 * 3600
ROTATION_GRACE = timedelta(hours=1)
VISITOR_ID = re.compile(r"[A-Za-z0-9._:@-]{1,128}")
_HEX = re.compile(r"[0-9a-f]{64}")


def new_identity_secret() -> str:
    return "pcs_" + secrets.token_urlsafe(32)


def new_visitor_id() -> str:
    """An anonymous visitor's id."""
    return "anon-" + secrets.token_hex(12)


def identity_signature(secret: str, visitor_id: str, expires_at: int) -> str:
    """What the customer's server computes (docs/publishing.md)."""
    message = f"{visitor_id}.{expires_at}".encode()
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signed_by(
    secrets_: list[str], visitor_id: str, expires_at: int, signature: str, now: datetime
) -> bool:
    """Whether ``signature`` proves ``visitor_id`` until ``expires_at`` with one of
    ``secrets_`` (the secrets accepted now), at ``now``. Every secret is compared
    (no early return), each in constant time."""
    left = expires_at - now.timestamp()
    if not (0 < left <= MAX_IDENTITY_S) or not VISITOR_ID.fullmatch(visitor_id):
        return False
    given = signature.strip().lower()
    if not _HEX.fullmatch(given):
        return False
    matched = False
    for secret in secrets_:
        expected = identity_signature(secret, visitor_id, expires_at)
        matched |= hmac.compare_digest(expected, given)
    return matched


def accepted_secrets(
    current: str, previous: str | None, rotated_at: datetime | None, now: datetime
) -> list[str]:
    """The secrets a signature may be made with at ``now``: the current one, and
    the previous one until an hour after the rotation."""
    if previous is not None and rotated_at is not None and now < rotated_at + ROTATION_GRACE:
        return [current, previous]
    return [current]
