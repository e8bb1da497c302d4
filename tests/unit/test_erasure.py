"""The erasure use case (``agentsvc_core.use_cases.erasure``) over the memory
adapters, and ``Halting`` (``use_cases/turn/halt.py``): who may delete, a reply
stopped first (and a deletion refused when it does not stop), the holders
outside storage, a user's erasure and export, the retention sweep."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from uuid import UUID, uuid4

import msgspec
import pytest

from agentsvc_adapters.memory import MemoryStorage
from agentsvc_adapters.signals import LocalStopBus
from agentsvc_core.entities import Principal
from agentsvc_core.entities.memory import Memory
from agentsvc_core.entities.published_chat import VisitorThread
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied
from agentsvc_core.ports import SealedRecord, StopSignal
from agentsvc_core.use_cases import AgentDraft, Agents
from agentsvc_core.use_cases.erasure import SWEEP_BATCH, Erasure, GrantExport, grant_owner
from agentsvc_core.use_cases.threads import ThreadDraft, Threads
from agentsvc_core.use_cases.turn.halt import Halting
from tests.contract.test_conversations_contract import a_message, a_run, a_thread

KEY = Principal(org_id="acme", method="api_key")
ALICE = Principal(org_id="acme", method="jwt", user_id="alice")
BOB = Principal(org_id="acme", method="jwt", user_id="bob")
ADMIN_CAROL = Principal(org_id="acme", method="jwt", role="admin", user_id="carol")
OUTSIDER = Principal(org_id="other", method="api_key")
T0 = datetime(2026, 3, 1, tzinfo=UTC)


class Clock:
    def __init__(self, at: datetime = T0) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


class Stopper:
    """Stops nothing but says so, as ``Conversation.halt`` answers."""

    def __init__(self, stops: bool = True) -> None:
        self.stops = stops
        self.asked: list[tuple[str, UUID, float]] = []

    async def halt(self, org_id: str, thread_id: UUID, wait_s: float) -> bool:
        self.asked.append((org_id, thread_id, wait_s))
        return self.stops


class Holder:
    def __init__(self) -> None:
        self.asked: list[tuple[str, UUID]] = []

    async def delete_for_thread(self, org_id: str, thread_id: UUID) -> int:
        self.asked.append((org_id, thread_id))
        return 1


class World(msgspec.Struct, kw_only=True, dict=True):
    storage: MemoryStorage
    threads: Threads
    erasure: Erasure
    stopper: Stopper
    holder: Holder
    clock: Clock
    agent: UUID


async def world(stops: bool = True) -> World:
    storage = MemoryStorage()
    clock = Clock()
    threads = Threads(storage.threads, storage.agents, storage.conversations, clock)
    stopper, holder = Stopper(stops), Holder()
    erasure = Erasure(
        threads,
        storage.erasure,
        thread_repo=storage.threads,
        conversations=storage.conversations,
        secrets=storage.secrets,
        publishing=storage.publishing,
        replies=stopper,
        clock=clock,
        holders=[holder],
        stop_wait_s=3.0,
    )
    agent = await Agents(storage.agents, clock, default_model="local").create(
        KEY, AgentDraft(name="a")
    )
    return World(
        storage=storage,
        threads=threads,
        erasure=erasure,
        stopper=stopper,
        holder=holder,
        clock=clock,
        agent=agent.id,
    )


async def test_an_owner_deletes_their_thread_its_reply_stopped_first() -> None:
    w = await world()
    mine = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    await w.erasure.delete_thread(ALICE, mine.id)
    assert w.stopper.asked == [("acme", mine.id, 3.0)]
    assert w.holder.asked == [("acme", mine.id)]
    with pytest.raises(NotFound):
        await w.threads.visible(KEY, mine.id)
    with pytest.raises(NotFound):
        await w.erasure.delete_thread(ALICE, mine.id)


async def test_who_may_delete_a_thread() -> None:
    w = await world()
    mine = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    shared = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent, kind="multiplayer"))
    await w.threads.add_participant(ALICE, shared.id, "bob", None, "owner")
    for who, thread in ((BOB, mine.id), (BOB, shared.id), (ADMIN_CAROL, mine.id)):
        with pytest.raises(PermissionDenied):
            await w.erasure.delete_thread(who, thread)
    with pytest.raises(NotFound):
        await w.erasure.delete_thread(OUTSIDER, mine.id)
    assert w.stopper.asked == []  # refused before anything was stopped
    await w.threads.add_participant(ALICE, shared.id, "carol", None, "member")
    await w.erasure.delete_thread(ADMIN_CAROL, shared.id)  # an admin who sees it
    await w.erasure.delete_thread(KEY, mine.id)  # an API key sees every thread


async def test_a_reply_begun_after_the_stop_is_stopped_in_turn() -> None:
    """A send that starts a reply between the stop and the erasure: storage refuses
    (``ThreadBusy``) and the reply is stopped again; one that keeps coming back
    ends in 409 after a few tries, with nothing deleted."""
    w = await world()
    mine = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    run = a_run(mine, started_at=T0, heartbeat_at=T0)
    await w.storage.conversations.begin_turn(run, [], T0 - timedelta(seconds=45))
    with pytest.raises(Conflict) as refused:
        await w.erasure.delete_thread(ALICE, mine.id)  # the stopper stops nothing
    assert refused.value.code == "THREAD_BUSY"
    assert len(w.stopper.asked) == 3
    assert (await w.threads.visible(ALICE, mine.id)).id == mine.id
    # the reply ends; the next deletion goes through at its first try
    done = msgspec.structs.replace(run, status="stopped", finished_at=T0)
    await w.storage.conversations.finish_turn(done, [], [])
    w.stopper.asked.clear()
    await w.erasure.delete_thread(ALICE, mine.id)
    assert len(w.stopper.asked) == 1


async def test_a_reply_that_does_not_stop_refuses_the_deletion() -> None:
    w = await world(stops=False)
    mine = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    with pytest.raises(Conflict) as refused:
        await w.erasure.delete_thread(ALICE, mine.id)
    assert refused.value.code == "THREAD_BUSY"
    assert (await w.threads.visible(ALICE, mine.id)).id == mine.id
    assert w.holder.asked == []


def test_grant_owners_are_read_from_their_keys() -> None:
    mcp = str(uuid4())
    assert grant_owner(f"{mcp}:user:alice") == (mcp, "alice")
    assert grant_owner("managed:google:user:alice") == ("managed:google", "alice")
    assert grant_owner(f"{mcp}:user:a:user:b") == (mcp, "a:user:b")
    assert grant_owner(f"{mcp}:org") is None
    assert grant_owner(f"{mcp}:user:") is None


async def _filled(w: World) -> tuple[UUID, UUID, UUID, UUID]:
    """Alice's own thread (with messages), her visitor thread, Bob's thread she
    takes part in; her memories and grants; Bob's."""
    s = w.storage
    own = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    run = a_run(own)
    await s.conversations.begin_turn(
        run, [a_message(own, content="hello there", run_id=run.id)], T0 - timedelta(hours=1)
    )
    done = msgspec.structs.replace(run, status="completed", finished_at=run.started_at)
    await s.conversations.finish_turn(done, [], [])
    visited = await w.threads.create(KEY, ThreadDraft(agent_id=w.agent))
    await s.publishing.add_visitor_thread(
        VisitorThread(
            org_id="acme",
            thread_id=visited.id,
            agent_id=w.agent,
            visitor_id="alice",
            identified=True,
            created_at=visited.created_at,
        )
    )
    bobs = await w.threads.create(BOB, ThreadDraft(agent_id=w.agent, kind="multiplayer"))
    await w.threads.add_participant(BOB, bobs.id, "alice", None, "member")
    for who, text in (("alice", "likes tea"), ("alice", "lives in Oslo"), ("bob", "likes cats")):
        memory = Memory(
            id=uuid4(),
            org_id="acme",
            agent_id=w.agent,
            scope="user",
            scope_id=who,
            content=text,
            created_at=T0,
            updated_at=T0,
        )
        await s.memories.save(memory, 100)
    mcp = uuid4()
    sealed = SealedRecord(value="sealed-token", expires_at=T0 + timedelta(days=1))
    for key in (f"{mcp}:user:alice", "managed:google:user:alice", f"{mcp}:user:bob", f"{mcp}:org"):
        await s.secrets.put("acme", "oauth_token", key, sealed)
    await s.secrets.put("acme", "oauth_client", f"{mcp}:user:alice", sealed)
    return own.id, visited.id, bobs.id, mcp


