"""Code sessions' use cases over the memory store, the fake sandbox, an in-memory
git remote and host and a scripted model (tests/unit/code_sessions_world.py):
each state transition, follow-ups, cancel mid-command, archive, expiry, and a
job taken again after a simulated crash."""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta

import msgspec
import pytest

from agentsvc_core.entities.code_session import SessionEvent
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, Upstream
from agentsvc_core.ports.git_remotes import GitRemoteError
from agentsvc_core.ports.jobs import Again
from agentsvc_core.use_cases.code_sessions import CodeAgentChanges, EngineSettings
from agentsvc_core.use_cases.code_sessions.engine import INTERRUPTED
from tests.unit.code_sessions_world import EXPIRE_JOB, REPO, TOKEN, call, step, world
from tests.unit.turn_world import BOX, WHO

FIX = call("edit", path="app.py", old_text="a - b", new_text="a + b")
TEST = call("exec", command="python3 test_app.py")


def statuses(events: list[SessionEvent]) -> list[str]:
    return [e.data["status"] for e in events if e.type == "status"]


# --- code agents -----------------------------------------------------------------


async def test_a_code_agent_seals_its_credential_and_never_shows_it() -> None:
    w = world()
    agent_id = await w.agent()
    agent = await w.agents.get(WHO, agent_id)
    assert agent.git_credential_sealed is not None
    assert TOKEN not in agent.git_credential_sealed
    assert TOKEN not in msgspec.json.encode(agent).decode()
    changed = await w.agents.update(WHO, agent_id, CodeAgentChanges(git_credential=None))
    assert changed.git_credential_sealed is None
    assert changed.name == "fixer"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("model", "nobody-serves-this"),
        ("repo_url", "https://user:pw@git.example/a.git"),
        ("repo_url", "ftp://git.example/a.git"),
        ("branch_prefix", "../up"),
        ("starting_ref", "a..b"),
        ("computer", {"provider": "e2b"}),
        ("computer", {"allowedHosts": ["not a host"]}),
    ],
)
async def test_a_code_agent_refuses_bad_settings(field: str, value: object) -> None:
    w = world()
    with pytest.raises(InvalidInput):
        await w.agent(**{field: value})


async def test_code_agents_list_and_delete_within_the_organization() -> None:
    w = world()
    first = await w.agent(name="one")
    w.clock.advance(1)
    second = await w.agent(name="two")
    assert [a.id for a in await w.agents.list(WHO)] == [first, second]
    await w.agents.delete(WHO, first)
    with pytest.raises(NotFound):
        await w.agents.delete(WHO, first)
    other = msgspec.structs.replace(WHO, org_id="another")
    with pytest.raises(NotFound):
        await w.agents.get(other, second)


# --- the happy path --------------------------------------------------------------


