"""``Idempotency-Key`` on POSTs: a retry within 24 hours with the same key and the
same request is answered as the first was and changes nothing; the same key with
another request is refused (``IdempotencyKeyReused``, 422). Keys are scoped to the
organization (ports/idempotency.py).

A send (use_cases/turn/conversation.py) claims its key with its run, in the write that
stores the run: a retry re-attaches to that reply, live or replayed. Any other POST
goes through ``Idempotency`` (the web layer's middleware): ``claim`` before the
handler runs, then ``complete`` with its response (kept sealed) or ``release`` when
it failed, so that a retry runs it again.
"""

from __future__ import annotations

from datetime import timedelta

import msgspec

from agentsvc_core.errors import IdempotencyKeyInUse, IdempotencyKeyReused, InvalidInput
from agentsvc_core.ports import Clock, SecretBox
from agentsvc_core.ports.idempotency import IdempotencyClaim, IdempotencyStore

__all__ = ["KEEP", "MAX_KEY", "Idempotency", "Replay", "RequestKey", "check_key"]

KEEP = timedelta(hours=24)
MAX_KEY = 255


class RequestKey(msgspec.Struct, frozen=True):
    """A request's ``Idempotency-Key`` and its fingerprint (a hash of its method,
    path and body: the web layer computes it)."""

    key: str
    fingerprint: bytes

    def claim(self, clock: Clock) -> IdempotencyClaim:
        now = clock.now()
        return IdempotencyClaim(
            key=self.key, fingerprint=self.fingerprint, at=now, expires_at=now + KEEP
        )


class Replay(msgspec.Struct, frozen=True):
    """The response a request with this key was answered with."""

    status: int
    content_type: str
    body: bytes


def check_key(raw: str) -> str:
    """1 to 255 visible ASCII characters (as Stripe's and the IETF draft's keys)."""
    if not 0 < len(raw) <= MAX_KEY or not all("!" <= ch <= "~" for ch in raw):
        raise InvalidInput(
            "Idempotency-Key", f"must be 1 to {MAX_KEY} visible ASCII characters (a UUID will do)"
        )
    return raw


class Idempotency:
    def __init__(self, store: IdempotencyStore, box: SecretBox, clock: Clock) -> None:
        self._store = store
        self._box = box
        self._clock = clock

    async def claim(self, org_id: str, key: RequestKey) -> Replay | None:
        """None: the key is this request's now (run it, then ``complete`` or
        ``release``). A ``Replay`` when it answered the same request before. Raises
        ``IdempotencyKeyReused`` (another request) or ``IdempotencyKeyInUse`` (the
        same request, still running)."""
        held = await self._store.claim(org_id, key.claim(self._clock))
        if held is None:
            return None
        if held.fingerprint != key.fingerprint:
            raise IdempotencyKeyReused()
        if held.status is None or held.body is None or held.content_type is None:
            raise IdempotencyKeyInUse()
        body = self._box.open(held.body, _context(org_id, key.key))
        return Replay(status=held.status, content_type=held.content_type, body=body)

    async def complete(
        self, org_id: str, key: RequestKey, status: int, content_type: str, body: bytes
    ) -> None:
        sealed = self._box.seal(body, _context(org_id, key.key))
        await self._store.complete(org_id, key.key, status, content_type, sealed)

    async def release(self, org_id: str, key: RequestKey) -> None:
        await self._store.release(org_id, key.key)


def _context(org_id: str, key: str) -> str:
    """Binds a sealed response to its organization and key: a row copied to another
    key does not open."""
    return f"idempotency:{org_id}:{key}"