async def test_a_users_export_has_everything_but_secrets() -> None:
    w = await world()
    own, visited, _, mcp = await _filled(w)
    with pytest.raises(PermissionDenied):
        await w.erasure.export_user(ALICE, "alice")
    with pytest.raises(InvalidInput):
        await w.erasure.export_user(KEY, "")
    doc = await w.erasure.export_user(KEY, "alice")
    assert doc.user_id == "alice"
    assert doc.exported_at == T0
    assert [t.thread.id for t in doc.threads] == [own, visited]
    assert [m.content for m in doc.threads[0].messages] == ["hello there"]
    assert sorted(m.content for m in doc.memories) == ["likes tea", "lives in Oslo"]
    expires = T0 + timedelta(days=1)
    assert sorted(doc.oauth_grants, key=lambda g: g.kind) == [
        GrantExport(kind="managed", provider="google", expires_at=expires),
        GrantExport(kind="mcp", mcp_id=str(mcp), expires_at=expires),
    ]
    assert [v.thread_id for v in doc.visitor_sessions] == [visited]
    assert "sealed-token" not in msgspec.json.encode(doc).decode()


async def test_a_users_erasure_counts_then_zeros() -> None:
    w = await world()
    own, visited, bobs, _ = await _filled(w)
    with pytest.raises(PermissionDenied):
        await w.erasure.erase_user(BOB, "alice")
    done = await w.erasure.erase_user(ADMIN_CAROL, "alice")
    assert (done.threads, done.visitor_sessions, done.memories) == (2, 1, 2)
    assert (done.oauth_grants, done.participations) == (2, 1)
    assert sorted(w.holder.asked) == sorted([("acme", own), ("acme", visited)])
    again = await w.erasure.erase_user(ADMIN_CAROL, "alice")
    assert (again.threads, again.visitor_sessions, again.memories) == (0, 0, 0)
    assert (again.oauth_grants, again.participations) == (0, 0)
    # Bob's thread, memory and grant, and the organization's grant, stay
    assert (await w.threads.visible(BOB, bobs)).id == bobs
    assert [m.content for m in await w.storage.erasure.user_memories("acme", "bob")] == [
        "likes cats"
    ]
    left = {k for _, kind, k, _ in await w.storage.secrets.every("acme") if kind == "oauth_token"}
    assert len(left) == 2
    assert all(k.endswith((":user:bob", ":org")) for k in left)
    # what is not a grant stays (a registered client)
    assert any(kind == "oauth_client" for _, kind, _, _ in await w.storage.secrets.every("acme"))


