"""The public marketplace listing (``GET /api/public/marketplace``): listed agents
with an active public chat, their public profile fields and the chat's slug,
for anyone. Nothing of an organization but what its profile publishes."""

from __future__ import annotations

from datetime import datetime

from agentsvc_core.entities.published_chat import ListedChat
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports.publishing import PublishingStore
from agentsvc_core.rules import check_text

__all__ = ["PublicListing"]

MAX_QUERY = 200


class PublicListing:
    def __init__(self, store: PublishingStore) -> None:
        self._store = store

    async def page(
        self, *, q: str | None, category: str | None, before: datetime | None, limit: int
    ) -> tuple[list[ListedChat], bool]:
        """A page of the listing, newest chat first, and whether more follow."""
        if not 1 <= limit <= 100:
            raise InvalidInput("limit", "must be between 1 and 100")
        query = check_text("q", q, max_len=MAX_QUERY).strip() if q is not None else None
        wanted = check_text("category", category, max_len=40).strip() if category else None
        rows = await self._store.listed(
            q=query or None, category=wanted or None, before=before, limit=limit + 1
        )
        return rows[:limit], len(rows) > limit
