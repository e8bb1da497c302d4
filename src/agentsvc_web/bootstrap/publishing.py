"""Published chats: the owner's resource, the visitors' principal over the
conversation, and the public marketplace listing (docs/publishing.md)."""

from __future__ import annotations

from agentsvc_core.ports import Clock, SecretBox, Storage
from agentsvc_core.use_cases import Threads
from agentsvc_core.use_cases.org_settings import OrgSettings
from agentsvc_core.use_cases.publishing import PublicChats, Publishing
from agentsvc_core.use_cases.publishing.listing import PublicListing
from agentsvc_core.use_cases.turn.conversation import Conversation

__all__ = ["publishing"]


def publishing(
    storage: Storage,
    threads: Threads,
    conversation: Conversation,
    org_settings: OrgSettings,
    box: SecretBox,
    clock: Clock,
) -> tuple[Publishing, PublicChats, PublicListing]:
    store = storage.publishing
    return (
        Publishing(store, storage.agents, box, clock),
        PublicChats(store, threads, conversation, org_settings, box, clock),
        PublicListing(store),
    )
