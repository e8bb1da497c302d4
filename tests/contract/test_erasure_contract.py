"""Deletion, erasure and retention (``ErasureStore``) on both adapters: a thread's
erasure removes what holds its text and scrubs what stays, and touches nothing
of another thread; a user's threads, memories and places; the retention and the
threads past it."""

from __future__ import annotations

import uuid
from datetime import timedelta

import msgspec
import pytest

from agentsvc_core.entities import (
    Participant,
    StoredSpan,
    Thread,
    TraceEvaluation,
    TraceRecord,
    TraceSummary,
    Usage,
    UsageRecord,
)
from agentsvc_core.entities.memory import Memory
from agentsvc_core.entities.plan import Plan
from agentsvc_core.entities.published_chat import VisitorThread
from agentsvc_core.entities.runner import NewRunEvent, StepRun
from agentsvc_core.errors import NotFound, ThreadBusy
from agentsvc_core.ports import EventBatch
from agentsvc_core.ports.idempotency import IdempotencyClaim
from agentsvc_core.ports.knowledge import DocumentFilter
from tests.contract.conftest import Backend, now
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_message, a_run, a_thread
from tests.contract.test_knowledge_contract import a_document
from tests.contract.test_runners_contract import run_in

MARK = "zebra-7f3c"  # the text that must go
_BUSY = now() - timedelta(seconds=45)  # replies with an older heartbeat are dead


class _Place(msgspec.Struct, kw_only=True):
    org: str
    agent: uuid.UUID
    thread: Thread
    run_id: uuid.UUID
    trace_id: str
    key: str
    runner_run: uuid.UUID
    step_run: uuid.UUID
    step_trace_id: str  # the trace of the runner run whose step talked in the thread


def _memory(org: str, agent: uuid.UUID, scope: str, scope_id: str | None, text: str) -> Memory:
    t = now()
    return Memory(
        id=uuid.uuid4(),
        org_id=org,
        agent_id=agent,
        scope=scope,  # type: ignore[arg-type]
        scope_id=scope_id,
        content=text,
        created_at=t,
        updated_at=t,
    )


def _trace(th: Thread, run_id: uuid.UUID) -> TraceRecord:
    at = now()
    trace_id = uuid.uuid4().hex
    span = StoredSpan(
        span_id=uuid.uuid4().hex[:16],
        parent_span_id=None,
        name="chat fake",
        kind="llm",
        status="error",
        started_at=at,
        duration_ms=5.0,
        attributes={"gen_ai.request.model": "fake-model"},
        error=f"failed on {MARK}",
        input={"messages": [{"role": "user", "content": MARK}]},
        output=f"the answer about {MARK}",
        model="fake-model",
        input_tokens=7,
        output_tokens=3,
        cost_usd=0.25,
    )
    summary = TraceSummary(
        id=trace_id,
        org_id=th.org_id,
        kind="agent_turn",
        name="agent",
        status="ok",
        run_status="completed",
        started_at=at,
        ended_at=at,
        duration_ms=5,
        agent_id=th.agent_id,
        thread_id=th.id,
        run_id=run_id,
        input_tokens=7,
        output_tokens=3,
        cost_usd=0.25,
        model_calls=1,
    )
    evaluation = TraceEvaluation(
        span_id=span.span_id, name="check", source="heuristic", detail=f"saw {MARK}"
    )
    return TraceRecord(
        summary=summary,
        root_span_id=span.span_id,
        spans=[span],
        evaluations=[evaluation],
        keep_until=at + timedelta(days=30),
    )


