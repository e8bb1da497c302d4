"""An agent's multiplayer configuration (``GET/PUT /api/agents/{id}/multiplayer``), a
sealed record of kind ``multiplayer`` like the other agent configurations: whether
its multiplayer threads may be opened, when it answers a message posted to one,
the name it is mentioned by and how many people a thread may have.

``calls_agent`` is the rule a send applies (pure): ``all`` answers every message,
``owners`` only the messages of the thread's owners, ``mentions`` only those that
name the agent as ``@name`` (its display name or its name, any case, as a whole
word)."""

from __future__ import annotations

import re
from typing import Any, Literal
from uuid import UUID

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import AgentRepository, SecretBox, SecretStore
from agentsvc_core.rules import check_text
from agentsvc_core.use_cases.agent_settings import AgentSettings

__all__ = [
    "KIND",
    "MAX_DISPLAY_NAME",
    "MAX_PARTICIPANTS",
    "MIN_PARTICIPANTS",
    "MultiplayerConfig",
    "MultiplayerSettings",
    "RespondTo",
    "calls_agent",
    "mentioned",
]

KIND = "multiplayer"
MIN_PARTICIPANTS, MAX_PARTICIPANTS = 2, 100
MAX_DISPLAY_NAME = 100

RespondTo = Literal["all", "mentions", "owners"]


class MultiplayerConfig(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: UUID
    org_id: str
    # multiplayer threads of the agent may be opened (on by default: they always could)
    enabled: bool = True
    respond_to: RespondTo = "all"  # which posted messages call the agent
    display_name: str | None = None  # its name in the thread (mentions), besides its own
    max_participants: int = 20  # people in one thread, owners included


class MultiplayerSettings(AgentSettings[MultiplayerConfig]):
    def __init__(self, store: SecretStore, agents: AgentRepository, box: SecretBox) -> None:
        super().__init__(store, agents, box, KIND, MultiplayerConfig)

    async def update(
        self, who: Principal, agent_id: UUID, changes: dict[str, Any]
    ) -> MultiplayerConfig:
        """Only the supplied fields change (a concurrent PUT of others is not lost);
        bounds are checked on the result."""

        def apply(current: MultiplayerConfig) -> MultiplayerConfig:
            updated = msgspec.structs.replace(current, **changes)
            if updated.respond_to not in ("all", "mentions", "owners"):
                raise InvalidInput("respond_to", "must be all, mentions or owners")
            if updated.display_name is not None:
                check_text(
                    "display_name", updated.display_name, max_len=MAX_DISPLAY_NAME, required=True
                )
            if not MIN_PARTICIPANTS <= updated.max_participants <= MAX_PARTICIPANTS:
                raise InvalidInput(
                    "max_participants",
                    f"must be between {MIN_PARTICIPANTS} and {MAX_PARTICIPANTS}",
                )
            return updated

        return await self._change(who, agent_id, apply)


def mentioned(content: str, names: list[str]) -> bool:
    """Whether ``content`` names one of ``names`` as ``@name``: any case, as a whole
    word (for Ada: ``@Ada,`` and ``(@ada)`` do; ``@adam`` and ``bob@ada`` do not)."""
    for name in names:
        if name.strip() and re.search(
            rf"(?<![\w@])@{re.escape(name.strip())}(?!\w)",
            content,
            re.IGNORECASE,
        ):
            return True
    return False


def calls_agent(
    config: MultiplayerConfig, agent_name: str, sender_role: str | None, content: str
) -> bool:
    """Whether a message posted to a multiplayer thread calls the agent (pure):
    ``sender_role`` is the sender's role among the thread's participants."""
    if config.respond_to == "owners":
        return sender_role == "owner"
    if config.respond_to == "mentions":
        names = [agent_name] if config.display_name is None else [config.display_name, agent_name]
        return mentioned(content, names)
    return True
