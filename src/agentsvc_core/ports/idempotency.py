"""Idempotency keys (``Idempotency-Key``): a retried POST is answered, not redone.

A key is scoped to the organization and kept 24 hours. It remembers the request's
``fingerprint`` (a hash of its method, path and body) and what answered it: for a
send, the reply it started (``run_id``: a retry re-attaches to that reply); for any
other POST, its response once complete (``status``, ``content_type`` and ``body``,
sealed: a response may carry a secret, such as a new API key).
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol
from uuid import UUID

import msgspec


class IdempotencyClaim(msgspec.Struct, frozen=True):
    """A request's key and fingerprint, claimed at ``at`` until ``expires_at``."""

    key: str
    fingerprint: bytes
    at: datetime
    expires_at: datetime


class IdempotencyRecord(msgspec.Struct, frozen=True):
    fingerprint: bytes
    run_id: UUID | None = None
    status: int | None = None  # None: the request is still being answered
    content_type: str | None = None
    body: str | None = None  # sealed (``SecretBox``)


class IdempotencyStore(Protocol):
    async def claim(self, org_id: str, claim: IdempotencyClaim) -> IdempotencyRecord | None:
        """Take the key for a request (not a send: ``begin_turn`` claims those with
        the run). None when taken now (absent, or expired before ``claim.at``);
        otherwise the unexpired record that holds it. Two claims racing: one wins."""
        ...

    async def find(self, org_id: str, key: str, now: datetime) -> IdempotencyRecord | None:
        """The key's record, unless absent or expired before ``now``."""
        ...

    async def complete(
        self, org_id: str, key: str, status: int, content_type: str, body: str
    ) -> None:
        """Record the response of the request that claimed the key."""
        ...

    async def release(self, org_id: str, key: str) -> None:
        """Forget a claim whose request failed: a retry runs it again."""
        ...

    async def purge_keys(self, now: datetime) -> int:
        """Drop the keys expired before ``now``; returns how many."""
        ...