async def test_a_session_edits_tests_pushes_and_opens_a_pull_request() -> None:
    w = world(
        step("Fixing.", FIX),
        step(TEST),
        step("Fixed add: it subtracted."),
    )
    started = await w.start("fix add")
    assert started.status == "pending"
    assert [k for k, _, _ in w.jobs.queued] == ["code_session.run"]
    await w.drain()
    s = await w.get(started.id)
    assert s.status == "finished", s.error
    assert s.branch == f"agentsvc/{s.id.hex[:8]}"
    assert s.pr_url == "https://git.example/acme/app/pull/1"
    assert s.ref == "main"
    # one commit, of the changed file only, with the session's own token
    [push] = w.remote.pushes
    assert push["changes"] == {"app.py": b"def add(a, b):\n    return a + b\n"}
    assert push["base"] == "a" * 40
    assert push["branch"] == s.branch
    assert push["token"] == TOKEN
    [pr] = w.host.opened
    assert pr["head"] == s.branch
    assert pr["base"] == "main"
    assert pr["body"] == "Fixed add: it subtracted."
    events = await w.events(s.id)
    assert statuses(events) == ["pending", "creating", "running", "finished"]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert s.last_event_seq == events[-1].seq
    [command] = [e for e in events if e.type == "command"]
    assert command.data["exit_code"] == 0
    assert "ok" in command.data["output"]
    diffs = [e.data["diff"] for e in events if e.type == "file_change"]
    assert diffs
    assert all("-    return a - b\n+    return a + b" in d for d in diffs)
    assert [e.data["url"] for e in events if e.type == "pull_request"] == [s.pr_url]
    # usage: three model calls of 20 tokens, priced
    assert s.usage.tokens == 60
    assert s.usage.cost_usd == pytest.approx(3 * (10 * 1.0 + 10 * 2.0) / 1e6)
    assert len(w.usage.records) == 3
    assert {r.purpose for r in w.usage.records} == {"code_session"}
    # the trace: model calls, tools and git operations, with its cost
    got = await w.traces.get_trace(WHO.org_id, s.work.trace_id)
    assert got is not None
    summary, spans, _ = got
    assert summary.kind == "code_session"
    assert summary.status == "ok"
    assert summary.cost_usd == s.usage.cost_usd
    names = [x.name for x in spans]
    assert names.count("chat local") == 3
    assert {"edit", "exec", "git fetch", "git push", "git pull_request"} <= set(names)
    # the model was given the tools and the transcript
    assert {t.name for t in w.model.requests[0].tools} >= {
        "exec",
        "read_file",
        "write_file",
        "list_files",
        "search",
        "edit",
        "ask_user",
    }
    assert w.model.requests[1].messages[-1].role == "tool"


async def test_the_model_reads_lists_searches_and_writes() -> None:
    w = world(
        step(
            call("list_files", "c1"),
            call("read_file", "c2", path="README.md"),
            call("search", "c3", pattern="return"),
            call("write_file", "c4", path="docs/new.md", content="new\n"),
            call("edit", "c5", path="README.md", old_text="nowhere", new_text="x"),
            call("read_file", "c6", path="../etc/passwd"),
        ),
        step("done"),
    )
    s = await w.start()
    await w.drain()
    results = {
        t.tool_call_id: t.content for t in (await w.get(s.id)).work.transcript if t.role == "tool"
    }
    assert "README.md" in results["c1"]
    assert "app.py" in results["c1"]
    assert results["c2"] == "# App\n\nHello.\n"
    assert "app.py:2:    return a - b" in results["c3"]
    assert results["c4"].startswith("wrote 4 bytes")
    assert results["c5"] == "error: old_text is not in README.md"
    assert results["c6"].startswith("error:")
    [push] = w.remote.pushes
    assert push["changes"] == {"docs/new.md": b"new\n"}


async def test_nothing_changed_finishes_without_a_push() -> None:
    w = world(step("Nothing to do."))
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert s.branch is None
    assert s.pr_url is None
    assert not w.remote.pushes
    assert not w.host.opened


async def test_ignored_and_deleted_files() -> None:
    w = world(
        step(
            call("exec", command="mkdir -p __pycache__ && touch __pycache__/x.pyc && rm README.md")
        ),
        step("done"),
    )
    await w.start()
    await w.drain()
    [push] = w.remote.pushes
    assert push["changes"] == {"README.md": None}


async def test_without_auto_pr_only_the_branch_is_pushed() -> None:
    w = world(step(FIX), step("done"))
    agent_id = await w.agent(auto_create_pr=False)
    s = await w.start(code_agent_id=agent_id)
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert s.branch is not None
    assert s.pr_url is None
    assert w.remote.pushes
    assert not w.host.opened


# --- asking and following up -------------------------------------------------------


async def test_ask_user_waits_and_a_follow_up_answers() -> None:
    w = world(step(call("ask_user", question="Which file?")), step("Thanks."))
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "awaiting_input"
    assert ("stop", s.work.sandbox_ref) in w.sandbox.calls  # released while it waits
    assert [k for k, _, _ in w.jobs.queued] == [EXPIRE_JOB]
    w.jobs.queued.clear()
    await w.sessions.send(WHO, s.id, "app.py")
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    answer = w.model.requests[1].messages[-1]
    assert answer.role == "tool"
    assert answer.content == "app.py"
    assert statuses(await w.events(s.id)) == [
        "pending",
        "creating",
        "running",
        "awaiting_input",
        "running",
        "finished",
    ]


