from __future__ import annotations

from typing import Literal
from uuid import UUID

import msgspec

AuthMethod = Literal["api_key", "jwt"]
OrgRole = Literal["admin", "member"]


class Principal(msgspec.Struct, frozen=True, kw_only=True):
    """Who is calling: every request resolves to one of these.

    Two separate questions (docs/security.md):

    - ``is_admin``: may the caller change the organization's configuration (agents
      and their sub-resources, MCP servers, keys, settings)? API keys always may; a
      JWT only when its role claim gave it ``role="admin"``; else it is a member.
    - ``acts_for_org``: does the caller see every thread of the organization? Only
      API keys do; a JWT user, admin or not, sees and uses its own threads (and
      the multiplayer threads it takes part in).
    """

    org_id: str
    method: AuthMethod
    role: OrgRole = "member"  # a JWT's; an API key is an admin whatever this says
    user_id: str | None = None
    key_id: UUID | None = None
    # a published chat's visitor, on whose behalf the organization acts (below)
    visitor_id: str | None = None

    @classmethod
    def organization(cls, org_id: str) -> Principal:
        """The organization itself, as an API key acts, with no user: who the
        service's own work (a runner's run, a suggestion) acts as."""
        return cls(org_id=org_id, method="api_key", role="admin")

    @classmethod
    def for_visitor(cls, org_id: str, visitor_id: str) -> Principal:
        """The organization acting for a published chat's visitor, once the public
        routes checked that the visitor owns what it names (docs/publishing.md):
        no user, and no OAuth grant of the organization's either (an MCP server
        that needs one is not offered, and no authorization is started for it)."""
        return cls(org_id=org_id, method="api_key", role="admin", visitor_id=visitor_id)

    @property
    def is_admin(self) -> bool:
        return self.method == "api_key" or self.role == "admin"

    @property
    def acts_for_org(self) -> bool:
        """API keys act for the whole organization; JWT users act for themselves."""
        return self.method == "api_key"
