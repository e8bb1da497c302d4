"""A published chat: an agent anyone may talk to, from the sites its owner allows,
and the threads its visitors open (docs/publishing.md).

One chat per agent. Its ``slug`` names it in public URLs (``/c/{slug}``,
``/api/public/chat/{slug}``) and is unique across the service. The identity
secret (a private chat's visitors are signed by the customer's server with it) is
kept sealed here (``identity_sealed``), never in an answer but the one that makes
it; a rotation keeps the previous one (``previous_sealed``) for an hour after
``rotated_at``."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

import msgspec

Visibility = Literal["public", "unlisted", "private"]
VISIBILITIES: tuple[Visibility, ...] = ("public", "unlisted", "private")


class PublishedChat(msgspec.Struct, frozen=True, kw_only=True):
    org_id: str
    agent_id: UUID
    slug: str
    visibility: Visibility
    title: str
    description: str
    welcome_message: str
    starter_prompts: tuple[str, ...]
    is_active: bool
    # None: the organization's allowed embed domains, read when a request comes
    allowed_domains: tuple[str, ...] | None
    rate_limit_per_min: int
    daily_cost_cap_usd: float | None  # None: no cap
    allow_user_grants: bool  # a signed visitor's id is the user of the turn's grants
    identity_sealed: str
    previous_sealed: str | None
    rotated_at: datetime | None
    created_at: datetime
    updated_at: datetime


class VisitorThread(msgspec.Struct, frozen=True, kw_only=True):
    """A thread a visitor opened through an agent's published chat: the visitor
    owns it, and nothing else."""

    org_id: str
    thread_id: UUID
    agent_id: UUID
    visitor_id: str
    identified: bool  # the customer's server signed the visitor's id
    created_at: datetime


class ListedChat(msgspec.Struct, frozen=True, kw_only=True):
    """A row of the public marketplace listing: a listed agent's public profile
    with its active public chat's slug."""

    agent_id: UUID
    slug: str
    handle: str | None
    display_name: str
    tagline: str
    description: str
    categories: tuple[str, ...]
    capabilities: tuple[str, ...]
    avatar_sha256: str | None
    published_at: datetime  # the chat's created_at: the listing's order