async def test_a_follow_up_sent_while_it_runs_goes_to_the_model_before_it_ends() -> None:
    w = world(step("First answer."), step("Second answer."))
    s = await w.start()
    await w.sessions.send(WHO, s.id, "and also this")
    await w.drain()
    assert (await w.get(s.id)).status == "finished"
    assert len(w.model.requests) == 2
    last = w.model.requests[1].messages[-1]
    assert last.role == "user"
    assert last.content == "and also this"


async def test_a_follow_up_to_an_ended_session_is_409() -> None:
    w = world(step("done"))
    s = await w.start()
    await w.drain()
    with pytest.raises(Conflict) as refused:
        await w.sessions.send(WHO, s.id, "more")
    assert refused.value.code == "SESSION_ENDED"


async def test_a_session_waiting_past_the_limit_expires() -> None:
    w = world(
        step(call("ask_user", question="?")),
        settings=EngineSettings(expire_after=timedelta(hours=1)),
    )
    s = await w.start()
    await w.drain()
    [(_kind, payload, _)] = w.jobs.queued
    assert w.jobs.delays[-1] == 3600
    w.clock.advance(3599)
    await w.engine.expire(payload)
    assert (await w.get(s.id)).status == "awaiting_input"
    w.clock.advance(1)
    await w.engine.expire(payload)
    s = await w.get(s.id)
    assert s.status == "expired"
    assert "3600" in (s.error or "")


# --- cancel and archive -------------------------------------------------------------


async def test_cancel_stops_the_command_in_flight() -> None:
    w = world(step(call("exec", command="echo started; sleep 30")), step("never"))
    s = await w.start()
    job = w.run_later()
    for _ in range(200):
        if any(c[0] == "exec" for c in w.sandbox.calls):
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.1)
    began = time.monotonic()
    first = await w.sessions.cancel(WHO, s.id)
    again = await w.sessions.cancel(WHO, s.id)  # idempotent
    assert first.work.cancel_requested
    assert again.work.cancel_requested
    await asyncio.wait_for(job, 10)
    assert time.monotonic() - began < 5
    s = await w.get(s.id)
    assert s.status == "cancelled"
    [command] = [e for e in await w.events(s.id) if e.type == "command"]
    assert command.data["cancelled"] is True
    assert command.data["exit_code"] is None
    assert len(w.model.requests) == 1
    assert statuses(await w.events(s.id))[-1] == "cancelled"
    third = await w.sessions.cancel(WHO, s.id)
    assert third.status == "cancelled"


async def test_cancel_of_a_pending_session_ends_it_at_once() -> None:
    w = world()
    s = await w.start()
    s = await w.sessions.cancel(WHO, s.id)
    assert s.status == "cancelled"
    await w.drain()
    assert w.model.requests == []
    assert w.sandbox.calls == []


async def test_archive_destroys_the_sandbox_and_the_key_and_keeps_the_timeline() -> None:
    w = world(step(FIX), step("done"))
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    ref = s.work.sandbox_ref
    assert ref is not None
    assert (w.sandbox.root / ref).is_dir()
    before = await w.events(s.id)
    archived = await w.sessions.archive(WHO, s.id)
    assert archived.archived
    assert archived.work.credential_sealed is None
    assert ("destroy", ref) in w.sandbox.calls
    assert not (w.sandbox.root / ref).exists()
    after = await w.events(s.id)
    assert after[: len(before)] == before
    assert after[-1].type == "notice"


async def test_archive_of_a_running_session_is_409() -> None:
    w = world()
    s = await w.start()
    await w.store.change(
        WHO.org_id, s.id, lambda x: (msgspec.structs.replace(x, status="running"), [])
    )
    with pytest.raises(Conflict):
        await w.sessions.archive(WHO, s.id)


