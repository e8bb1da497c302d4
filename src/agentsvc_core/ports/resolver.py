"""The bring-your-own-key resolver: a customer webhook that may supply a user's key."""

from __future__ import annotations

from typing import Protocol

import msgspec


class ResolverRequest(msgspec.Struct, frozen=True, rename="camel"):
    user_id: str
    org_id: str
    provider: str
    model: str


class CredentialResolver(Protocol):
    async def resolve(
        self, url: str, request: ResolverRequest, secrets: list[str], timeout_ms: int
    ) -> str | None:
        """POST ``request`` to ``url`` signed with every secret in ``secrets``
        (newest first); the ``apiKey`` of a 200 answer, or None. Never raises:
        a refused URL, a timeout, a redirect, a non-200, an oversized or malformed
        body all answer None (the platform key is used). Never logs the key."""
        ...