def _a_thread_with_everything(backend: Backend, org: str, agent: uuid.UUID, user: str) -> _Place:
    s = backend.storage
    th = backend.run(s.threads.add, a_thread(org, agent, created_by=user, kind="multiplayer"))
    backend.run(
        s.threads.put_participant,
        Participant(
            org_id=org,
            thread_id=th.id,
            user_id="bob",
            display_name=None,
            role="member",
            added_at=now(),
        ),
    )
    run = a_run(th)
    key = f"key-{uuid.uuid4().hex[:8]}"
    claim = IdempotencyClaim(
        key=key, fingerprint=b"f" * 32, at=now(), expires_at=now() + timedelta(days=1)
    )
    backend.run(
        s.conversations.begin_turn,
        run,
        [a_message(th, content=f"tell me about {MARK}", run_id=run.id)],
        now() - timedelta(seconds=45),
        None,
        claim,
    )
    usage = UsageRecord(
        id=uuid.uuid4(),
        org_id=org,
        agent_id=agent,
        thread_id=th.id,
        run_id=run.id,
        message_id=None,
        provider="fake",
        model="fake-model",
        usage=Usage(input_tokens=7, output_tokens=3),
        key_source="platform",
        metadata={},
        created_at=now(),
        cost_usd=0.25,
    )
    trace = _trace(th, run.id)
    events = EventBatch(
        first=0,
        count=1,
        data=f'[["token", "{MARK}"]]'.encode(),
        keep_until=now() + timedelta(hours=1),
    )
    done = msgspec.structs.replace(run, status="completed", finished_at=now())
    backend.run(
        s.conversations.finish_turn,
        done,
        [a_message(th, "assistant", f"{MARK} it is", run_id=run.id)],
        [usage],
        events,
        trace,
    )
    backend.run(s.memories.save, _memory(org, agent, "thread", str(th.id), f"likes {MARK}"), 100)
    now_ = now()
    plan = Plan(
        id=uuid.uuid4(), org_id=org, thread_id=th.id, title=MARK, created_at=now_, updated_at=now_
    )
    backend.run(s.plans.add, plan)
    doc = a_document(org, MARK.encode(), scope="thread", agent_id=agent, thread_id=th.id)
    backend.run(s.knowledge.add, doc, MARK.encode())
    # a scheduled task's run on the thread, and a runner run whose agent step talked there
    own = run_in(org, agent_id=agent, thread_id=th.id, status="succeeded", output={"text": MARK})
    backend.run(s.runners.add_run, own)
    finished = {"status": "succeeded", "output": {"text": MARK}, "error": None}
    backend.run(s.runners.save_run, own, [NewRunEvent("run.finished", finished, now())])
    step = run_in(
        org,
        agent_id=agent,
        status="succeeded",
        output={"text": MARK},
        steps=(
            StepRun(step_id="s1", status="succeeded", output=MARK, thread_id=th.id),
            StepRun(step_id="s2", status="succeeded", output="kept"),
        ),
    )
    # that run's own trace: its thread is the run's (none here), its step's span
    # holds what the step said in the thread
    runner_trace = _trace(th, step.id)
    runner_trace = msgspec.structs.replace(
        runner_trace,
        summary=msgspec.structs.replace(runner_trace.summary, kind="runner_run", thread_id=None),
    )
    step = msgspec.structs.replace(step, trace_id=runner_trace.summary.id)
    backend.run(s.runners.add_run, step)
    told = [
        NewRunEvent(
            "step.finished", {"step_id": "s1", "thread_id": str(th.id), "output": MARK}, now_
        ),
        NewRunEvent(
            "step.failed", {"step_id": "s2", "thread_id": None, "output": 1, "error": "no"}, now_
        ),
        NewRunEvent("run.finished", finished, now_),
    ]
    backend.run(s.runners.save_run, step, told)
    backend.run(s.traces.add_trace, runner_trace)
    return _Place(
        org=org,
        agent=agent,
        thread=th,
        run_id=run.id,
        trace_id=trace.summary.id,
        key=key,
        runner_run=own.id,
        step_run=step.id,
        step_trace_id=runner_trace.summary.id,
    )


def _org_with_agent(backend: Backend) -> tuple[str, uuid.UUID]:
    org = backend.fresh_org()
    agent = agent_in(org)
    backend.run(backend.storage.agents.add, agent)
    return org, agent.id