async def test_the_session_keeps_its_own_copy_of_the_credential() -> None:
    w = world(step(FIX), step("done"))
    agent_id = await w.agent()
    s = await w.start(code_agent_id=agent_id)
    await w.agents.update(WHO, agent_id, CodeAgentChanges(git_credential=None))
    await w.drain()
    assert w.remote.fetches[0][2] == TOKEN
    assert w.remote.pushes[0]["token"] == TOKEN
    sealed = (await w.get(s.id)).work.credential_sealed
    assert sealed is not None
    assert BOX.open(sealed, f"code-session:{WHO.org_id}:{s.id}") == TOKEN.encode()


# --- failures and restarts ---------------------------------------------------------------


async def test_a_permanent_fetch_failure_is_an_error() -> None:
    w = world()
    s = await w.start(repo_url="https://git.example/acme/missing.git")
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "error"
    assert "no such repository" in (s.error or "")


async def test_a_provider_that_cannot_serve_here_ends_the_session_saying_why() -> None:
    w = world(step("done"))
    w.sandbox.lacks = "the local sandbox needs bubblewrap: install it"
    s = await w.start()
    assert await w.drain() == [None]  # not tried again
    s = await w.get(s.id)
    assert (s.status, s.error) == ("error", "the local sandbox needs bubblewrap: install it")
    assert w.sandbox.calls == []  # no sandbox was asked for


async def test_a_transient_fetch_failure_is_tried_again() -> None:
    w = world(step("done"))
    w.remote.fail = [GitRemoteError("git.example: 503", permanent=False)]
    s = await w.start()
    answers = await w.drain()
    assert isinstance(answers[0], Again)
    assert answers[0].delay_s == 5.0
    s = await w.get(s.id)
    assert s.status == "finished"
    # the second pass resumes the sandbox the first one started
    starts = [ref for call, ref in w.sandbox.calls if call == "start"]
    assert starts[:2] == ["", s.work.sandbox_ref]


async def test_a_sandbox_that_lost_its_files_ends_the_session_and_says_so() -> None:
    w = world(step(call("ask_user", question="?")), step("done"))
    s = await w.start()
    await w.drain()
    w.jobs.queued.clear()
    s = await w.get(s.id)
    assert s.work.sandbox_ref is not None
    w.sandbox.lose(s.work.sandbox_ref)
    await w.sessions.send(WHO, s.id, "go on")
    assert await w.drain() == [None]  # not tried again
    s = await w.get(s.id)
    assert s.status == "error"
    assert s.error == "the sandbox lost its files (state_lost); the work is gone"


async def test_a_job_killed_mid_command_does_not_run_it_again() -> None:
    w = world(step(call("exec", command="echo run >> log.txt; sleep 30")), step("after"))
    s = await w.start()
    job = w.run_later()
    for _ in range(200):
        s = await w.get(s.id)
        if s.work.inflight is not None:
            break
        await asyncio.sleep(0.02)
    await asyncio.sleep(0.2)
    job.cancel()  # the process dies: the command's result was never recorded
    with pytest.raises(asyncio.CancelledError):
        await job
    s = await w.get(s.id)
    assert s.status == "running"
    assert s.work.inflight == "c-exec"
    # a dead process's lease: the next job waits until it runs out
    await w.store.change(
        WHO.org_id,
        s.id,
        lambda x: (
            msgspec.structs.replace(
                x,
                work=msgspec.structs.replace(
                    x.work, lease_owner="dead", lease_until=w.clock.now() + timedelta(seconds=60)
                ),
            ),
            [],
        ),
    )
    w.jobs.queued.append(
        (
            "code_session.run",
            msgspec.json.encode({"org_id": WHO.org_id, "session_id": str(s.id)}),
            None,
        )
    )
    _kind, payload, _ = w.jobs.queued.pop()
    assert isinstance(await w.engine.run(payload), Again)
    w.clock.advance(61)
    assert await w.engine.run(payload) is None
    s = await w.get(s.id)
    assert s.status == "finished"
    assert s.work.sandbox_ref is not None
    assert (w.sandbox.root / s.work.sandbox_ref / "log.txt").read_text() == "run\n"
    result = next(t for t in s.work.transcript if t.role == "tool")
    assert result.content == INTERRUPTED
    assert result.tool_call_id == "c-exec"
    [notice] = [
        e for e in await w.events(s.id) if e.type == "notice" and "interrupted" in e.data["text"]
    ]
    assert notice.data == {"text": "exec interrupted", "call_id": "c-exec"}
    assert notice.created_at == w.clock.now()
    assert w.model.requests[1].messages[-1].content == INTERRUPTED