async def test_the_sweep_deletes_threads_past_their_retention() -> None:
    w = await world()
    old = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    w.clock.at = T0 + timedelta(days=5)
    talked = await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    w.clock.at = T0 + timedelta(days=10)
    assert await w.erasure.sweep() == 0  # no retention: kept for ever
    await w.storage.erasure.set_retention_days("acme", 7)
    assert await w.erasure.sweep() == 0  # less than a batch found: the next in an hour
    w.clock.at += timedelta(minutes=59, seconds=59)
    assert await w.erasure.sweep() == 0
    w.clock.at += timedelta(seconds=1)
    assert await w.erasure.sweep() == 1
    with pytest.raises(NotFound):
        await w.threads.visible(KEY, old.id)
    assert (await w.threads.visible(KEY, talked.id)).id == talked.id
    # a message is a touch
    await w.storage.conversations.add_message(a_message(talked, created_at=T0 + timedelta(days=9)))
    w.clock.at = T0 + timedelta(days=15)
    assert await w.erasure.sweep() == 0
    w.clock.at = T0 + timedelta(days=16, hours=1)
    assert await w.erasure.sweep() == 1


async def test_a_busy_thread_waits_for_the_next_sweep() -> None:
    w = await world(stops=False)
    await w.threads.create(ALICE, ThreadDraft(agent_id=w.agent))
    await w.storage.erasure.set_retention_days("acme", 1)
    w.clock.at = T0 + timedelta(days=2)
    assert await w.erasure.sweep() == 0
    w.stopper.stops = True
    w.clock.at += timedelta(hours=1)
    assert await w.erasure.sweep() == 1


async def test_a_full_batch_has_the_next_sweep_go_on_at_once() -> None:
    w = await world()
    for _ in range(SWEEP_BATCH + 1):
        await w.threads.create(KEY, ThreadDraft(agent_id=w.agent))
    await w.storage.erasure.set_retention_days("acme", 1)
    w.clock.at = T0 + timedelta(days=2)
    assert await w.erasure.sweep() == SWEEP_BATCH
    assert await w.erasure.sweep() == 1  # at once
    assert await w.erasure.sweep() == 0


# --- halt -------------------------------------------------------------------------


async def test_halt_stops_a_reply_of_this_process_and_waits_for_its_end() -> None:
    storage = MemoryStorage()
    clock = Clock(datetime.now(UTC))
    thread = await storage.threads.add(a_thread("acme"))
    run = a_run(thread, started_at=clock.now(), heartbeat_at=clock.now())
    await storage.conversations.begin_turn(run, [], clock.now() - timedelta(seconds=45))
    stops = LocalStopBus()
    signal = stops.watch(run.id)
    ended: list[str] = []

    async def reply() -> None:
        await signal.wait()
        done = msgspec.structs.replace(run, status="stopped", finished_at=clock.now())
        await storage.conversations.finish_turn(done, [], [])
        ended.append("finished")

    task = asyncio.create_task(reply())
    running: dict[UUID, tuple[str, asyncio.Task[None], StopSignal]] = {
        run.id: ("acme", task, signal)
    }
    halting = Halting(storage.conversations, stops, running, clock, timedelta(seconds=45))
    assert await halting.halt("acme", thread.id, 30.0) is True
    assert ended == ["finished"]
    # nothing runs: at once
    assert await halting.halt("acme", thread.id, 0.0) is True


async def test_halt_gives_up_on_a_reply_that_does_not_end() -> None:
    storage = MemoryStorage()
    clock = Clock(datetime.now(UTC))
    thread = await storage.threads.add(a_thread("acme"))
    run = a_run(thread, started_at=clock.now(), heartbeat_at=clock.now())
    await storage.conversations.begin_turn(run, [], clock.now() - timedelta(seconds=45))
    stops = LocalStopBus()
    signal = stops.watch(run.id)
    halting = Halting(storage.conversations, stops, {}, clock, timedelta(seconds=45))
    # another process's reply (not in ``running``) that never ends
    assert await halting.halt("acme", thread.id, 0.0) is False
    assert signal.is_set()  # it was told to stop
