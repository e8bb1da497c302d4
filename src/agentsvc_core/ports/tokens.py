from __future__ import annotations

from typing import Protocol

import msgspec

from agentsvc_core.entities import OrgRole


class VerifiedToken(msgspec.Struct, frozen=True, kw_only=True):
    subject: str
    org_id: str
    role: OrgRole = "member"


class TokenVerifier(Protocol):
    """Checks a bearer token that is not an API key (a JWT)."""

    async def verify(self, token: str) -> VerifiedToken:
        """Return the token's subject, organization and role (``admin`` only when
        the configured role claim names the admin role, else ``member``).

        Raises ``Unauthenticated`` for a bad signature, a disallowed algorithm, an
        expired or not-yet-valid token, a wrong issuer or audience, or a missing
        ``exp``, ``sub`` or organization claim. Never echoes the token.
        """
        ...
