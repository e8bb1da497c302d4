"""The pure rules of a code session's life (use_cases/code_sessions/transitions.py),
alone: each transition from each status, and the boundaries (a lease that runs
out at its instant, an expiry at exactly its limit)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from agentsvc_core.entities.code_session import (
    SESSION_STATUSES,
    CodeSession,
    Computer,
    SessionStatus,
    SessionUsage,
    SessionWork,
    Turn,
)
from agentsvc_core.use_cases.code_sessions import transitions as t

T0 = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)
LATER = T0 + timedelta(seconds=5)


def a_session(status: SessionStatus = "running", **work: object) -> CodeSession:
    w = SessionWork(
        model="local",
        preamble="",
        branch_prefix="b/",
        auto_create_pr=True,
        computer=Computer(),
        credential_sealed="sealed",
        trace_id="0" * 32,
    )
    return CodeSession(
        id=uuid.uuid4(),
        org_id="org",
        code_agent_id=uuid.uuid4(),
        status=status,
        title="t",
        prompt="p",
        repo_url="https://git.example/a.git",
        ref=None,
        branch=None,
        pr_url=None,
        usage=SessionUsage(),
        error=None,
        last_event_seq=3,
        archived=False,
        work=msgspec.structs.replace(w, **work),
        created_at=T0,
        updated_at=T0,
    )


ENDED = ("finished", "error", "cancelled", "expired")
LIVE = tuple(s for s in SESSION_STATUSES if s not in ENDED)


def test_moved_only_from_the_named_statuses() -> None:
    went = t.moved(a_session("pending"), "creating", LATER, frm=("pending",))
    assert went is not None
    s, events = went
    assert s.status == "creating"
    assert s.updated_at == LATER
    assert [(e.type, e.data) for e in events] == [("status", {"status": "creating"})]
    assert t.moved(a_session("running"), "creating", LATER, frm=("pending",)) is None


def test_running_stamps_its_start_once_and_waiting_its_wait() -> None:
    went = t.moved(a_session("creating"), "running", LATER, frm=("creating",))
    assert went is not None
    assert went[0].work.started_at == LATER
    again = t.moved(a_session("creating", started_at=T0), "running", LATER, frm=("creating",))
    assert again is not None
    assert again[0].work.started_at == T0
    waiting = t.moved(a_session("running"), "awaiting_input", LATER, frm=("running",))
    assert waiting is not None
    assert waiting[0].work.waiting_since == LATER


@pytest.mark.parametrize("status", LIVE)
def test_ended_ends_a_live_session_and_frees_it(status: SessionStatus) -> None:
    went = t.ended(
        a_session(status, inflight="c1", lease_owner="me", lease_until=LATER),
        "error",
        LATER,
        error="boom",
    )
    assert went is not None
    s, events = went
    assert (s.status, s.error) == ("error", "boom")
    assert s.work.ended_at == LATER
    assert s.work.inflight is None
    assert s.work.lease_owner is None
    assert s.work.lease_until is None
    assert events[-1].data == {"status": "error", "error": "boom"}


@pytest.mark.parametrize("status", ENDED)
def test_an_ended_session_changes_no_more(status: SessionStatus) -> None:
    s = a_session(status)
    assert t.ended(s, "cancelled", LATER) is None
    assert t.recorded(s, LATER, []) is None
    assert t.followed_up(s, "more", LATER) is None
    assert t.cancel_asked(s, LATER) is None


def test_recorded_adds_turns_and_usage() -> None:
    s = msgspec.structs.replace(
        a_session(), usage=SessionUsage(tokens=5, cost_usd=0.1, input_tokens=2)
    )
    turn = Turn(role="assistant", content="hi")
    went = t.recorded(
        s,
        LATER,
        [],
        turns=[turn],
        usage=SessionUsage(tokens=3, cost_usd=0.2, input_tokens=1, output_tokens=2),
        model_calls=1,
    )
    assert went is not None
    after = went[0]
    assert after.work.transcript == (turn,)
    assert after.work.model_calls == 1
    assert after.usage == SessionUsage(tokens=8, cost_usd=0.3, input_tokens=3, output_tokens=2)
    assert after.updated_at == LATER
    plain = t.recorded(s, LATER, [])
    assert plain is not None
    assert plain[0].usage == s.usage


def test_a_follow_up_is_queued_with_its_event() -> None:
    went = t.followed_up(a_session("running", queued=("a",)), "b", LATER)
    assert went is not None
    assert went[0].work.queued == ("a", "b")
    assert [(e.type, e.data) for e in went[1]] == [("message", {"role": "user", "content": "b"})]


@pytest.mark.parametrize("status", ["pending", "awaiting_input"])
def test_cancel_ends_at_once_a_session_no_job_works_on(status: SessionStatus) -> None:
    went = t.cancel_asked(a_session(status), LATER)
    assert went is not None
    assert went[0].status == "cancelled"


@pytest.mark.parametrize("status", ["creating", "running"])
def test_cancel_flags_a_session_a_job_works_on_once(status: SessionStatus) -> None:
    went = t.cancel_asked(a_session(status), LATER)
    assert went is not None
    assert went[0].status == status
    assert went[0].work.cancel_requested
    assert t.cancel_asked(went[0], LATER) is None


def test_waiting_unless_a_follow_up_is_queued() -> None:
    went = t.waiting(a_session("running"), LATER)
    assert went is not None
    assert went[0].status == "awaiting_input"
    assert t.waiting(a_session("running", queued=("x",)), LATER) is None
    assert t.waiting(a_session("creating"), LATER) is None


def test_expiry_at_exactly_its_limit() -> None:
    limit = timedelta(hours=1)
    s = a_session("awaiting_input", waiting_since=T0)
    assert t.expired(s, T0 + limit - timedelta(microseconds=1), limit) is None
    went = t.expired(s, T0 + limit, limit)
    assert went is not None
    assert went[0].status == "expired"
    assert went[0].error == "no answer within 3600 s"
    assert t.expired(a_session("running", waiting_since=T0), T0 + 2 * limit, limit) is None
    assert t.expired(a_session("awaiting_input"), T0 + 2 * limit, limit) is None


def test_a_lease_is_taken_renewed_and_refused_until_it_runs_out() -> None:
    free = a_session()
    went = t.leased(free, "me", T0, LATER)
    assert went is not None
    held = went[0]
    assert (held.work.lease_owner, held.work.lease_until) == ("me", LATER)
    renewed = t.leased(held, "me", T0, LATER + timedelta(seconds=1))
    assert renewed is not None
    assert renewed[0].work.lease_until == LATER + timedelta(seconds=1)
    assert t.leased(held, "other", LATER - timedelta(microseconds=1), LATER) is None
    taken = t.leased(held, "other", LATER, LATER + timedelta(seconds=9))
    assert taken is not None
    assert taken[0].work.lease_owner == "other"
    assert t.released(held, "other") is None
    released = t.released(held, "me")
    assert released is not None
    assert released[0].work.lease_owner is None
    assert released[0].work.lease_until is None


def test_archive() -> None:
    assert t.archived(a_session("running"), LATER) is None
    assert t.archived(a_session("creating"), LATER) is None
    went = t.archived(a_session("finished"), LATER)
    assert went is not None
    s, events = went
    assert s.archived
    assert s.work.credential_sealed is None
    assert s.work.sandbox_gone
    assert s.status == "finished"
    assert [e.type for e in events] == ["notice"]
    assert t.archived(s, LATER) is None
    waiting = t.archived(a_session("awaiting_input"), LATER)
    assert waiting is not None
    assert waiting[0].status == "cancelled"
    assert [e.type for e in waiting[1]] == ["status", "notice"]