async def test_a_job_killed_after_the_model_answered_does_not_call_it_again() -> None:
    w = world(step(call("read_file", path="README.md")), step("done"))
    await w.start()
    # the first pass recorded the model's answer, then the process died before the tool
    payload = w.jobs.queued[0][1]
    await w.drain()
    assert len(w.model.requests) == 2
    # a redelivered job of an ended session changes nothing
    assert await w.engine.run(payload) is None
    assert len(w.model.requests) == 2


async def test_the_model_call_bound_ends_the_session() -> None:
    w = world(step(call("list_files")), settings=EngineSettings(max_model_calls=3))
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "error"
    assert "3 calls" in (s.error or "")
    assert len(w.model.requests) == 3


async def test_sessions_page_newest_first() -> None:
    w = world()
    agent_id = await w.agent()
    made = []
    for i in range(3):
        made.append((await w.start(f"task {i}", code_agent_id=agent_id)).id)
        w.clock.advance(1)
    rows, more = await w.sessions.page(WHO, before=None, limit=2)
    assert [r.id for r in rows] == made[::-1][:2]
    assert more
    last = rows[-1]
    rows, more = await w.sessions.page(WHO, before=(last.created_at, last.id), limit=2)
    assert [r.id for r in rows] == [made[0]]
    assert not more


async def test_a_session_needs_a_repository_and_a_prompt() -> None:
    w = world()
    agent_id = await w.agent(repo_url=None)
    with pytest.raises(InvalidInput):
        await w.start(code_agent_id=agent_id)
    with pytest.raises(InvalidInput):
        await w.start("  ", repo_url=REPO)


async def test_events_page_forward_and_follow_live() -> None:
    w = world(step(FIX), step("done"))
    s = await w.start()
    rows, next_after = await w.sessions.events(WHO, s.id, after=0, limit=1)
    assert [r.seq for r in rows] == [1]
    assert next_after == 1
    feed = await w.sessions.follow(WHO, s.id, 1, keepalive_s=5)
    seen: list[int] = []

    async def read() -> None:
        async for batch in feed:
            if batch:
                seen.extend(e.seq for e in batch)

    reader = asyncio.create_task(read())
    await asyncio.sleep(0.05)
    await w.drain()
    await asyncio.wait_for(reader, 5)  # ends once the session has ended
    s = await w.get(s.id)
    assert seen == list(range(2, s.last_event_seq + 1))


async def test_a_failing_model_is_tried_again_then_ends_the_session() -> None:
    w = world([Upstream("the provider is down", code="PROVIDER_UNAVAILABLE")])
    s = await w.start()
    answers = await w.drain()
    assert [type(a).__name__ for a in answers] == ["Again"] * 4 + ["NoneType"]
    assert [a.delay_s for a in answers[:4]] == [5.0, 10.0, 20.0, 40.0]
    s = await w.get(s.id)
    assert s.status == "error"
    assert s.error == "the model call failed: the provider is down"
    assert len(w.model.requests) == 5


async def test_a_model_failure_once_does_not_end_the_session() -> None:
    w = world([Upstream("blip", code="PROVIDER_UNAVAILABLE")], step("done"))
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert any(
        e.type == "notice" and "trying again" in e.data["text"] for e in await w.events(s.id)
    )
