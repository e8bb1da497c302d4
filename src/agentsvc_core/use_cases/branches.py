"""A thread's history as a tree (docs/threads.md, "Edit, regenerate, branch, fork").

A thread starts as one line: its messages in the order they were stored, each with
no ``parent_id`` ("the message stored before it"), and the thread has no
``head_id``. An edit of a user message, or a regenerate of a reply, starts a new
branch: the new message names its parent (the edited message's parent, or the user
message answered again), the thread's ``head_id`` names the current branch's last
message, and from then on every message stored in the thread names its parent.
Nothing is ever removed: the old branch stays, reachable by its leaf.

The functions here are pure, over the thread's messages in the order stored (all
branches): ``branch_of`` is what the model is sent and what the history endpoint
shows, ``shown`` adds each visible message's parent and siblings as the history
endpoint shows them. A thread that never branched costs nothing more: its branch
is its messages, as stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import NamedTuple
from uuid import UUID

import msgspec

from agentsvc_core.entities import Message, Principal, Thread, ToolCall
from agentsvc_core.entities.message import visible_in_history
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, ThreadBusy
from agentsvc_core.ports import Clock, ConversationStore, ThreadRepository
from agentsvc_core.rules import MAX_OFFSET, MAX_TITLE
from agentsvc_core.use_cases.threads import ThreadDraft, Threads

__all__ = [
    "Branches",
    "Shown",
    "Start",
    "branch_of",
    "chained",
    "has_branched",
    "latest_leaf",
    "parents",
    "pending_on",
    "settled",
    "shown",
    "start_of",
]


def parents(messages: Sequence[Message]) -> dict[UUID, UUID | None]:
    """Each message's parent: its own ``parent_id``, or the message stored just
    before it (None for the first); a ``parent_id`` naming the thread itself marks
    a first message stored after others (an edit of the first message: ``chained``)."""
    found: dict[UUID, UUID | None] = {}
    before: UUID | None = None
    for m in messages:
        if m.parent_id is None:
            found[m.id] = before
        else:
            found[m.id] = None if m.parent_id == m.thread_id else m.parent_id
        before = m.id
    return found


def has_branched(messages: Sequence[Message]) -> bool:
    """Whether the thread has branches: once it has, every message stored names its
    parent (a thread of one line has none that does)."""
    return any(m.parent_id is not None for m in messages)


def branch_of(messages: Sequence[Message], leaf: UUID | None) -> list[Message]:
    """The branch that ends at ``leaf``, first message first (``NotFound`` when no
    message of the thread has that id); all the messages when ``leaf`` is None (a
    thread that never branched)."""
    if leaf is None:
        return list(messages)
    by_id = {m.id: m for m in messages}
    if leaf not in by_id:
        raise NotFound("message not found in this thread")
    up = parents(messages)
    path: list[Message] = []
    at: UUID | None = leaf
    while at is not None:
        path.append(by_id[at])
        at = up[at]
    path.reverse()
    return path


class Start(NamedTuple):
    """Where a send's messages go: after ``branch`` (what the model reads before
    them), the first naming ``parent``, when the thread has branches
    (``branched``); a thread without branches appends to its one line."""

    branch: Sequence[Message]
    parent: UUID | None
    branched: bool


def start_of(
    messages: Sequence[Message],
    head: UUID | None,
    *,
    edit_of: UUID | None = None,
    regenerate: bool = False,
    multiplayer: bool = False,
) -> Start:
    """Where a send goes: a plain send after the current branch (the thread's head,
    or all its messages while it has one line); an edit of the user message
    ``edit_of`` beside it (after the message it followed); a regenerate after the
    current branch's last user message (the reply answers it again). An edit or a
    regenerate of a multiplayer thread is a ``Conflict``: its posts come from many
    people at once, and one line keeps them in the order they came."""
    if edit_of is None and not regenerate:
        if head is None:
            return Start(messages, None, False)
        branch = branch_of(messages, head)
        return Start(branch, branch[-1].id if branch else None, True)
    if multiplayer:
        raise Conflict(
            "a multiplayer thread's history has one line: its messages cannot be edited"
            " or answered again",
            code="THREAD_NOT_BRANCHABLE",
        )
    if regenerate:
        current = branch_of(messages, head)
        last = max((i for i, m in enumerate(current) if m.role == "user"), default=None)
        if last is None:
            raise Conflict("the thread has no user message to answer again", code="NO_MESSAGE")
        return Start(current[: last + 1], current[last].id, True)
    target = next((m for m in messages if m.id == edit_of), None)
    if target is None:
        raise NotFound("message not found in this thread")
    if target.role != "user":
        raise InvalidInput("message_id", "only a user message can be edited")
    parent = parents(messages)[target.id]
    return Start(branch_of(messages, parent) if parent else [], parent, True)


def pending_on(branch: Sequence[Message], pending: tuple[ToolCall, ...]) -> tuple[ToolCall, ...]:
    """The calls the latest reply waits for (the client's, or those waiting for
    approval), when the branch ends with the step that made them, or with the
    results of that step's other calls (a branch switched away from them waits for
    nothing)."""
    if not pending:
        return ()
    end = _last_step_end(branch)
    made = {c.id for c in branch[end - 1].tool_calls} if end else set()
    return tuple(c for c in pending if c.id in made)


def _last_step_end(branch: Sequence[Message]) -> int:
    """Where the branch's last step ends: past its last message that is not a tool
    result (0: the branch holds none)."""
    end = len(branch)
    while end and branch[end - 1].role == "tool":
        end -= 1
    return end


def settled(branch: Sequence[Message]) -> list[Message]:
    """``branch`` without a last step whose calls wait for an answer (an assistant
    message with tool calls, and the results of some of them): what a fork copies,
    so that the new thread does not start with calls nobody will answer."""
    end = _last_step_end(branch)
    if end and branch[end - 1].role == "assistant" and branch[end - 1].tool_calls:
        answered = {m.tool_call_id for m in branch[end:]}
        if any(c.id not in answered for c in branch[end - 1].tool_calls):
            return list(branch[: end - 1])
    return list(branch)


def latest_leaf(messages: Sequence[Message], start: UUID) -> UUID:
    """The leaf reached from ``start`` by following, at each step, its child stored
    last: where a client lands when it switches to ``start``'s branch."""
    up = parents(messages)
    if start not in up:
        raise NotFound("message not found in this thread")
    last_child: dict[UUID, UUID] = {}
    for m in messages:  # in the order stored: the last one written wins
        parent = up[m.id]
        if parent is not None:
            last_child[parent] = m.id
    at = start
    while at in last_child:
        at = last_child[at]
    return at


