from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import (
    Agent,
    Message,
    Participant,
    ParticipantRole,
    Principal,
    Thread,
    ThreadKind,
)
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.partial import given_fields
from agentsvc_core.ports import AgentRepository, Clock, ConversationStore, ThreadRepository
from agentsvc_core.ports.storage import SEARCH_WORD
from agentsvc_core.rules import (
    MAX_OFFSET,
    MAX_PREAMBLE,
    MAX_PROFILE_NAME,
    MAX_TITLE,
    MAX_USER_ID,
    check_bindings,
    check_metadata,
    check_text,
)
from agentsvc_core.use_cases.multiplayer.config import MultiplayerSettings


class ThreadDraft(msgspec.Struct, frozen=True, kw_only=True):
    agent_id: UUID
    title: str | None = None
    kind: ThreadKind = "single"
    resource_bindings: list[dict[str, Any]] = []
    active_profile: str | None = None
    system_prompt_overlay: str | None = None
    metadata: dict[str, str] = {}


class ThreadChanges(msgspec.Struct, frozen=True, kw_only=True):
    """``UNSET`` leaves a field alone; ``None`` clears it (metadata: to ``{}``)."""

    title: str | UnsetType | None = UNSET
    active_profile: str | UnsetType | None = UNSET
    system_prompt_overlay: str | UnsetType | None = UNSET
    metadata: dict[str, str] | UnsetType | None = UNSET


class ThreadPage(msgspec.Struct, frozen=True, kw_only=True):
    threads: list[Thread]
    next_cursor: datetime | None


def _check_profile(agent: Agent, profile: str | None, field: str) -> None:
    if profile is None:
        return
    check_text(field, profile, max_len=MAX_PROFILE_NAME, required=True)
    if not agent.tool_profiles or profile not in agent.tool_profiles:
        raise InvalidInput(field, f"the agent has no tool profile named {profile!r}")


def _check_thread(t: Thread) -> Thread:
    if t.title is not None:
        check_text("title", t.title, max_len=MAX_TITLE)
    if t.system_prompt_overlay is not None:
        check_text("system_prompt_overlay", t.system_prompt_overlay, max_len=MAX_PREAMBLE)
    check_metadata("metadata", t.metadata)
    check_bindings("resource_bindings", t.resource_bindings)
    return t


MAX_QUERY = 200
MAX_QUERY_WORDS = 16


def search_words(q: str) -> tuple[str, ...]:
    """The words of a thread search, lowercased, each once: every one must start a
    word of the thread's title or of one of its messages. None (a ``q`` of spaces or
    punctuation): every thread is listed."""
    check_text("q", q, max_len=MAX_QUERY)
    found = tuple(dict.fromkeys(w.lower() for w in SEARCH_WORD.findall(q)))
    if len(found) > MAX_QUERY_WORDS:
        raise InvalidInput("q", f"at most {MAX_QUERY_WORDS} words")
    return found


