"""Threads, runs, messages and usage: the memory and PostgreSQL adapters agree."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import timedelta
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_adapters.postgres import PostgresStopBus, PostgresStorage
from agentsvc_core.entities import (
    Message,
    Participant,
    Role,
    Run,
    Thread,
    ToolCall,
    Usage,
    UsageRecord,
)
from agentsvc_core.errors import Conflict, NotFound
from tests.contract.conftest import Backend, now

text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]))


def a_thread(org: str, agent_id: uuid.UUID | None = None, **over: object) -> Thread:
    t = now()
    base = Thread(
        id=uuid.uuid4(),
        org_id=org,
        agent_id=agent_id or uuid.uuid4(),
        title=None,
        kind="single",
        status="active",
        active_profile=None,
        system_prompt_overlay=None,
        metadata={},
        resource_bindings=[],
        created_by=None,
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def a_run(th: Thread, **over: object) -> Run:
    t = now()
    return msgspec.structs.replace(
        Run(
            id=uuid.uuid4(),
            org_id=th.org_id,
            thread_id=th.id,
            status="running",
            started_at=t,
            heartbeat_at=t,
        ),
        **over,
    )


def a_message(th: Thread, role: Role = "user", content: str = "hi", **over: object) -> Message:
    return msgspec.structs.replace(
        Message(
            id=uuid.uuid4(),
            org_id=th.org_id,
            thread_id=th.id,
            role=role,
            content=content,
            created_at=now(),
        ),
        **over,
    )


def stored_thread(backend: Backend, **over: Any) -> Thread:
    return backend.run(backend.storage.threads.add, a_thread(backend.fresh_org(), **over))


@given(
    title=st.one_of(st.none(), text.map(lambda s: s[:200])),
    overlay=st.one_of(st.none(), text),
    metadata=st.dictionaries(
        text.filter(bool).map(lambda s: s[:40]), text.map(lambda s: s[:100]), max_size=5
    ),
    bindings=st.lists(
        st.dictionaries(
            st.sampled_from(["type", "id", "url"]),
            st.one_of(
                text.map(lambda s: s[:50]), st.integers(-(2**31), 2**31), st.booleans(), st.none()
            ),
        ),
        max_size=3,
    ),
)
def test_threads_round_trip(
    backend: Backend,
    title: str | None,
    overlay: str | None,
    metadata: dict[str, str],
    bindings: list[dict[str, object]],
) -> None:
    t = stored_thread(
        backend,
        title=title,
        system_prompt_overlay=overlay,
        metadata=metadata,
        resource_bindings=bindings,
    )
    got = backend.run(backend.storage.threads.get, t.org_id, t.id)
    assert got == t
    assert list(got.metadata) == list(metadata)  # key order kept


def test_creation_times_stay_distinct_under_concurrent_adds(backend: Backend) -> None:
    org = backend.fresh_org()
    agent = uuid.uuid4()
    same = now()
    repo = backend.storage.threads

    async def race() -> list[Thread]:
        return await asyncio.gather(
            *(repo.add(a_thread(org, agent, created_at=same)) for _ in range(25))
        )

    made = backend.run(race)
    assert len({t.created_at for t in made}) == 25
    listed = backend.run(lambda: repo.list_for_agent(org, agent, before=None, limit=100))
    assert [t.created_at for t in listed] == sorted((t.created_at for t in made), reverse=True)
    older = backend.run(
        lambda: repo.list_for_agent(org, agent, before=listed[9].created_at, limit=100)
    )
    assert older == listed[10:]


def test_listing_for_a_user_shows_own_and_participated_threads(backend: Backend) -> None:
    org = backend.fresh_org()
    agent = uuid.uuid4()
    repo = backend.storage.threads
    mine = backend.run(repo.add, a_thread(org, agent, created_by="u1"))
    backend.run(repo.add, a_thread(org, agent, created_by="u2"))
    shared = backend.run(repo.add, a_thread(org, agent, created_by="u2", kind="multiplayer"))
    backend.run(
        repo.put_participant,
        Participant(
            org_id=org,
            thread_id=shared.id,
            user_id="u1",
            display_name=None,
            role="member",
            added_at=now(),
        ),
    )
    listed = backend.run(
        lambda: repo.list_for_agent(org, agent, before=None, limit=10, visible_to="u1")
    )
    assert {t.id for t in listed} == {mine.id, shared.id}


def test_participants_upsert_list_remove(backend: Backend) -> None:
    t = stored_thread(backend, kind="multiplayer")
    repo = backend.storage.threads
    first = Participant(
        org_id=t.org_id, thread_id=t.id, user_id="a", display_name="A", role="owner", added_at=now()
    )
    backend.run(repo.put_participant, first)
    changed = backend.run(
        repo.put_participant,
        msgspec.structs.replace(
            first, display_name="Ay", role="member", added_at=now() + timedelta(hours=1)
        ),
    )
    assert (changed.display_name, changed.role, changed.added_at) == (
        "Ay",
        "member",
        first.added_at,
    )
    assert backend.run(repo.participants, t.org_id, t.id) == [changed]
    assert backend.run(repo.remove_participant, t.org_id, t.id, "a") is True
    assert backend.run(repo.remove_participant, t.org_id, t.id, "a") is False
    assert backend.run(repo.participant, t.org_id, t.id, "a") is None


def test_one_running_reply_per_thread_and_stale_ones_are_taken_over(backend: Backend) -> None:
    t = stored_thread(backend)
    store = backend.storage.conversations
    first = a_run(t)
    backend.run(store.begin_turn, first, [a_message(t)], now() - timedelta(seconds=45))
    with pytest.raises(Conflict) as busy:
        backend.run(
            store.begin_turn,
            a_run(t),
            [a_message(t, content="second")],
            now() - timedelta(seconds=45),
        )
    assert busy.value.code == "THREAD_BUSY"
    assert backend.run(store.running, t.org_id, t.id, now() - timedelta(seconds=45)) == first
    # the refused turn stored nothing
    assert [
        m.content for m in backend.run(lambda: store.history(t.org_id, t.id, offset=0, limit=10))[0]
    ] == ["hi"]
    # once the first run's heartbeat is older than the limit, a new turn marks it interrupted
    history = backend.run(
        store.begin_turn, a_run(t), [a_message(t, content="third")], now() + timedelta(seconds=1)
    )
    assert history is not None  # without ``seen``: the whole history
    assert [m.content for m in history] == ["hi", "third"]


def test_concurrent_begins_on_one_thread_admit_exactly_one(backend: Backend) -> None:
    t = stored_thread(backend)
    store = backend.storage.conversations

    async def race() -> list[object]:
        return await asyncio.gather(
            *(
                store.begin_turn(
                    a_run(t), [a_message(t, content=str(i))], now() - timedelta(seconds=45)
                )
                for i in range(10)
            ),
            return_exceptions=True,
        )

    results = backend.run(race)
    assert sum(not isinstance(r, BaseException) for r in results) == 1
    assert all(isinstance(r, Conflict) for r in results if isinstance(r, BaseException))


def test_finish_turn_stores_run_messages_and_usage(backend: Backend) -> None:
    t = stored_thread(backend)
    store = backend.storage.conversations
    run = a_run(t)
    backend.run(store.begin_turn, run, [a_message(t)], now() - timedelta(seconds=45))
    call = ToolCall(id="c1", name="get_weather", arguments={"city": "Zürich", "n": [1, 2]})
    tool_step = a_message(t, "assistant", "", tool_calls=(call,), run_id=run.id)
    result = a_message(
        t, "tool", "sunny", tool_call_id="c1", sender_name="get_weather", run_id=run.id
    )
    answer = a_message(t, "assistant", "It is sunny.", run_id=run.id)
    usage = UsageRecord(
        id=uuid.uuid4(),
        org_id=t.org_id,
        agent_id=t.agent_id,
        thread_id=t.id,
        run_id=run.id,
        message_id=answer.id,
        provider="beta",
        model="gpt-x",
        usage=Usage(input_tokens=10, output_tokens=3, cached_input_tokens=4),
        key_source="byok",
        metadata={"a": "b"},
        created_at=now(),
    )
    final = msgspec.structs.replace(
        run, status="requires_action", finished_at=now(), pending_tool_calls=(call,)
    )
    backend.run(store.finish_turn, final, [tool_step, result, answer], [usage])
    assert backend.run(store.latest_run, t.org_id, t.id) == final
    assert backend.run(store.running, t.org_id, t.id, now() - timedelta(seconds=45)) is None
    assert backend.run(store.usage, t.org_id, t.id) == [usage]
    page, total = backend.run(lambda: store.history(t.org_id, t.id, offset=0, limit=10))
    assert [m.content for m in page] == ["hi", "It is sunny."]  # tool steps are not history
    assert total == 2
    # the model's context keeps everything, in order, tool calls included
    context = backend.run(store.begin_turn, a_run(t), [], now() - timedelta(seconds=45))
    assert context is not None  # without ``seen``: the whole history
    assert [m.role for m in context] == ["user", "assistant", "tool", "assistant"]
    assert context[1].tool_calls == (call,)
    assert context[2].tool_call_id == "c1"


def test_run_messages_and_usage_added_after_the_turn(backend: Backend) -> None:
    """What memory collection reads (one run's messages, in order, tool steps
    included) and writes (usage records of its own, after the turn's)."""
    t = stored_thread(backend)
    store = backend.storage.conversations
    runs = []
    for i in range(2):
        run = a_run(t)
        asked = a_message(t, content=f"q{i}", run_id=run.id)
        backend.run(store.begin_turn, run, [asked], now() - timedelta(seconds=45))
        step = a_message(
            t,
            "assistant",
            "",
            run_id=run.id,
            tool_calls=(ToolCall(id=f"c{i}", name="x", arguments={}),),
        )
        answer = a_message(t, "assistant", f"a{i}", run_id=run.id)
        done = msgspec.structs.replace(run, status="completed", finished_at=now())
        backend.run(store.finish_turn, done, [step, answer], [])
        runs.append((run.id, [asked.id, step.id, answer.id]))
    for run_id, ids in runs:
        assert [m.id for m in backend.run(store.run_messages, t.org_id, t.id, run_id)] == ids
    assert backend.run(store.run_messages, "another-org", t.id, runs[0][0]) == []
    assert backend.run(store.run_messages, t.org_id, t.id, uuid.uuid4()) == []

    records = [
        UsageRecord(
            id=uuid.uuid4(),
            org_id=t.org_id,
            agent_id=t.agent_id,
            thread_id=t.id,
            run_id=runs[0][0],
            message_id=None,
            provider="local",
            model="local",
            usage=Usage(input_tokens=20 + n, output_tokens=2),
            key_source="platform",
            metadata={},
            created_at=now() + timedelta(seconds=n),
            cost_usd=0.5 if n else None,
            purpose="memory",
        )
        for n in range(2)
    ]
    backend.run(store.add_usage, records)
    backend.run(store.add_usage, [])
    assert backend.run(store.usage, t.org_id, t.id) == records


def test_history_pages_and_totals(backend: Backend) -> None:
    t = stored_thread(backend)
    store = backend.storage.conversations
    for i in range(7):
        run = a_run(t)
        backend.run(
            store.begin_turn, run, [a_message(t, content=f"u{i}")], now() - timedelta(seconds=45)
        )
        backend.run(
            store.finish_turn,
            msgspec.structs.replace(run, status="completed"),
            [a_message(t, "assistant", f"a{i}")],
            [],
        )
    page, total = backend.run(lambda: store.history(t.org_id, t.id, offset=3, limit=4))
    assert total == 14
    assert [m.content for m in page] == ["a1", "u2", "a2", "u3"]
    page, _ = backend.run(lambda: store.history(t.org_id, t.id, offset=20, limit=4))
    assert page == []


def test_a_page_and_its_total_agree_while_messages_arrive(backend: Backend) -> None:
    # A reader beside a writer: every answer's total is its page's length (the whole
    # history fits one page), whenever a message lands. Read apart, the count could
    # take a message the page had not (a CI run saw total 2 beside one message).
    t = stored_thread(backend)
    store = backend.storage.conversations

    async def race() -> list[tuple[int, int]]:
        seen: list[tuple[int, int]] = []
        done = asyncio.Event()

        async def writer() -> None:
            for i in range(150):
                await store.add_message(a_message(t, content=f"m{i}"))
                await asyncio.sleep(0)  # the memory store's writes never wait by themselves
            done.set()

        async def reader() -> None:
            while not done.is_set():
                page, total = await store.history(t.org_id, t.id, offset=0, limit=1000)
                seen.append((len(page), total))
                await asyncio.sleep(0)

        await asyncio.gather(writer(), reader(), reader())
        return seen

    seen = backend.run(race)
    assert seen, "the readers read nothing"
    assert [s for s in seen if s[0] != s[1]] == []
    page, total = backend.run(lambda: store.history(t.org_id, t.id, offset=0, limit=1000))
    assert (len(page), total) == (150, 150)
    assert [m.content for m in page] == [f"m{i}" for i in range(150)]
    # past the last page: no messages, the total still told
    assert backend.run(lambda: store.history(t.org_id, t.id, offset=150, limit=5)) == ([], 150)
    empty = stored_thread(backend)
    assert backend.run(lambda: store.history(empty.org_id, empty.id, offset=0, limit=5)) == (
        [],
        0,
    )


def test_interrupt_stale_marks_only_stale_runs(backend: Backend) -> None:
    store = backend.storage.conversations
    old = stored_thread(backend)
    fresh = stored_thread(backend)
    backend.run(
        store.begin_turn,
        a_run(old, heartbeat_at=now() - timedelta(minutes=5)),
        [],
        now() - timedelta(hours=1),
    )
    backend.run(store.begin_turn, a_run(fresh), [], now() - timedelta(hours=1))
    assert backend.run(store.interrupt_stale, now() - timedelta(seconds=45), now()) >= 1
    latest_old = backend.run(store.latest_run, old.org_id, old.id)
    assert latest_old is not None
    assert latest_old.status == "interrupted"
    latest_fresh = backend.run(store.latest_run, fresh.org_id, fresh.id)
    assert latest_fresh is not None
    assert latest_fresh.status == "running"


def test_other_orgs_threads_are_not_found(backend: Backend) -> None:
    t = stored_thread(backend)
    other = backend.fresh_org()
    with pytest.raises(NotFound):
        backend.run(backend.storage.threads.get, other, t.id)
    assert backend.run(
        lambda: backend.storage.conversations.history(other, t.id, offset=0, limit=5)
    ) == ([], 0)


def test_heartbeats_refresh_only_the_named_running_runs(backend: Backend) -> None:
    store = backend.storage.conversations
    old = now() - timedelta(seconds=30)
    threads = [stored_thread(backend) for _ in range(3)]
    runs = [a_run(t, started_at=old, heartbeat_at=old) for t in threads]
    for run, t in zip(runs, threads, strict=True):
        backend.run(store.begin_turn, run, [a_message(t)], old - timedelta(seconds=1))
    finished = msgspec.structs.replace(runs[2], status="completed", finished_at=old)
    backend.run(store.finish_turn, finished, [], [])
    beat = now()
    named = [(r.org_id, r.id) for r in runs[1:]]  # the second (running), the third (done)
    named.append((threads[0].org_id + "-other", runs[0].id))  # wrong organization
    backend.run(store.heartbeat, named, beat)
    backend.run(store.heartbeat, [], beat)  # nothing to do
    latest = [backend.run(store.latest_run, t.org_id, t.id) for t in threads]
    assert [r.heartbeat_at if r else None for r in latest] == [old, beat, old]


def test_a_run_of_a_live_process_is_not_orphaned(backend: Backend) -> None:
    """Every run the fixture's storage begins is its own process's, which is alive."""
    t = stored_thread(backend)
    store = backend.storage.conversations
    run = a_run(t)
    backend.run(store.begin_turn, run, [a_message(t)], now() - timedelta(seconds=45))
    assert backend.run(store.interrupt_orphaned, t.org_id, run.id, now()) is False
    backend.run(store.interrupt_stale, now() - timedelta(hours=1), now())  # a sweep
    assert backend.run(store.running, t.org_id, t.id, now() - timedelta(seconds=45)) == run
    assert backend.run(store.interrupt_orphaned, t.org_id, uuid.uuid4(), now()) is False
    done = msgspec.structs.replace(run, status="completed", finished_at=now())
    backend.run(store.finish_turn, done, [], [])
    assert backend.run(store.interrupt_orphaned, t.org_id, run.id, now()) is False
    assert backend.run(store.latest_run, t.org_id, t.id) == done


@pytest.mark.postgres
# PostgreSQL only (not a skip on memory: memory storage lives in one process, so
# none of its runs is another process's; its answer, False, is tested above)
@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_a_run_whose_process_is_gone_is_interrupted_at_once(backend: Backend) -> None:
    """Another process begins runs, then ends (its lock goes with its connection):
    a stop frees its thread at once, and so does a sweep, heartbeats fresh or not."""
    assert isinstance(backend.storage, PostgresStorage)
    store = backend.storage.conversations
    other = PostgresStorage(backend.storage.conninfo, min_size=1, max_size=2)
    its_bus = PostgresStopBus(other.conninfo, other.pool, other.owner)
    backend.run(other.open)
    backend.run(its_bus.start)
    stopped, swept = stored_thread(backend), stored_thread(backend)
    runs = [a_run(stopped), a_run(swept)]
    try:
        for run, t in zip(runs, (stopped, swept), strict=True):
            backend.run(
                other.conversations.begin_turn, run, [a_message(t)], now() - timedelta(seconds=45)
            )
        # alive (in another process): left alone
        assert backend.run(store.interrupt_orphaned, stopped.org_id, runs[0].id, now()) is False
    finally:
        backend.run(its_bus.close)
        backend.run(other.close)
    # its server session ends (and drops the lock) a moment after the connection closes
    for _ in range(50):
        at = now()
        if backend.run(store.interrupt_orphaned, stopped.org_id, runs[0].id, at):
            break
        time.sleep(0.02)
    else:
        raise AssertionError("the run of the process that ended was never interrupted")
    assert backend.run(store.interrupt_orphaned, stopped.org_id, runs[0].id, at) is False
    latest = backend.run(store.latest_run, stopped.org_id, stopped.id)
    assert latest == msgspec.structs.replace(runs[0], status="interrupted", finished_at=at)
    page, _ = backend.run(lambda: store.history(stopped.org_id, stopped.id, offset=0, limit=5))
    assert [m.content for m in page] == ["hi"]  # the user's message stays
    # the thread is free: a new turn is not refused, though the dead run's beat is fresh
    backend.run(store.begin_turn, a_run(stopped), [], now() - timedelta(hours=1))
    assert backend.run(store.interrupt_stale, now() - timedelta(hours=1), now()) >= 1
    latest = backend.run(store.latest_run, swept.org_id, swept.id)
    assert latest is not None
    assert latest.status == "interrupted"
