"""The code session job (use_cases/code_sessions/engine.py) in detail, over the
world of tests/unit/code_sessions_world.py: what a busy or missing session's job
answers, what a defect does, what each tool call leaves on the timeline and in
the trace, the expiry job it queues, and the lease it holds and gives back."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID, uuid4

import msgspec
import pytest

from agentsvc_core.entities.code_session import CodeSession
from agentsvc_core.errors import NotFound, Unavailable
from agentsvc_core.ports.jobs import Again
from agentsvc_core.use_cases.code_sessions import EngineSettings
from agentsvc_core.use_cases.code_sessions.engine import DEFECT
from tests.unit.code_sessions_world import EXPIRE_JOB, World, call, step, world
from tests.unit.turn_world import HANG, WHO


def payload_of(session_id: object) -> bytes:
    return msgspec.json.encode({"org_id": WHO.org_id, "session_id": str(session_id)})


async def test_a_job_of_a_session_that_is_gone_does_nothing() -> None:
    w = world()
    assert await w.engine.run(payload_of(uuid4())) is None
    assert await w.engine.expire(payload_of(uuid4())) is None


async def test_a_job_meeting_another_jobs_lease_waits_two_seconds() -> None:
    w = world(step("done"))
    s = await w.start()
    until = w.clock.now() + timedelta(seconds=60)
    await w.store.change(
        WHO.org_id,
        s.id,
        lambda x: (
            msgspec.structs.replace(
                x, work=msgspec.structs.replace(x.work, lease_owner="other", lease_until=until)
            ),
            [],
        ),
    )
    answer = await w.engine.run(payload_of(s.id))
    assert isinstance(answer, Again)
    assert answer.delay_s == 2.0
    s = await w.get(s.id)
    assert s.status == "pending"
    assert s.work.lease_owner == "other"  # not released by the job that did not hold it


async def test_the_lease_is_given_back_when_the_job_ends() -> None:
    w = world(step(call("read_file", "r1", path="README.md"), call("ask_user", question="?")))
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "awaiting_input"
    assert s.work.inflight is None  # the read's result was recorded
    assert s.work.lease_owner is None
    assert s.work.lease_until is None


async def test_a_defect_ends_the_session_with_a_plain_error_and_its_trace(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world([RuntimeError("a bug")])
    s = await w.start()
    assert await w.drain() == [None]
    # the operator's log names the session and keeps the traceback
    [logged] = [r for r in caplog.records if r.levelname == "ERROR"]
    assert logged.getMessage() == f"code session {s.id} failed"
    assert logged.exc_info is not None
    assert str(logged.exc_info[1]) == "a bug"
    s = await w.get(s.id)
    assert s.status == "error"
    assert s.error == DEFECT
    assert s.work.ended_at == w.clock.now()
    assert s.updated_at == w.clock.now()
    assert s.work.lease_owner is None
    assert ("stop", s.work.sandbox_ref) in w.sandbox.calls
    got = await w.traces.get_trace(WHO.org_id, s.work.trace_id)
    assert got is not None
    assert got[0].status == "error"
    [ended] = w.published.events
    assert (ended.type, ended.key) == ("code_session.finished", str(s.id))
    assert ended.org_id == WHO.org_id
    assert ended.data["status"] == "error"
    assert ended.data["error"] == DEFECT
    assert ended.data["session_id"] == str(s.id)


async def test_tool_results_on_the_timeline_and_in_the_trace() -> None:
    long = "x" * 5000
    w = world(
        step(
            call("write_file", "w1", path="big.txt", content=long),
            call("read_file", "r1", path="big.txt"),
            call("read_file", "r2", path="missing.txt"),
            call("exec", "e1", command="echo hi"),
        ),
        step("done"),
    )
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    results = {e.data["call_id"]: e.data for e in await w.events(s.id) if e.type == "tool_result"}
    assert set(results) == {"w1", "r1", "r2"}  # exec's result is its command event
    assert results["r1"]["name"] == "read_file"
    assert results["r1"]["output"] == long[:4000]
    assert results["r1"]["is_error"] is False
    assert results["r2"]["is_error"] is True
    assert results["r2"]["output"].startswith("error:")
    tool_turns = {t.tool_call_id: t.content for t in s.work.transcript if t.role == "tool"}
    assert tool_turns["r1"] == long  # the model reads it whole
    spans = {x.name: x for x in s.work.spans if x.kind == "tool"}
    assert spans["exec"].status == "ok"
    assert spans["exec"].attributes == {"gen_ai.tool.name": "exec"}
    assert spans["exec"].input == {"command": "echo hi"}
    reads = [x for x in s.work.spans if x.name == "read_file"]
    assert [x.status for x in reads] == ["ok", "error"]
    assert reads[0].output == long[:2000]
    assert s.work.inflight is None


async def test_two_follow_ups_to_a_question_one_answers_the_next_goes_to_the_model() -> None:
    w = world(step(call("ask_user", question="Which?")), step("Answered."), step("More."))
    s = await w.start()
    await w.drain()
    w.jobs.queued.clear()
    await w.sessions.send(WHO, s.id, "app.py")
    await w.sessions.send(WHO, s.id, "and the README")
    w.clock.advance(5)
    await w.drain(limit=1)
    s = await w.get(s.id)
    assert s.updated_at == w.clock.now()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert s.work.queued == ()
    assert len(w.model.requests) == 3
    answer = w.model.requests[1].messages[-1]
    assert (answer.role, answer.content) == ("tool", "app.py")
    assert answer.tool_call_id == "c-ask_user"
    follow = w.model.requests[2].messages[-1]
    assert (follow.role, follow.content) == ("user", "and the README")


async def test_waiting_queues_its_expiry_keyed_by_the_last_event() -> None:
    w = world(
        step(call("ask_user", question="?")),
        settings=EngineSettings(expire_after=timedelta(minutes=30)),
    )
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    [(kind, payload, key)] = w.jobs.queued
    assert kind == EXPIRE_JOB
    assert key == f"code-session-expire:{s.id}:{s.last_event_seq}"
    assert w.jobs.delays[-1] == 1800
    assert msgspec.json.decode(payload) == {"org_id": WHO.org_id, "session_id": str(s.id)}


async def test_an_expired_session_stops_its_sandbox_and_stores_its_trace() -> None:
    w = world(
        step(call("ask_user", question="?")),
        settings=EngineSettings(expire_after=timedelta(hours=1), trace_retention=timedelta(days=2)),
    )
    s = await w.start()
    await w.drain()
    [(_kind, payload, _)] = w.jobs.queued
    w.sandbox.calls.clear()
    w.clock.advance(3600)
    assert await w.engine.expire(payload) is None
    s = await w.get(s.id)
    assert s.status == "expired"
    assert ("stop", s.work.sandbox_ref) in w.sandbox.calls
    stored = w.traces._traces[(WHO.org_id, s.work.trace_id)]
    assert [r.keep_until for r in stored] == [w.clock.now() + timedelta(days=2)]
    # a second expiry job changes nothing
    w.sandbox.calls.clear()
    assert await w.engine.expire(payload) is None
    assert w.sandbox.calls == []


async def test_the_lease_is_renewed_while_the_job_works() -> None:
    w = world(
        step(call("exec", command="sleep 0.6")),
        step("done"),
        settings=EngineSettings(stale_after=timedelta(seconds=0.2)),
    )
    s = await w.start()
    job = w.run_later()
    for _ in range(200):
        s = await w.get(s.id)
        if s.work.inflight is not None:
            break
        await asyncio.sleep(0.02)
    taken, owner = s.work.lease_until, s.work.lease_owner
    assert taken is not None
    assert owner is not None
    w.clock.advance(100)
    await asyncio.sleep(0.3)
    s = await w.get(s.id)
    assert s.work.lease_until is not None
    assert s.work.lease_until == w.clock.now() + timedelta(seconds=0.2)
    # renewed for the same job: another job for the session still waits
    assert s.work.lease_owner == owner
    assert await w.engine.run(payload_of(s.id)) == Again(2.0)
    assert await asyncio.wait_for(job, 10) is None
    assert (await w.get(s.id)).status == "finished"


async def test_a_process_works_on_max_running_sessions_and_the_next_job_comes_back() -> None:
    w = world(
        step(call("exec", command="sleep 0.6")),
        step("done"),
        step("done"),
        settings=EngineSettings(max_running=1),
    )
    first = await w.start()
    second = await w.start("another")
    job = w.run_later()
    for _ in range(200):
        if (await w.get(first.id)).work.inflight is not None:
            break
        await asyncio.sleep(0.02)
    answer = await w.engine.run(payload_of(second.id))
    assert answer == Again(5.0)
    s = await w.get(second.id)
    assert s.status == "pending"  # untouched: no lease taken, nothing recorded
    assert s.work.lease_owner is None
    assert await asyncio.wait_for(job, 10) is None
    assert (await w.get(first.id)).status == "finished"
    # the seat is free again: the second session runs
    assert await w.engine.run(payload_of(second.id)) is None
    assert (await w.get(second.id)).status == "finished"


async def inflight(w: World, session_id: UUID) -> None:
    for _ in range(200):
        if (await w.get(session_id)).work.inflight is not None:
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the session's command never started")


async def test_each_session_holds_one_seat_until_it_is_done() -> None:
    # two seats: two sessions running commands hold both, a third comes back
    w = world(
        step(call("exec", command="sleep 0.6")),
        step(call("exec", command="sleep 0.6")),
        step("done"),
        step("done"),
        step("done"),
        settings=EngineSettings(max_running=2),
    )
    first, second, third = await w.start(), await w.start("b"), await w.start("c")
    jobs = [w.run_later(), w.run_later()]
    await inflight(w, first.id)
    await inflight(w, second.id)
    assert await w.engine.run(payload_of(third.id)) == Again(5.0)
    assert await asyncio.wait_for(asyncio.gather(*jobs), 10) == [None, None]
    assert await w.engine.run(payload_of(third.id)) is None
    assert (await w.get(third.id)).status == "finished"


async def test_a_finished_session_gives_back_its_one_seat_only() -> None:
    # one seat: after a session ran to its end, two at once still share one seat
    w = world(
        step("done"),
        step(call("exec", command="sleep 0.6")),
        step("done"),
        settings=EngineSettings(max_running=1),
    )
    done = await w.start()
    assert await w.engine.run(w.jobs.queued.pop(0)[1]) is None
    assert (await w.get(done.id)).status == "finished"
    first, second = await w.start("b"), await w.start("c")
    job = w.run_later()
    await inflight(w, first.id)
    assert await w.engine.run(payload_of(second.id)) == Again(5.0)
    assert await asyncio.wait_for(job, 10) is None


async def test_a_sandbox_that_cannot_stop_while_the_session_waits_does_not_fail_it() -> None:
    w = world(step(call("ask_user", question="?")))

    async def refuse(ref: str, spec: object) -> None:
        raise Unavailable("the sandbox host is away")

    w.sandbox.stop = refuse  # type: ignore[method-assign]
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "awaiting_input"
    assert [k for k, _, _ in w.jobs.queued] == [EXPIRE_JOB]


async def test_a_transient_failure_is_stamped_with_its_time() -> None:
    w = world([Unavailable("blip")], step("done"))
    s = await w.start()
    w.clock.advance(7)
    answer = await w.engine.run(w.jobs.queued.pop(0)[1])
    assert isinstance(answer, Again)
    s = await w.get(s.id)
    assert s.work.attempts == 1
    assert s.updated_at == w.clock.now()


async def test_a_cancelled_session_is_stamped_stopped_and_traced() -> None:
    w = world(step(call("exec", command="sleep 0.3")), step("never"))
    s = await w.start()
    await w.store.change(
        WHO.org_id,
        s.id,
        lambda x: (
            msgspec.structs.replace(x, work=msgspec.structs.replace(x.work, cancel_requested=True)),
            [],
        ),
    )
    w.clock.advance(3)
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "cancelled"
    assert s.work.ended_at == w.clock.now()
    assert await w.traces.get_trace(WHO.org_id, s.work.trace_id) is not None


async def test_an_answer_to_ask_user_is_given_once() -> None:
    w = world(step(call("ask_user", question="which file?")), step("done"))
    s = await w.start()
    await w.drain()
    w.jobs.queued.clear()
    await w.sessions.send(WHO, s.id, "app.py")
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert len(w.model.requests) == 2
    last = w.model.requests[-1].messages
    assert [(m.role, m.content) for m in last[1:]] == [("assistant", ""), ("tool", "app.py")]
    assert s.work.queued == ()


async def test_an_ended_session_forgets_its_checkout_and_a_failed_stop_does_not_fail_it() -> None:
    w = world(step("done"))

    async def stop(ref: str, spec: object) -> None:
        raise Unavailable("the provider is away")

    w.sandbox.stop = stop  # type: ignore[method-assign]
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert s.id not in w.engine._snapshots
    assert await w.traces.get_trace(WHO.org_id, s.work.trace_id) is not None


async def test_a_command_longer_than_a_cancel_check_runs_to_its_end() -> None:
    w = world(step(call("exec", command="sleep 0.7; echo finished")), step("done"))
    s = await w.start()
    await w.drain()
    [command] = [e for e in await w.events(s.id) if e.type == "command"]
    assert command.data["exit_code"] == 0
    assert "finished" in command.data["output"]
    assert not command.data.get("cancelled")
    assert (await w.get(s.id)).status == "finished"


async def test_a_tool_call_is_recorded_as_begun_stamped_before_it_runs() -> None:
    """The write that marks a call in flight (what a restart reads to tell an
    interrupted call) is stamped with the time the call began."""
    w = world(step(call("read_file", "r1", path="README.md")), step("done"))
    seen: list[CodeSession] = []
    read = w.sandbox.read_file

    async def reading(ref: str, path: str, *, max_bytes: int = 1_000_000) -> bytes:
        seen.append(await w.get(s.id))
        w.clock.advance(30)  # the call takes a while
        return await read(ref, path, max_bytes=max_bytes)

    w.sandbox.read_file = reading  # type: ignore[method-assign]
    s = await w.start()
    begun = w.clock.now()
    await w.drain()
    [during] = [x for x in seen if x.work.inflight == "r1"]  # read while in flight
    assert during.updated_at == begun


async def test_the_answer_to_a_question_is_stamped_when_it_is_given() -> None:
    w = world(step(call("ask_user", question="Which?")), [HANG])
    s = await w.start()
    await w.drain()
    w.jobs.queued.clear()  # the expiry job
    await w.sessions.send(WHO, s.id, "app.py")
    w.clock.advance(5)
    job = w.run_later()
    await asyncio.wait_for(w.model.waiting.wait(), 10)  # the model reads the answer
    s = await w.get(s.id)
    assert s.work.transcript[-1].content == "app.py"
    assert s.updated_at == w.clock.now()
    job.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await job


@pytest.mark.parametrize(
    "work",
    [
        {"provider": "local", "sandbox_ref": "sbx-gone", "sandbox_gone": True},
        {"provider": "local", "sandbox_ref": None},
    ],
)
async def test_a_late_job_of_an_ended_session_stops_only_a_sandbox_it_still_has(
    work: dict[str, object],
) -> None:
    w = world(step("done"))
    s = await w.start()
    await w.store.change(
        WHO.org_id,
        s.id,
        lambda x: (
            msgspec.structs.replace(
                x, status="cancelled", work=msgspec.structs.replace(x.work, **work)
            ),
            [],
        ),
    )
    assert await w.engine.run(payload_of(s.id)) is None
    assert w.sandbox.calls == []


async def test_follow_ups_given_to_the_model_are_stamped_when_they_are_given() -> None:
    w = world(step(call("ask_user", question="Which?")), step("Answered."), [HANG])
    s = await w.start()
    await w.drain()
    w.jobs.queued.clear()  # the expiry job
    await w.sessions.send(WHO, s.id, "app.py")
    await w.sessions.send(WHO, s.id, "and the README")
    w.clock.advance(5)
    job = w.run_later()
    await asyncio.wait_for(w.model.waiting.wait(), 10)  # the model reads the follow-up
    s = await w.get(s.id)
    assert (s.work.transcript[-1].role, s.work.transcript[-1].content) == (
        "user",
        "and the README",
    )
    assert s.updated_at == w.clock.now()
    job.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await job


async def test_a_session_gone_while_its_command_runs_stops_the_command() -> None:
    """Its rows went (its organization deleted): the command is stopped at the next
    cancel check, not run to its end."""
    w = world(step(call("exec", "e1", command="sleep 5; echo done")), step("never"))
    s = await w.start()
    job = w.run_later()
    for _ in range(200):
        if any(c[0] == "exec" for c in w.sandbox.calls):
            break
        await asyncio.sleep(0.02)
    get_session = w.store.get_session

    async def gone(org_id: str, session_id: object) -> CodeSession:
        raise NotFound("code session not found")

    w.store.get_session = gone  # type: ignore[method-assign]
    try:
        await asyncio.wait_for(job, 20)
    finally:
        w.store.get_session = get_session  # type: ignore[method-assign]
    s = await w.get(s.id)
    [result] = [t for t in s.work.transcript if t.tool_call_id == "e1"]
    assert result.content == "the command was stopped (cancel)"


async def test_a_job_whose_session_went_entirely_ends_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Its organization deleted while a command runs: every read and write of the
    session finds nothing. The job ends (no exception for the queue to retry, no
    failure logged): there is nothing left to mark."""
    w = world(step(call("exec", "e1", command="sleep 5; echo done")), step("never"))
    await w.start()
    job = w.run_later()
    for _ in range(200):
        if any(c[0] == "exec" for c in w.sandbox.calls):
            break
        await asyncio.sleep(0.02)

    async def gone(*args: object) -> Any:
        raise NotFound("code session not found")

    w.store.get_session = gone  # type: ignore[method-assign,assignment]
    w.store.change = gone  # type: ignore[method-assign,assignment]
    assert await asyncio.wait_for(job, 20) is None
    assert [r for r in caplog.records if r.levelname == "ERROR"] == []


async def test_every_write_of_a_follow_up_resuming_a_session_is_stamped() -> None:
    """Each write of the job that resumes a session is stamped with the clock (a
    follower reading the session at any of its events sees when), the move back to
    ``running`` first."""
    w = world(step(call("ask_user", question="Which?")), step("Answered."))
    s = await w.start()
    await w.drain()
    w.jobs.queued.clear()  # the expiry job
    await w.sessions.send(WHO, s.id, "app.py")
    w.clock.advance(5)
    stamps: list[tuple[str, datetime]] = []
    change = w.store.change

    async def stamped(org_id: str, session_id: UUID, step: Any) -> Any:
        went = await change(org_id, session_id, step)
        stamps.append((went[0].status, went[0].updated_at))
        return went

    w.store.change = stamped  # type: ignore[method-assign,assignment]
    await w.drain()
    # (the lease's writes before and after leave the stamp as it was)
    went = [at for status, at in stamps if status != "awaiting_input"]
    assert len(went) >= 3  # back to running, the answer, the reply, the end
    assert all(at == w.clock.now() for at in went), stamps
