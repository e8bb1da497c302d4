"""The bring-your-own-key resolver: a customer webhook that may supply a user's key."""

from __future__ import annotations

from typing import Literal, Protocol

import msgspec

__all__ = ["CredentialResolver", "Resolution", "ResolverOutcome", "ResolverRequest"]

ResolverOutcome = Literal[
    "key", "platform", "refused", "timeout", "unreachable", "status", "too_large", "malformed"
]
"""Why a resolver call answered what it did (the ``resolve_credentials`` span's
``agentsvc.resolver.outcome``): ``key`` the user's key; ``platform`` a 200 answer
without an ``apiKey`` (null, empty or absent); every other value is a failure
that also means the platform key: ``refused`` by the outbound guard (the URL or
the address its name resolves to), ``timeout`` (no whole answer within the
agent's ``timeoutMs``), ``unreachable`` (no connection, or the exchange broke
off), ``status`` (an answer other than 200, redirects included), ``too_large``
(a body over 64 KiB), ``malformed`` (a body that is not the expected JSON)."""


class ResolverRequest(msgspec.Struct, frozen=True, rename="camel"):
    user_id: str
    org_id: str
    provider: str
    model: str


class Resolution(msgspec.Struct, frozen=True):
    """A resolver call's answer: the key (None: use the platform key) and why, so a
    trace can tell a customer's "use the platform key" from a resolver that failed
    or was slow."""

    key: str | None
    outcome: ResolverOutcome
    status_code: int | None = None  # the resolver's HTTP status when outcome is "status"

    def __repr__(self) -> str:  # never the key: a Resolution may end up in a log line
        key = "..." if self.key else None
        return f"Resolution(key={key}, outcome={self.outcome!r}, status_code={self.status_code})"


class CredentialResolver(Protocol):
    async def resolve(
        self, url: str, request: ResolverRequest, secrets: list[str], timeout_ms: int
    ) -> Resolution:
        """POST ``request`` to ``url`` signed with every secret in ``secrets``
        (newest first); the ``apiKey`` of a 200 answer (outcome ``key``), or no key
        and why (``ResolverOutcome``). Never raises: a refused URL, a timeout, a
        redirect, a non-200, an oversized or malformed body all answer no key (the
        platform key is used), each with its outcome. Never logs the key."""
        ...
