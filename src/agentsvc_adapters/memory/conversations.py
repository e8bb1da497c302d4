from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta
from uuid import UUID

import msgspec

from agentsvc_adapters.memory.idempotency import MemoryIdempotency
from agentsvc_adapters.memory.traces import MemoryTraces
from agentsvc_core.entities import (
    Message,
    Participant,
    Run,
    Thread,
    TraceRecord,
    UsageRecord,
    visible_in_history,
)
from agentsvc_core.errors import IdempotencyKeyInUse, NotFound, ThreadBusy
from agentsvc_core.ports import (
    ConversationStore,
    EventBatch,
    StoredStream,
    StreamStore,
    ThreadRepository,
)
from agentsvc_core.ports.idempotency import IdempotencyClaim
from agentsvc_core.ports.storage import RUN_MESSAGES_WINDOW, SEARCH_CHARS, SEARCH_WORD

_TICK = timedelta(microseconds=1)


def _holds(text: str, words: Sequence[str]) -> bool:
    """Every word starts one of the text's words (lowercased)."""
    have = [w.lower() for w in SEARCH_WORD.findall(text)]
    return all(any(h.startswith(w) for h in have) for w in words)


class MemoryThreads(ThreadRepository):
    def __init__(self, conversations: MemoryConversations | None = None) -> None:
        """``conversations``: where the runs are (a thread shows its running one)."""
        self._conversations = conversations
        self._threads: dict[tuple[str, UUID], Thread] = {}
        self._created: dict[str, set[datetime]] = {}
        self._participants: dict[tuple[str, UUID], dict[str, Participant]] = {}

    async def add(self, thread: Thread) -> Thread:
        taken = self._created.setdefault(thread.org_id, set())
        created = thread.created_at
        while created in taken:
            created += _TICK
        taken.add(created)
        stored = msgspec.structs.replace(thread, created_at=created)
        self._threads[(thread.org_id, thread.id)] = stored
        return stored

    def _get(self, org_id: str, thread_id: UUID) -> Thread:
        try:
            return self._threads[(org_id, thread_id)]
        except KeyError:
            raise NotFound("thread not found") from None

    def all(self) -> Iterator[Thread]:
        """Every thread stored (analytics counts them)."""
        return iter(list(self._threads.values()))

    def has(self, org_id: str, thread_id: UUID) -> bool:
        return (org_id, thread_id) in self._threads

    def drop_thread(self, org_id: str, thread_id: UUID) -> bool:
        """The thread and its participants go (``MemoryErasure``); False: none."""
        self._participants.pop((org_id, thread_id), None)
        return self._threads.pop((org_id, thread_id), None) is not None

    def leave_all(self, org_id: str, user_id: str) -> int:
        """The user leaves every thread of the organization; how many it left."""
        left = 0
        for (org, _), members in self._participants.items():
            if org == org_id and members.pop(user_id, None) is not None:
                left += 1
        return left

    def move_head(self, org_id: str, thread_id: UUID, head: UUID) -> None:
        """A branched thread's turn stored its messages: ``head`` is its last."""
        found = self._threads.get((org_id, thread_id))
        if found is not None:
            self._threads[(org_id, thread_id)] = msgspec.structs.replace(found, head_id=head)

    def stored(self, org_id: str, thread_id: UUID) -> Thread:
        """The thread as stored (no ``active_run_id``: the turn reader's). Raises
        ``NotFound``."""
        return self._get(org_id, thread_id)

    def _shown(self, t: Thread) -> Thread:
        if self._conversations is None:
            return t
        running = next(
            (r.id for r in self._conversations.runs_of(t.org_id, t.id) if r.status == "running"),
            None,
        )
        return msgspec.structs.replace(t, active_run_id=running)

    async def get(self, org_id: str, thread_id: UUID) -> Thread:
        return self._shown(self._get(org_id, thread_id))

    async def modify(
        self, org_id: str, thread_id: UUID, change: Callable[[Thread], Thread]
    ) -> Thread:
        updated = change(self._get(org_id, thread_id))
        self._threads[(org_id, thread_id)] = msgspec.structs.replace(updated, active_run_id=None)
        return self._shown(updated)

    async def list_for_agent(
        self,
        org_id: str,
        agent_id: UUID,
        *,
        before: datetime | None,
        limit: int,
        visible_to: str | None = None,
        words: Sequence[str] = (),
    ) -> list[Thread]:
        def shown(t: Thread) -> bool:
            if visible_to is None or t.created_by == visible_to:
                return True
            return visible_to in self._participants.get((org_id, t.id), {})

        rows = [
            t
            for (org, _), t in self._threads.items()
            if org == org_id
            and t.agent_id == agent_id
            and (before is None or t.created_at < before)
            and shown(t)
            and (not words or self._found(t, words))
        ]
        rows.sort(key=lambda t: t.created_at, reverse=True)
        return [self._shown(t) for t in rows[:limit]]

    def _found(self, t: Thread, words: Sequence[str]) -> bool:
        """The thread search (the port's rule): the title, or one shown message."""
        if _holds(t.title or "", words):
            return True
        if self._conversations is None:
            return False
        messages, _ = self._conversations.messages(t.org_id, t.id)
        return any(
            visible_in_history(m) and _holds(m.content[:SEARCH_CHARS], words) for m in messages
        )

    async def put_participant(self, participant: Participant) -> Participant:
        self._get(participant.org_id, participant.thread_id)
        members = self._participants.setdefault((participant.org_id, participant.thread_id), {})
        existing = members.get(participant.user_id)
        if existing is not None:
            participant = msgspec.structs.replace(participant, added_at=existing.added_at)
        members[participant.user_id] = participant
        return participant

    async def participants(self, org_id: str, thread_id: UUID) -> list[Participant]:
        return sorted(
            self._participants.get((org_id, thread_id), {}).values(),
            key=lambda p: (p.added_at, p.user_id),
        )

    async def participant(self, org_id: str, thread_id: UUID, user_id: str) -> Participant | None:
        return self._participants.get((org_id, thread_id), {}).get(user_id)

    async def remove_participant(self, org_id: str, thread_id: UUID, user_id: str) -> bool:
        return self._participants.get((org_id, thread_id), {}).pop(user_id, None) is not None