def test_a_thread_erasure_removes_its_text_and_keeps_its_costs(backend: Backend) -> None:
    s = backend.storage
    org, agent = _org_with_agent(backend)
    gone = _a_thread_with_everything(backend, org, agent, "alice")
    kept = _a_thread_with_everything(backend, org, agent, "alice")

    assert backend.run(s.erasure.erase_thread, org, gone.thread.id, _BUSY) is True
    assert backend.run(s.erasure.erase_thread, org, gone.thread.id, _BUSY) is False  # nothing left

    with pytest.raises(NotFound):
        backend.run(s.threads.get, org, gone.thread.id)
    assert backend.run(s.threads.participants, org, gone.thread.id) == []
    assert backend.run(
        lambda: s.conversations.history(org, gone.thread.id, offset=0, limit=50)
    ) == ([], 0)
    assert backend.run(s.streams.stream, org, gone.run_id, 0) is None
    assert backend.run(s.idempotency.find, org, gone.key, now()) is None
    assert backend.run(s.plans.for_thread, org, gone.thread.id) == []
    docs = backend.run(s.knowledge.list_all, org, DocumentFilter(thread_id=gone.thread.id))
    assert docs == []
    left = backend.run(
        lambda: s.memories.page(
            org, agent, scopes=[("thread", str(gone.thread.id))], status=None, before=None, limit=10
        )
    )
    assert left == []
    # the trace keeps its span, tokens and cost, not its text
    found = backend.run(s.traces.get_trace, org, gone.trace_id)
    assert found is not None
    summary, spans, evaluations = found
    assert summary.cost_usd == 0.25
    assert summary.input_tokens == 7
    assert [(sp.name, sp.model, sp.cost_usd, sp.status) for sp in spans] == [
        ("chat fake", "fake-model", 0.25, "error")
    ]
    assert MARK not in msgspec.json.encode([spans, evaluations]).decode()
    # usage records (costs) stay
    assert [u.cost_usd for u in backend.run(s.conversations.usage, org, gone.thread.id)] == [0.25]
    # runner runs keep their status, without the thread's text
    own = backend.run(s.runners.get_run, org, gone.runner_run)
    assert own.status == "succeeded"
    assert own.output is None
    step = backend.run(s.runners.get_run, org, gone.step_run)
    assert step.output is None
    assert [st.output for st in step.steps] == [None, "kept"]
    # and their events keep what the runs keep
    own_events = backend.run(lambda: s.runners.run_events(org, gone.runner_run, after=0, limit=9))
    assert [e.data for e in own_events] == [{"status": "succeeded", "output": None, "error": None}]
    events = backend.run(lambda: s.runners.run_events(org, gone.step_run, after=0, limit=9))
    assert [(e.type, e.data.get("output"), e.data.get("error")) for e in events] == [
        ("step.finished", None, None),
        ("step.failed", 1, "no"),
        ("run.finished", None, None),
    ]
    # and that run's own trace keeps its spans, not their text
    runner_trace = backend.run(s.traces.get_trace, org, gone.step_trace_id)
    assert runner_trace is not None
    assert [sp.cost_usd for sp in runner_trace[1]] == [0.25]
    assert MARK not in msgspec.json.encode(runner_trace[1:]).decode()

    # the other thread is whole
    assert backend.run(s.threads.get, org, kept.thread.id).id == kept.thread.id
    _, total = backend.run(lambda: s.conversations.history(org, kept.thread.id, offset=0, limit=50))
    assert total == 2
    assert backend.run(s.idempotency.find, org, kept.key, now()) is not None
    assert backend.run(s.streams.stream, org, kept.run_id, 0) is not None
    other = backend.run(s.traces.get_trace, org, kept.trace_id)
    assert other is not None
    assert MARK in msgspec.json.encode(other[1]).decode()
    assert backend.run(s.runners.get_run, org, kept.runner_run).output == {"text": MARK}
    for run_id in (kept.runner_run, kept.step_run):
        told = backend.run(lambda r=run_id: s.runners.run_events(org, r, after=0, limit=9))
        assert MARK in msgspec.json.encode(told).decode()
    kept_runner_trace = backend.run(s.traces.get_trace, org, kept.step_trace_id)
    assert kept_runner_trace is not None
    assert MARK in msgspec.json.encode(kept_runner_trace[1]).decode()
    assert len(backend.run(s.plans.for_thread, org, kept.thread.id)) == 1


def test_another_organization_cannot_erase_a_thread(backend: Backend) -> None:
    s = backend.storage
    org, agent = _org_with_agent(backend)
    place = _a_thread_with_everything(backend, org, agent, "alice")
    stranger = backend.fresh_org()
    assert backend.run(s.erasure.erase_thread, stranger, place.thread.id, _BUSY) is False
    assert backend.run(s.threads.get, org, place.thread.id).id == place.thread.id
    found = backend.run(s.traces.get_trace, org, place.trace_id)
    assert found is not None
    assert MARK in msgspec.json.encode(found[1]).decode()


