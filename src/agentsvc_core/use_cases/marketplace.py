"""An agent's marketplace profile (docs/marketplace.md): ``GET/PUT/DELETE
/api/agents/{id}/marketplace``, its avatar, its capabilities, and two suggestions
that store nothing: a description written by the agent's own model, and the
capabilities found in what the agent is given (tools, MCP servers, knowledge,
web, memory, plans, integrations).

A profile is public by purpose (the listing shows it once ``listed``); nothing in
it is sealed. GET answers the defaults while nothing was stored; PUT changes the
fields it is given; DELETE removes the profile and its avatar. Reads are open to
the organization's members; every change is an admin's.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.entities.marketplace import Avatar, MarketplaceProfile
from agentsvc_core.errors import InvalidInput, PermissionDenied
from agentsvc_core.ports import AgentRepository, Clock
from agentsvc_core.ports.images import Images
from agentsvc_core.ports.marketplace import MarketplaceStore
from agentsvc_core.rules import check_text

__all__ = [
    "AVATAR_TYPES",
    "MAX_AVATAR_BYTES",
    "MAX_AVATAR_SIDE",
    "CapabilitySource",
    "Marketplace",
    "avatar_path",
]

HANDLE = re.compile(r"[a-z0-9-]{3,48}")
MAX_DISPLAY_NAME, MAX_TAGLINE, MAX_DESCRIPTION = 80, 160, 4000
MAX_CATEGORIES, MAX_CATEGORY = 5, 40
MAX_CAPABILITIES, MAX_CAPABILITY = 30, 80
AVATAR_TYPES = ("image/png", "image/jpeg", "image/webp")
MAX_AVATAR_BYTES = 1024 * 1024
MAX_AVATAR_SIDE = 1024

# what an agent is given, in words a listing shows: (who, agent) -> capabilities
CapabilitySource = Callable[[Principal, UUID], Awaitable[Sequence[str]]]
# the agent's own model, asked one question: (org, agent, prompt) -> its answer
Ask = Callable[[str, UUID, str], Awaitable[str]]

DESCRIBE = (
    "Write the description of an AI agent for a public marketplace listing: two or"
    " three short paragraphs, plain text, saying what it helps with and how, for the"
    " person deciding whether to use it. Do not invent abilities it does not have."
    " Answer with the description only.\n\nName: {name}\nWhat its owner says of it:"
    " {description}\nIts capabilities: {capabilities}\nIts instructions:\n{preamble}"
)
MAX_PROMPT_PREAMBLE = 4000


def avatar_path(profile: MarketplaceProfile) -> str | None:
    """Where the service serves the profile's avatar (its digest names the
    version, so the URL can be cached for good), or None without one."""
    if profile.avatar is None:
        return None
    return f"/api/public/avatars/{profile.agent_id}/{profile.avatar.sha256}"


def _strings(field: str, values: Sequence[str], most: int, longest: int) -> tuple[str, ...]:
    if len(values) > most:
        raise InvalidInput(field, f"at most {most}")
    seen: list[str] = []
    for value in values:
        text = check_text(field, value, max_len=longest, required=True).strip()
        if text not in seen:  # once each, in the order given
            seen.append(text)
    return tuple(seen)


def checked(fields: dict[str, Any]) -> dict[str, Any]:
    """The given fields of a PUT, each within its bounds."""
    out = dict(fields)
    if "handle" in out and out["handle"] is not None:
        handle = out["handle"]
        if not HANDLE.fullmatch(handle):
            raise InvalidInput("handle", "3 to 48 of a-z, 0-9 and -")
    for field, most in (
        ("display_name", MAX_DISPLAY_NAME),
        ("tagline", MAX_TAGLINE),
        ("description", MAX_DESCRIPTION),
    ):
        if field in out:
            out[field] = check_text(field, out[field], max_len=most)
    if "categories" in out:
        out["categories"] = _strings("categories", out["categories"], MAX_CATEGORIES, MAX_CATEGORY)
    if "capabilities" in out:
        out["capabilities"] = _strings(
            "capabilities", out["capabilities"], MAX_CAPABILITIES, MAX_CAPABILITY
        )
    return out


class Marketplace:
    def __init__(
        self,
        store: MarketplaceStore,
        agents: AgentRepository,
        images: Images,
        clock: Clock,
        *,
        ask: Ask,
        sources: Sequence[CapabilitySource] = (),
    ) -> None:
        self._store = store
        self._agents = agents
        self._images = images
        self._clock = clock
        self._ask = ask
        self._sources = sources

    @staticmethod
    def _admin(who: Principal) -> None:
        if not who.is_admin:
            raise PermissionDenied("marketplace profiles are managed by the organization's admins")

    async def _current(self, who: Principal, agent_id: UUID) -> MarketplaceProfile:
        await self._agents.get(who.org_id, agent_id)  # NotFound
        stored = await self._store.get(who.org_id, agent_id)
        return stored or MarketplaceProfile(agent_id=agent_id, org_id=who.org_id)

    async def get(self, who: Principal, agent_id: UUID) -> MarketplaceProfile:
        return await self._current(who, agent_id)

    async def update(
        self, who: Principal, agent_id: UUID, fields: dict[str, Any]
    ) -> MarketplaceProfile:
        """Change the given fields (``handle`` None frees the handle); 409
        ``HANDLE_TAKEN`` when another agent has the handle."""
        self._admin(who)
        given = checked(fields)
        current = await self._current(who, agent_id)
        profile = msgspec.structs.replace(current, updated_at=self._clock.now(), **given)
        return await self._store.put(profile)

    async def set_capabilities(
        self, who: Principal, agent_id: UUID, capabilities: Sequence[str]
    ) -> MarketplaceProfile:
        return await self.update(who, agent_id, {"capabilities": list(capabilities)})

    async def delete(self, who: Principal, agent_id: UUID) -> bool:
        """Remove the profile and its avatar; False when there was none."""
        self._admin(who)
        await self._agents.get(who.org_id, agent_id)
        return await self._store.delete(who.org_id, agent_id)

    async def set_avatar(self, who: Principal, agent_id: UUID, data: bytes) -> MarketplaceProfile:
        """A PNG, JPEG or WebP picture of at most 1 MB and 1024x1024, checked by its
        content and stored re-encoded (its metadata dropped)."""
        self._admin(who)
        current = await self._current(who, agent_id)
        content_type, clean = await self._images.reencode(
            data, types=AVATAR_TYPES, max_bytes=MAX_AVATAR_BYTES, max_side=MAX_AVATAR_SIDE
        )
        avatar = Avatar(content_type=content_type, sha256=hashlib.sha256(clean).hexdigest())
        profile = msgspec.structs.replace(current, avatar=avatar, updated_at=self._clock.now())
        await self._store.put_avatar(profile, clean)
        return profile

    async def delete_avatar(self, who: Principal, agent_id: UUID) -> MarketplaceProfile:
        self._admin(who)
        await self._current(who, agent_id)  # NotFound
        await self._store.clear_avatar(who.org_id, agent_id, self._clock.now())
        return await self._current(who, agent_id)

    async def public_avatar(self, agent_id: UUID, sha256: str) -> tuple[str, bytes] | None:
        """For anyone: the avatar at that version, or None."""
        return await self._store.public_avatar(agent_id, sha256)

    async def detect_capabilities(self, who: Principal, agent_id: UUID) -> list[str]:
        """What the agent is given, as capabilities a listing shows (nothing stored)."""
        await self._agents.get(who.org_id, agent_id)
        found: list[str] = []
        for source in self._sources:
            for capability in await source(who, agent_id):
                if capability not in found:
                    found.append(capability)
        return found[:MAX_CAPABILITIES]

    async def generate_description(self, who: Principal, agent_id: UUID) -> str:
        """A description written by the agent's own model (nothing stored); the
        call is a turn of the agent, with its usage and trace."""
        self._admin(who)
        agent = await self._agents.get(who.org_id, agent_id)
        capabilities = await self.detect_capabilities(who, agent_id)
        prompt = DESCRIBE.format(
            name=agent.name,
            description=agent.description or "(none)",
            capabilities=", ".join(capabilities) or "(none found)",
            preamble=agent.stable_preamble[:MAX_PROMPT_PREAMBLE] or "(none)",
        )
        answer = await self._ask(who.org_id, agent_id, prompt)
        return answer.strip()[:MAX_DESCRIPTION]