class Threads:
    """Threads of an organization, their participants and their history.

    Access: an API key acts for the whole organization. A JWT user may use the
    single threads it opened, and the multiplayer threads it opened or takes part
    in; any other thread of its organization is ``PermissionDenied`` (403), and a
    thread of another organization ``NotFound``.
    """

    def __init__(
        self,
        threads: ThreadRepository,
        agents: AgentRepository,
        conversations: ConversationStore,
        clock: Clock,
        multiplayer: MultiplayerSettings | None = None,
    ) -> None:
        """``multiplayer``: the agents' multiplayer configurations (who may open a
        multiplayer thread, how many people it may have); None: no limits."""
        self._multiplayer = multiplayer
        self._threads = threads
        self._agents = agents
        self._conversations = conversations
        self._clock = clock

    # --- access ---------------------------------------------------------------

    async def visible(self, who: Principal, thread_id: UUID) -> Thread:
        """The thread, if ``who`` may use it."""
        return await self.check_visible(who, await self._threads.get(who.org_id, thread_id))

    async def check_visible(self, who: Principal, thread: Thread) -> Thread:
        """``thread`` (already read), if ``who`` may use it."""
        if who.acts_for_org or thread.created_by == who.user_id:
            return thread
        if (
            thread.kind == "multiplayer"
            and who.user_id is not None
            and await self._threads.participant(who.org_id, thread.id, who.user_id) is not None
        ):
            return thread
        raise PermissionDenied("this thread belongs to another user")

    # --- threads --------------------------------------------------------------

    async def create(self, who: Principal, draft: ThreadDraft) -> Thread:
        agent = await self._agents.get(who.org_id, draft.agent_id)
        _check_profile(agent, draft.active_profile, "active_profile")
        if draft.kind == "multiplayer" and self._multiplayer is not None:
            config = await self._multiplayer.of(who.org_id, agent.id)
            if not config.enabled:
                raise Conflict(
                    "multiplayer threads are disabled for this agent"
                    " (PUT /api/agents/{id}/multiplayer with enabled: true)",
                    code="MULTIPLAYER_DISABLED",
                )
        now = self._clock.now()
        thread = _check_thread(
            Thread(
                id=uuid.uuid4(),
                org_id=who.org_id,
                agent_id=agent.id,
                title=draft.title,
                kind=draft.kind,
                status="active",
                active_profile=draft.active_profile,
                system_prompt_overlay=draft.system_prompt_overlay,
                metadata=dict(draft.metadata),
                resource_bindings=list(draft.resource_bindings),
                created_by=who.user_id,
                created_at=now,
                updated_at=now,
            )
        )
        thread = await self._threads.add(thread)
        if thread.kind == "multiplayer" and who.user_id is not None:
            await self._threads.put_participant(
                Participant(
                    org_id=who.org_id,
                    thread_id=thread.id,
                    user_id=who.user_id,
                    display_name=None,
                    role="owner",
                    added_at=now,
                )
            )
        return thread

    async def update(self, who: Principal, thread_id: UUID, changes: ThreadChanges) -> Thread:
        thread = await self.visible(who, thread_id)
        fields = given_fields(changes)
        if "metadata" in fields and fields["metadata"] is None:
            fields["metadata"] = {}
        if not fields:
            return thread
        if fields.get("active_profile") is not None:
            agent = await self._agents.get(who.org_id, thread.agent_id)
            _check_profile(agent, fields["active_profile"], "active_profile")
        now = self._clock.now()
        return await self._threads.modify(
            who.org_id,
            thread_id,
            lambda t: _check_thread(msgspec.structs.replace(t, updated_at=now, **fields)),
        )

    async def list_for_agent(
        self,
        who: Principal,
        agent_id: UUID,
        *,
        cursor: datetime | None,
        limit: int,
        q: str | None = None,
    ) -> ThreadPage:
        """The agent's threads ``who`` may use, newest first; with ``q``, those whose
        title or one of whose messages holds its words (``search_words``)."""
        rows = await self._threads.list_for_agent(
            who.org_id,
            agent_id,
            before=cursor,
            limit=limit + 1,
            visible_to=None if who.acts_for_org else who.user_id,
            words=() if q is None else search_words(q),
        )
        more = len(rows) > limit
        page = rows[:limit]
        return ThreadPage(threads=page, next_cursor=page[-1].created_at if more else None)

    async def history(
        self, who: Principal, thread_id: UUID, *, offset: int, limit: int
    ) -> tuple[list[Message], int]:
        if not 0 <= offset <= MAX_OFFSET:
            raise InvalidInput("offset", f"must be between 0 and {MAX_OFFSET}")
        await self.visible(who, thread_id)
        return await self._conversations.history(who.org_id, thread_id, offset=offset, limit=limit)

    # --- participants ---------------------------------------------------------

    async def _multiplayer_thread(self, who: Principal, thread_id: UUID, *, manage: bool) -> Thread:
        thread = await self.visible(who, thread_id)
        if thread.kind != "multiplayer":
            raise InvalidInput("kind", "participants belong to multiplayer threads")
        if manage and not who.acts_for_org and thread.created_by != who.user_id:
            assert who.user_id is not None
            me = await self._threads.participant(who.org_id, thread_id, who.user_id)
            if me is None or me.role != "owner":
                raise PermissionDenied("only the thread's owners manage its participants")
        return thread

    async def participant(self, org_id: str, thread_id: UUID, user_id: str) -> Participant | None:
        return await self._threads.participant(org_id, thread_id, user_id)

    async def participants(self, who: Principal, thread_id: UUID) -> list[Participant]:
        await self._multiplayer_thread(who, thread_id, manage=False)
        return await self._threads.participants(who.org_id, thread_id)

    async def add_participant(
        self,
        who: Principal,
        thread_id: UUID,
        user_id: str,
        display_name: str | None,
        role: ParticipantRole,
    ) -> Participant:
        thread = await self._multiplayer_thread(who, thread_id, manage=True)
        check_text("user_id", user_id, max_len=MAX_USER_ID, required=True)
        if display_name is not None:
            check_text("display_name", display_name, max_len=MAX_TITLE)
        await self._check_room(who, thread, user_id)
        return await self._threads.put_participant(
            Participant(
                org_id=who.org_id,
                thread_id=thread_id,
                user_id=user_id,
                display_name=display_name,
                role=role,
                added_at=self._clock.now(),
            )
        )

    async def _check_room(self, who: Principal, thread: Thread, user_id: str) -> None:
        """A new participant fits within the agent's ``max_participants`` (a change
        of one already there always does). Two adds at the same moment may both
        pass this check and leave the thread one over."""
        if self._multiplayer is None:
            return
        config = await self._multiplayer.of(who.org_id, thread.agent_id)
        present = await self._threads.participants(who.org_id, thread.id)
        if user_id in {p.user_id for p in present}:
            return
        if len(present) >= config.max_participants:
            raise Conflict(
                f"the thread has its {config.max_participants} participants, the most the"
                " agent's multiplayer configuration allows (max_participants)",
                code="TOO_MANY_PARTICIPANTS",
            )

    async def remove_participant(self, who: Principal, thread_id: UUID, user_id: str) -> None:
        await self._multiplayer_thread(who, thread_id, manage=True)
        if not await self._threads.remove_participant(who.org_id, thread_id, user_id):
            raise NotFound("no such participant")