def test_a_users_threads_memories_and_places(backend: Backend) -> None:
    s = backend.storage
    org, agent = _org_with_agent(backend)
    own = backend.run(s.threads.add, a_thread(org, agent, created_by="carol"))
    other = backend.run(s.threads.add, a_thread(org, agent, created_by="dave", kind="multiplayer"))
    visited = backend.run(s.threads.add, a_thread(org, agent))
    backend.run(
        s.publishing.add_visitor_thread,
        VisitorThread(
            org_id=org,
            thread_id=visited.id,
            agent_id=agent,
            visitor_id="carol",
            identified=True,
            created_at=visited.created_at,
        ),
    )
    backend.run(
        s.threads.put_participant,
        Participant(
            org_id=org,
            thread_id=other.id,
            user_id="carol",
            display_name=None,
            role="member",
            added_at=now(),
        ),
    )
    for text in ("one", "two"):
        backend.run(s.memories.save, _memory(org, agent, "user", "carol", text), 100)
    backend.run(s.memories.save, _memory(org, agent, "user", "dave", "three"), 100)
    stranger = backend.fresh_org()

    found = backend.run(s.erasure.user_threads, org, "carol")
    assert [(t.thread_id, t.visitor) for t in found] == [(own.id, False), (visited.id, True)]
    assert backend.run(s.erasure.user_threads, stranger, "carol") == []
    assert sorted(m.content for m in backend.run(s.erasure.user_memories, org, "carol")) == [
        "one",
        "two",
    ]
    assert backend.run(s.erasure.delete_user_memories, stranger, "carol") == 0
    assert backend.run(s.erasure.delete_user_memories, org, "carol") == 2
    assert backend.run(s.erasure.delete_user_memories, org, "carol") == 0
    assert [m.content for m in backend.run(s.erasure.user_memories, org, "dave")] == ["three"]
    assert backend.run(s.erasure.leave_threads, org, "carol") == 1
    assert backend.run(s.erasure.leave_threads, org, "carol") == 0
    assert backend.run(s.threads.participants, org, other.id) == []


def test_the_retention_and_the_threads_past_it(backend: Backend) -> None:
    s = backend.storage
    org, agent = _org_with_agent(backend)
    assert backend.run(s.erasure.retention_days, org) is None
    backend.run(s.erasure.set_retention_days, org, 30)
    backend.run(s.erasure.set_retention_days, org, 7)
    assert backend.run(s.erasure.retention_days, org) == 7
    long_ago = now() - timedelta(days=400)
    old = backend.run(s.threads.add, a_thread(org, agent, created_at=long_ago, updated_at=long_ago))
    # an old thread with a recent message is touched
    talked = backend.run(
        s.threads.add,
        a_thread(org, agent, created_at=long_ago - timedelta(seconds=1), updated_at=long_ago),
    )
    backend.run(s.conversations.add_message, a_message(talked, content="still here"))
    backend.run(s.threads.add, a_thread(org, agent))  # new

    later = now() + timedelta(days=3650 * 2)  # a time far enough for every organization
    stale = backend.run(s.erasure.stale_threads, now(), 1000)
    mine = [t.thread_id for t in stale if t.org_id == org]
    assert mine == [old.id]
    assert all(t.org_id != org or t.thread_id == old.id for t in stale)
    everything = [
        t.thread_id for t in backend.run(s.erasure.stale_threads, later, 100_000) if t.org_id == org
    ]
    assert set(everything) == {old.id, talked.id} | {
        t.id
        for t in backend.run(lambda: s.threads.list_for_agent(org, agent, before=None, limit=10))
    }
    backend.run(s.erasure.set_retention_days, org, None)
    assert backend.run(s.erasure.retention_days, org) is None
    stale = backend.run(s.erasure.stale_threads, later, 100_000)
    assert all(t.org_id != org for t in stale)


def test_a_running_reply_holds_its_thread_a_dead_one_does_not(backend: Backend) -> None:
    s = backend.storage
    org, agent = _org_with_agent(backend)
    th = backend.run(s.threads.add, a_thread(org, agent))
    run = a_run(th)  # running, its heartbeat now
    backend.run(s.conversations.begin_turn, run, [a_message(th)], now() - timedelta(seconds=45))
    with pytest.raises(ThreadBusy):
        backend.run(s.erasure.erase_thread, org, th.id, now() - timedelta(seconds=45))
    assert backend.run(s.threads.get, org, th.id).id == th.id  # nothing changed
    _, total = backend.run(lambda: s.conversations.history(org, th.id, offset=0, limit=5))
    assert total == 1
    # taken for dead (its heartbeat older than the bound): the erasure goes ahead
    assert backend.run(s.erasure.erase_thread, org, th.id, now() + timedelta(seconds=1)) is True
    with pytest.raises(NotFound):
        backend.run(s.threads.get, org, th.id)
