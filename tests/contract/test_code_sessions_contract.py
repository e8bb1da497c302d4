"""Code sessions: the memory and PostgreSQL adapters agree on the CodeSessionStore
contract (agentsvc_core/ports/code_sessions.py): a code agent's and a session's
fields round-trip (the job's record too), lists are ordered and paged, another
organization's id is not found, and a change writes the session and appends its
events atomically: numbered 1, 2, ... with no gap nor repeat however many
changes race, and nothing at all when the change answers None."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import msgspec
import pytest

from agentsvc_core.entities import StoredSpan, ToolCall
from agentsvc_core.entities.code_session import (
    CodeAgent,
    CodeSession,
    Computer,
    SessionUsage,
    SessionWork,
    Turn,
)
from agentsvc_core.errors import NotFound
from agentsvc_core.ports.code_sessions import NewEvent
from tests.contract.conftest import Backend, now


def a_code_agent(org: str, **over: object) -> CodeAgent:
    t = now()
    base = CodeAgent(
        id=uuid.uuid4(),
        org_id=org,
        name="fixer",
        model="local",
        repo_url="https://git.example/a.git",
        starting_ref="main",
        preamble="Be careful.",
        branch_prefix="bot/",
        auto_create_pr=True,
        git_credential_sealed="v1.k.sealed",
        computer=Computer(
            provider="local", memory_mb=512, network="allowlist", allowed_hosts=("pypi.org",)
        ),
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def a_session(org: str, agent_id: uuid.UUID, **over: object) -> CodeSession:
    t = now()
    work = SessionWork(
        model="local",
        preamble="p",
        branch_prefix="bot/",
        auto_create_pr=True,
        computer=Computer(),
        credential_sealed="v1.k.s",
        hashes={"a.py": "0" * 40},
        transcript=(
            Turn(role="user", content="fix"),
            Turn(
                role="assistant",
                content="",
                tool_calls=(ToolCall(id="c1", name="exec", arguments={"command": "ls"}),),
            ),
            Turn(role="tool", content="a.py", tool_call_id="c1"),
        ),
        lease_until=t,
        lease_owner="me",
        trace_id="ab" * 16,
        spans=(
            StoredSpan(
                span_id="1" * 16,
                parent_span_id=None,
                name="exec",
                kind="tool",
                status="ok",
                started_at=t,
                duration_ms=1.5,
            ),
        ),
    )
    base = CodeSession(
        id=uuid.uuid4(),
        org_id=org,
        code_agent_id=agent_id,
        status="pending",
        title="fix",
        prompt="fix it",
        repo_url="https://git.example/a.git",
        ref=None,
        branch=None,
        pr_url=None,
        usage=SessionUsage(tokens=3, cost_usd=0.5),
        error=None,
        last_event_seq=0,
        archived=False,
        work=work,
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def test_a_code_agent_round_trips_changes_and_goes(backend: Backend) -> None:
    store = backend.storage.code_sessions
    org = backend.fresh_org()
    t = now()
    second = backend.run(store.add_agent, a_code_agent(org, created_at=t + timedelta(seconds=1)))
    first = backend.run(store.add_agent, a_code_agent(org, created_at=t, repo_url=None))
    assert backend.run(store.get_agent, org, first.id) == first
    assert backend.run(store.agents, org) == [first, second]
    changed = backend.run(
        store.modify_agent,
        org,
        first.id,
        lambda a: msgspec.structs.replace(a, name="n", computer=Computer()),
    )
    assert backend.run(store.get_agent, org, first.id) == changed
    with pytest.raises(NotFound):
        backend.run(store.get_agent, backend.fresh_org(), first.id)
    with pytest.raises(NotFound):
        backend.run(store.modify_agent, backend.fresh_org(), first.id, lambda a: a)
    assert backend.run(store.delete_agent, backend.fresh_org(), first.id) is False
    assert backend.run(store.delete_agent, org, first.id) is True
    assert backend.run(store.delete_agent, org, first.id) is False
    assert backend.run(store.agents, org) == [second]


def test_a_session_round_trips_with_its_first_events(backend: Backend) -> None:
    store = backend.storage.code_sessions
    org = backend.fresh_org()
    session = a_session(org, uuid.uuid4())
    stored, events = backend.run(
        store.add_session,
        session,
        [NewEvent("status", {"status": "pending"}), NewEvent("message", {"x": [1, 2]})],
    )
    assert stored.last_event_seq == 2
    assert [(e.seq, e.type, e.data) for e in events] == [
        (1, "status", {"status": "pending"}),
        (2, "message", {"x": [1, 2]}),
    ]
    assert backend.run(store.get_session, org, session.id) == stored
    read = backend.run(lambda: store.events(org, session.id, after=0, limit=10))
    assert read == events
    assert backend.run(lambda: store.events(org, session.id, after=1, limit=10)) == events[1:]
    assert backend.run(lambda: store.events(org, session.id, after=0, limit=1)) == events[:1]
    stranger = backend.fresh_org()
    assert backend.run(lambda: store.events(stranger, session.id, after=0, limit=10)) == []
    with pytest.raises(NotFound):
        backend.run(store.get_session, backend.fresh_org(), session.id)


def test_a_change_writes_the_session_and_numbers_its_events(backend: Backend) -> None:
    store = backend.storage.code_sessions
    org = backend.fresh_org()
    session, _ = backend.run(
        store.add_session, a_session(org, uuid.uuid4()), [NewEvent("status", {})]
    )

    def running(s: CodeSession) -> tuple[CodeSession, list[NewEvent]]:
        return msgspec.structs.replace(s, status="running", branch="b", pr_url="u"), [
            NewEvent("status", {"status": "running"}),
            NewEvent("notice", {"text": "t"}),
        ]

    changed, events = backend.run(store.change, org, session.id, running)
    assert [e.seq for e in events] == [2, 3]
    assert changed.last_event_seq == 3
    assert backend.run(store.get_session, org, session.id) == changed
    same, none = backend.run(store.change, org, session.id, lambda s: None)
    assert same == changed
    assert none == []
    with pytest.raises(NotFound):
        backend.run(store.change, backend.fresh_org(), session.id, running)


def test_racing_changes_lose_nothing(backend: Backend) -> None:
    store = backend.storage.code_sessions
    org = backend.fresh_org()
    session, _ = backend.run(store.add_session, a_session(org, uuid.uuid4()), [])

    def one(s: CodeSession) -> tuple[CodeSession, list[NewEvent]]:
        queued = (*s.work.queued, "m")
        return msgspec.structs.replace(s, work=msgspec.structs.replace(s.work, queued=queued)), [
            NewEvent("message", {})
        ]

    async def race() -> None:
        await asyncio.gather(*(store.change(org, session.id, one) for _ in range(8)))

    backend.run(race)
    final = backend.run(store.get_session, org, session.id)
    assert len(final.work.queued) == 8
    assert final.last_event_seq == 8
    seqs = [e.seq for e in backend.run(lambda: store.events(org, session.id, after=0, limit=100))]
    assert seqs == list(range(1, 9))


def test_sessions_page_newest_first_and_by_code_agent(backend: Backend) -> None:
    store = backend.storage.code_sessions
    org = backend.fresh_org()
    agent, other = uuid.uuid4(), uuid.uuid4()
    t = now()
    made = [
        backend.run(
            store.add_session,
            a_session(org, agent if i != 1 else other, created_at=t + timedelta(seconds=i)),
            [],
        )[0]
        for i in range(3)
    ]
    rows = backend.run(lambda: store.sessions(org, before=None, limit=2))
    assert [r.id for r in rows] == [made[2].id, made[1].id]
    rows = backend.run(
        lambda: store.sessions(org, before=(made[1].created_at, made[1].id), limit=5)
    )
    assert [r.id for r in rows] == [made[0].id]
    rows = backend.run(lambda: store.sessions(org, before=None, limit=5, code_agent_id=agent))
    assert [r.id for r in rows] == [made[2].id, made[0].id]
    stranger = backend.fresh_org()
    assert backend.run(lambda: store.sessions(stranger, before=None, limit=5)) == []