def chained(new: Sequence[Message], parent: UUID | None) -> list[Message]:
    """``new`` with each message naming the one before it as its parent, the first
    naming ``parent``: how messages are stored once a thread has branches. A first
    message (``parent`` None) names its thread, which ``parents`` reads as "none":
    no parent at all would read as the message stored before it."""
    out: list[Message] = []
    for m in new:
        out.append(msgspec.structs.replace(m, parent_id=m.thread_id if parent is None else parent))
        parent = m.id
    return out


class Shown(msgspec.Struct, frozen=True, kw_only=True):
    """A visible message as the history endpoint shows it: the visible message it
    follows (``parent_id``), and its versions (the visible messages that follow the
    same one, itself included, in the order stored: ``sibling_index`` is 1-based)."""

    message: Message
    parent_id: UUID | None
    sibling_index: int
    sibling_count: int
    prev_sibling_id: UUID | None
    next_sibling_id: UUID | None


def shown(messages: Sequence[Message], branch: Sequence[Message]) -> list[Shown]:
    """The visible messages of ``branch`` (a branch of ``messages``, the thread's
    messages in the order stored), each with its visible parent and siblings."""
    up = parents(messages)
    visible = {m.id for m in messages if visible_in_history(m)}

    def visible_parent(mid: UUID) -> UUID | None:
        at = up[mid]
        while at is not None and at not in visible:
            at = up[at]
        return at

    versions: dict[UUID | None, list[UUID]] = {}
    for m in messages:
        if m.id in visible:
            versions.setdefault(visible_parent(m.id), []).append(m.id)
    out: list[Shown] = []
    for m in branch:
        if m.id not in visible:
            continue
        parent = visible_parent(m.id)
        siblings = versions[parent]
        i = siblings.index(m.id)
        out.append(
            Shown(
                message=m,
                parent_id=parent,
                sibling_index=i + 1,
                sibling_count=len(siblings),
                prev_sibling_id=siblings[i - 1] if i > 0 else None,
                next_sibling_id=siblings[i + 1] if i + 1 < len(siblings) else None,
            )
        )
    return out


