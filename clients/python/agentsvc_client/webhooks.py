"""Verify the service's signed calls (the credential resolver, webhook tools).

The signature: ``X-Service-Signature`` is the lowercase hex HMAC-SHA256, keyed with
the UTF-8 bytes of the organization's signing secret
(``client.settings.get().signing_secret``), over
``"{X-Service-Timestamp}.{X-Service-Nonce}.{raw body}"``. During a rotation the
service sends two signatures, space-separated; one matching is enough. Each attempt
has a fresh nonce (a UUID) and timestamp (Unix seconds).

::

    from agentsvc_client import webhooks

    nonces = webhooks.MemoryNonceCache()   # one per process; share one across processes
    try:
        webhooks.verify(secret, request.headers, raw_body, nonce_cache=nonces)
    except webhooks.WebhookVerificationError as exc:
        return 401, exc.reason

Pass several secrets (yours, old and new) while you rotate yours.
"""

from __future__ import annotations

import hashlib
import heapq
import hmac
import re
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Protocol

from agentsvc_client.errors import AgentsvcError

TIMESTAMP = "x-service-timestamp"
NONCE = "x-service-nonce"
SIGNATURE = "x-service-signature"
DEFAULT_TOLERANCE_S = 300  # five minutes, as the docs' receivers


_HEX = re.compile(r"[0-9a-f]{64}")


class WebhookVerificationError(AgentsvcError):
    """The call is not authentic, or stale, or replayed; ``reason`` says which."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"webhook refused: {reason}")
        self.reason = reason


class NonceCache(Protocol):
    """Remembers nonces while their timestamp is within the tolerance."""

    def add(self, nonce: str, expires_at: float) -> bool:
        """Record ``nonce`` until ``expires_at``; False when it was already there."""
        ...


class MemoryNonceCache:
    """A process-local ``NonceCache`` (thread-safe). Several receiver processes need a
    shared one (Redis ``SET NX EX``, a table with a unique key)."""

    def __init__(self) -> None:
        self._seen: dict[str, float] = {}
        self._expiry: list[tuple[float, str]] = []  # a heap: the soonest to expire first
        self._lock = threading.Lock()

    def add(self, nonce: str, expires_at: float) -> bool:
        now = time.time()
        with self._lock:
            while self._expiry and self._expiry[0][0] < now:  # only the expired ones
                until, old = heapq.heappop(self._expiry)
                if self._seen.get(old) == until:
                    del self._seen[old]
            if nonce in self._seen:
                return False
            self._seen[nonce] = expires_at
            heapq.heappush(self._expiry, (expires_at, nonce))
            return True


def sign(secret: str, timestamp: str, nonce: str, body: bytes) -> str:
    """The signature the service computes (for tests of your receiver)."""
    message = f"{timestamp}.{nonce}.".encode() + body
    return hmac.new(secret.encode("utf-8"), message, hashlib.sha256).hexdigest()


def verify(
    secrets: str | Sequence[str],
    headers: Mapping[str, str],
    body: bytes,
    *,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
    nonce_cache: NonceCache | None = None,
    now: float | None = None,
) -> None:
    """Return when the call is authentic and fresh; raise ``WebhookVerificationError``.

    ``headers``: the request's, any case. ``body``: the raw bytes, before any JSON
    parsing. ``secrets``: one, or several during a rotation of yours. The nonce is
    recorded (and a repeat refused) only for a call whose signature checks out, so
    forged calls cannot fill the cache. Without ``nonce_cache`` replays within the
    tolerance are not detected.
    """
    lower = {k.lower(): v for k, v in headers.items()}
    timestamp = lower.get(TIMESTAMP, "")
    nonce = lower.get(NONCE, "")
    # hex digests only (compare_digest refuses non-ASCII text)
    signatures = [v for v in lower.get(SIGNATURE, "").split() if _HEX.fullmatch(v)]
    now = time.time() if now is None else now
    # ASCII digits only, and few of them: "²" is a digit to str.isdigit, and a long
    # number is an error of int()
    if not (timestamp.isascii() and timestamp.isdigit() and len(timestamp) <= 12):
        raise WebhookVerificationError("missing or malformed timestamp")
    if abs(now - int(timestamp)) > tolerance_s:
        raise WebhookVerificationError("timestamp outside the tolerance")
    if not nonce:
        raise WebhookVerificationError("missing nonce")
    if not signatures:
        raise WebhookVerificationError("missing signature")
    keys = [secrets] if isinstance(secrets, str) else list(secrets)
    expected = [sign(key, timestamp, nonce, body) for key in keys]
    if not any(hmac.compare_digest(e, s) for e in expected for s in signatures):
        raise WebhookVerificationError("no signature matches")
    if nonce_cache is not None and not nonce_cache.add(nonce, int(timestamp) + tolerance_s):
        raise WebhookVerificationError("replayed nonce")


__all__ = ["MemoryNonceCache", "NonceCache", "WebhookVerificationError", "sign", "verify"]