class MemoryConversations(ConversationStore, StreamStore):
    """The turn's storage and the replies' stored events (one object: the events'
    reads need the runs)."""

    def __init__(self, keys: MemoryIdempotency | None = None) -> None:
        """``keys``: where a send's idempotency key is claimed with its run."""
        self._keys = keys or MemoryIdempotency()
        self.traces: MemoryTraces | None = None  # where turns' traces go (None: nowhere)
        # where a branched thread's head is kept (the threads': set by the storage)
        self.move_head: Callable[[str, UUID, UUID], None] | None = None
        self._messages: dict[tuple[str, UUID], list[Message]] = {}
        self._runs: dict[tuple[str, UUID], list[Run]] = {}
        self._usage: dict[tuple[str, UUID], list[UsageRecord]] = {}
        # (organization, run id) -> batches by end index
        self._events: dict[tuple[str, UUID], dict[int, EventBatch]] = {}

    def runs_of(self, org_id: str, thread_id: UUID) -> list[Run]:
        return self._runs.setdefault((org_id, thread_id), [])

    def messages(self, org_id: str, thread_id: UUID) -> tuple[list[Message], int]:
        """The thread's history and its mark (the number of messages: they are only
        ever appended)."""
        history = self._messages.get((org_id, thread_id), [])
        return list(history), len(history)

    async def begin_turn(
        self,
        run: Run,
        new: list[Message],
        stale_before: datetime,
        seen: int | None = None,
        claim: IdempotencyClaim | None = None,
        *,
        head: UUID | None = None,
    ) -> list[Message] | None:
        runs = self.runs_of(run.org_id, run.thread_id)
        if claim is not None:
            held = await self._keys.find(run.org_id, claim.key, claim.at)
            if held is not None:
                raise IdempotencyKeyInUse()
        for i, r in enumerate(runs):
            if r.status == "running":
                if r.heartbeat_at >= stale_before:
                    raise ThreadBusy()
                runs[i] = msgspec.structs.replace(
                    r, status="interrupted", finished_at=run.started_at
                )
        runs.append(run)
        if claim is not None:
            self._keys.take(run.org_id, claim, run.id)
        history = self._messages.setdefault((run.org_id, run.thread_id), [])
        unchanged = seen == len(history)
        history.extend(new)
        self._moved(run, head)
        return None if unchanged else list(history)

    def _moved(self, run: Run, head: UUID | None) -> None:
        if head is not None and self.move_head is not None:
            self.move_head(run.org_id, run.thread_id, head)

    async def add_message(self, message: Message) -> None:
        self._messages.setdefault((message.org_id, message.thread_id), []).append(message)

    async def heartbeat(self, runs: list[tuple[str, UUID]], at: datetime) -> None:
        wanted = set(runs)
        for stored in self._runs.values():
            for i, r in enumerate(stored):
                if (r.org_id, r.id) in wanted and r.status == "running":
                    stored[i] = msgspec.structs.replace(r, heartbeat_at=at)

    async def finish_turn(
        self,
        run: Run,
        new: list[Message],
        usage: list[UsageRecord],
        events: EventBatch | None = None,
        trace: TraceRecord | None = None,
        *,
        head: UUID | None = None,
    ) -> None:
        runs = self.runs_of(run.org_id, run.thread_id)
        for i, r in enumerate(runs):
            if r.id == run.id:
                runs[i] = run
        self._messages.setdefault((run.org_id, run.thread_id), []).extend(new)
        self._moved(run, head)
        self._usage.setdefault((run.org_id, run.thread_id), []).extend(usage)
        if events is not None:
            await self.append_events(run.org_id, run.id, events)
        if trace is not None and self.traces is not None:
            self.traces.add(trace)

    def usage_of(self, org_id: str, thread_id: UUID) -> list[UsageRecord]:
        """The thread's usage records (a published chat's daily cost reads them)."""
        return self._usage.get((org_id, thread_id), [])

    def all_usage(self) -> Iterator[UsageRecord]:
        for records in self._usage.values():
            yield from records

    def drop_thread(self, org_id: str, thread_id: UUID) -> list[UUID]:
        """The thread's messages, runs and their stored events go; its usage records
        (no text) stay. Returns the ids of the runs that went."""
        self._messages.pop((org_id, thread_id), None)
        runs = [r.id for r in self._runs.pop((org_id, thread_id), [])]
        for run_id in runs:
            self._events.pop((org_id, run_id), None)
        return runs

    def last_touched(self, org_id: str, thread_id: UUID) -> datetime | None:
        """When the thread's last message or reply was stored (None: neither)."""
        times = [m.created_at for m in self._messages.get((org_id, thread_id), [])]
        times += [r.started_at for r in self._runs.get((org_id, thread_id), [])]
        return max(times, default=None)

    # --- StreamStore ------------------------------------------------------------

    async def append_events(self, org_id: str, run_id: UUID, batch: EventBatch) -> None:
        stored = self._events.setdefault((org_id, run_id), {})
        stored.setdefault(batch.first + batch.count, batch)

    async def stream(self, org_id: str, run_id: UUID, after: int) -> StoredStream | None:
        run = next(
            (
                r
                for (o, _), runs in self._runs.items()
                if o == org_id
                for r in runs
                if r.id == run_id
            ),
            None,
        )
        if run is None:
            return None
        batches = self._events.get((org_id, run_id), {})
        kept = sorted(
            ((b.first, b.data) for end, b in batches.items() if end > after),
            key=lambda fb: fb[0],
        )
        return StoredStream(run=run, batches=kept)

    async def purge_events(self, now: datetime) -> int:
        dropped = 0
        for key, batches in list(self._events.items()):
            for end, b in list(batches.items()):
                if b.keep_until < now:
                    del batches[end]
                    dropped += 1
            if not batches:
                del self._events[key]
        return dropped

    async def running(self, org_id: str, thread_id: UUID, stale_before: datetime) -> Run | None:
        for r in self.runs_of(org_id, thread_id):
            if r.status == "running" and r.heartbeat_at >= stale_before:
                return r
        return None

    async def latest_run(self, org_id: str, thread_id: UUID) -> Run | None:
        runs = self.runs_of(org_id, thread_id)
        return runs[-1] if runs else None

    async def interrupt_orphaned(self, org_id: str, run_id: UUID, at: datetime) -> bool:
        return False  # every run here is this process's, which is alive

    async def interrupt_stale(self, stale_before: datetime, at: datetime) -> int:
        count = 0
        for runs in self._runs.values():
            for i, r in enumerate(runs):
                if r.status == "running" and r.heartbeat_at < stale_before:
                    runs[i] = msgspec.structs.replace(r, status="interrupted", finished_at=at)
                    count += 1
        return count

    async def history(
        self, org_id: str, thread_id: UUID, *, offset: int, limit: int
    ) -> tuple[list[Message], int]:
        shown = [m for m in self._messages.get((org_id, thread_id), []) if visible_in_history(m)]
        return shown[offset : offset + limit], len(shown)

    async def thread_messages(self, org_id: str, thread_id: UUID) -> list[Message]:
        return list(self._messages.get((org_id, thread_id), []))

    async def copy_messages(
        self, org_id: str, from_thread: UUID, ids: list[UUID], to_thread: UUID
    ) -> int:
        wanted = set(ids)
        copies = [
            msgspec.structs.replace(
                m, id=uuid.uuid4(), thread_id=to_thread, parent_id=None, run_id=None
            )
            for m in self._messages.get((org_id, from_thread), [])
            if m.id in wanted
        ]
        self._messages.setdefault((org_id, to_thread), []).extend(copies)
        return len(copies)

    async def usage(self, org_id: str, thread_id: UUID) -> list[UsageRecord]:
        return list(self._usage.get((org_id, thread_id), []))

    async def run_messages(self, org_id: str, thread_id: UUID, run_id: UUID) -> list[Message]:
        latest = self._messages.get((org_id, thread_id), [])[-RUN_MESSAGES_WINDOW:]
        return [m for m in latest if m.run_id == run_id]

    async def add_usage(self, records: list[UsageRecord]) -> None:
        for r in records:
            self._usage.setdefault((r.org_id, r.thread_id), []).append(r)