class Branches:
    """A thread's branches seen and moved between: its history by branch (with each
    message's parent and versions), the branch made current, and a fork (a new
    thread holding a copy of one branch). Edit and regenerate are sends (the turn:
    ``SendInput.edit_of``, ``SendInput.regenerate``)."""

    def __init__(
        self,
        threads: Threads,
        repo: ThreadRepository,
        store: ConversationStore,
        clock: Clock,
        stale_after_s: float = 45.0,
    ) -> None:
        self._threads = threads
        self._repo = repo
        self._store = store
        self._clock = clock
        self._stale_after = timedelta(seconds=stale_after_s)

    async def history(
        self, who: Principal, thread_id: UUID, *, offset: int, limit: int, branch: UUID | None
    ) -> tuple[list[Shown], int]:
        """The visible messages of ``branch`` (the branch ending at that message;
        None: the current one), oldest first, paged, and how many there are. A
        thread that never branched is read as before, a page at a time."""
        if not 0 <= offset <= MAX_OFFSET:
            raise InvalidInput("offset", f"must be between 0 and {MAX_OFFSET}")
        thread = await self._threads.visible(who, thread_id)
        if branch is None and thread.head_id is None:
            return await self._one_line(who.org_id, thread_id, offset, limit)
        every = await self._store.thread_messages(who.org_id, thread_id)
        items = shown(every, branch_of(every, branch or thread.head_id))
        return items[offset : offset + limit], len(items)

    async def _one_line(
        self, org: str, thread_id: UUID, offset: int, limit: int
    ) -> tuple[list[Shown], int]:
        # the message before the page too: it is the first one's parent
        before = 1 if offset > 0 else 0
        rows, total = await self._store.history(
            org, thread_id, offset=offset - before, limit=limit + before
        )
        parent = rows[0].id if before and rows else None
        out: list[Shown] = []
        for m in rows[before:]:
            out.append(
                Shown(
                    message=m,
                    parent_id=parent,
                    sibling_index=1,
                    sibling_count=1,
                    prev_sibling_id=None,
                    next_sibling_id=None,
                )
            )
            parent = m.id
        return out, total

    async def switch(self, who: Principal, thread_id: UUID, message_id: UUID) -> Thread:
        """Make the branch of ``message_id`` current: its latest leaf (following the
        newest child at each step) becomes the thread's head. ``ThreadBusy`` while a
        reply runs; a multiplayer thread has one line (``Conflict``)."""
        thread = await self._threads.visible(who, thread_id)
        if thread.kind == "multiplayer":
            raise Conflict(
                "a multiplayer thread's history has one line: it has no branches",
                code="THREAD_NOT_BRANCHABLE",
            )
        now = self._clock.now()
        if await self._store.running(who.org_id, thread_id, now - self._stale_after):
            raise ThreadBusy()
        every = await self._store.thread_messages(who.org_id, thread_id)
        leaf = latest_leaf(every, message_id)
        return await self._repo.modify(
            who.org_id,
            thread_id,
            lambda t: msgspec.structs.replace(t, head_id=leaf, updated_at=now),
        )

    async def fork(self, who: Principal, thread_id: UUID, message_id: UUID | None) -> Thread:
        """A new thread of the same agent, the caller's, holding a copy of the
        branch up to ``message_id`` (None: the whole current branch) as one line;
        the copy is made by the storage (one statement), never message by message
        through here."""
        thread = await self._threads.visible(who, thread_id)
        every = await self._store.thread_messages(who.org_id, thread_id)
        path = settled(branch_of(every, message_id or thread.head_id))
        title = f"{thread.title} (fork)"[:MAX_TITLE] if thread.title else None
        forked = await self._threads.create(
            who,
            ThreadDraft(
                agent_id=thread.agent_id,
                title=title,
                active_profile=thread.active_profile,
                system_prompt_overlay=thread.system_prompt_overlay,
                metadata=dict(thread.metadata),
                resource_bindings=list(thread.resource_bindings),
            ),
        )
        await self._store.copy_messages(who.org_id, thread_id, [m.id for m in path], forked.id)
        return forked
