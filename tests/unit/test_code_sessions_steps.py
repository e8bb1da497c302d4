"""A code session's steps in detail (use_cases/code_sessions/creating.py,
model_calls.py, handing_back.py) over the world of
tests/unit/code_sessions_world.py: what the checkout records, what each model
call sends, records and counts, and what the push and the pull request leave."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import msgspec
import pytest

from agentsvc_core.errors import Unavailable
from agentsvc_core.ports.git_remotes import GitHostError, GitRemoteError, Snapshot, SnapshotFile
from agentsvc_core.ports.jobs import Again
from agentsvc_core.ports.sandboxes import (
    ExecExit,
    ExecOutput,
    SandboxGone,
    SandboxSpec,
    SandboxStarted,
    SandboxUnavailable,
)
from agentsvc_core.use_cases.code_sessions import EngineSettings
from agentsvc_core.use_cases.code_sessions.finish import HASH_COMMAND
from agentsvc_core.use_cases.code_sessions.model_calls import system_prompt
from tests.unit.code_sessions_world import REPO, TOKEN, World, call, step, world
from tests.unit.turn_world import T0, WHO

FIX = call("edit", path="app.py", old_text="a - b", new_text="a + b")


async def test_the_checkout_is_announced_and_executables_made_runnable() -> None:
    w = world(step(call("exec", command="ls -l run.sh tool.sh | cut -c1-10")), step("done"))
    commit, files = w.remote.repos[REPO]["main"]
    scripts = {"run.sh": b"#!/bin/sh\necho hi\n", "tool.sh": b"#!/bin/sh\n"}
    w.remote.repos[REPO]["main"] = (commit, files | scripts)
    fetch = w.remote.fetch

    async def executable_fetch(url: str, ref: str | None, token: str | None) -> Snapshot:
        got = await fetch(url, ref, token)
        marked = tuple(
            SnapshotFile(path=f.path, data=f.data, executable=f.path.endswith(".sh"))
            for f in got.files
        )
        skipped = tuple(f"vendor/{i}" for i in range(150))
        return Snapshot(commit=got.commit, ref=got.ref, files=marked, skipped=skipped)

    w.remote.fetch = executable_fetch  # type: ignore[method-assign]
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    [checkout] = [e for e in await w.events(s.id) if e.type == "notice"][:1]
    assert checkout.data == {
        "text": f"checked out main at {'a' * 12}",
        "files": 5,
        "skipped": [f"vendor/{i}" for i in range(100)],  # the first hundred
    }
    [command] = [e for e in await w.events(s.id) if e.type == "command"]
    assert command.data["output"].splitlines()[:2] == ["-rwxr-xr-x", "-rwxr-xr-x"]
    assert s.work.base_commit == "a" * 40
    assert s.work.attempts == 0
    fetched = [x for x in s.work.spans if x.name == "git fetch"]
    assert [x.attributes for x in fetched] == [{"agentsvc.git.commit": "a" * 40}]


async def test_a_sandbox_provider_that_lacks_something_ends_the_session() -> None:
    w = world()
    w.sandbox.lacks = "the sandbox image is not installed"
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "error"
    assert s.error == "the sandbox image is not installed"


async def test_an_unavailable_sandbox_is_tried_again() -> None:
    w = world(step("done"))
    w.sandbox.unavailable = "no capacity"
    s = await w.start()
    answer = await w.engine.run(w.jobs.queued.pop(0)[1])
    assert isinstance(answer, Again)
    s = await w.get(s.id)
    assert s.status == "creating"
    assert s.work.attempts == 1
    notices = [e.data["text"] for e in await w.events(s.id) if e.type == "notice"]
    assert notices == ["the sandbox is unavailable: no capacity; trying again"]
    w.sandbox.unavailable = None
    assert await w.engine.run(_payload(s)) is None
    s = await w.get(s.id)
    assert s.status == "finished"
    assert s.work.attempts == 0


def _payload(s: Any) -> bytes:
    return msgspec.json.encode({"org_id": WHO.org_id, "session_id": str(s.id)})


async def test_each_model_call_sends_the_preamble_and_bound_and_records_its_answer() -> None:
    w = world(
        step("Looking.", call("read_file", "r1", path="README.md"), tokens=7),
        step("done", tokens=3),
        settings=EngineSettings(max_tokens=1234),
    )
    agent_id = await w.agent(preamble="You are careful.")
    s = await w.start(code_agent_id=agent_id)
    await w.drain()
    s = await w.get(s.id)
    first = w.model.requests[0]
    assert first.max_tokens == 1234
    assert first.model == "local"
    assert first.system == system_prompt("You are careful.")
    assert first.system.startswith("You are careful.\n\nYou work in a sandbox")
    assert system_prompt("") == (
        "You work in a sandbox holding a git repository checked out at its root. Use the"
        " tools to read, change and test it. Ask the user with ask_user only when you"
        " cannot go on without an answer. When you are done, answer with a short summary"
        " of what you changed: it becomes the pull request's description."
    )
    assert [m.role for m in first.messages] == ["user"]
    assert first.messages[0].content == s.prompt
    assert first.messages[0].thread_id == s.id
    assert first.messages[0].org_id == WHO.org_id
    assert first.messages[0].created_at == s.created_at
    second = w.model.requests[1].messages
    assert [m.id.int for m in second] == [1, 2, 3]
    assert [m.role for m in second] == ["user", "assistant", "tool"]
    assert [c.id for c in second[1].tool_calls] == ["r1"]
    assert second[2].tool_call_id == "r1"
    # the tool's result names its tool, as a thread's does (the local model says it)
    assert [m.sender_name for m in second] == [None, None, "read_file"]
    events = await w.events(s.id)
    assert [e.data for e in events if e.type == "message"][1] == {
        "role": "assistant",
        "content": "Looking.",
    }
    assert [e.data for e in events if e.type == "tool_call"] == [
        {"call_id": "r1", "name": "read_file", "arguments": {"path": "README.md"}}
    ]
    usage = [e.data for e in events if e.type == "usage"]
    assert usage == [
        {"input_tokens": 7, "output_tokens": 7, "cost_usd": (7 * 1.0 + 7 * 2.0) / 1e6},
        {"input_tokens": 3, "output_tokens": 3, "cost_usd": (3 * 1.0 + 3 * 2.0) / 1e6},
    ]
    assert (s.usage.input_tokens, s.usage.output_tokens, s.usage.tokens) == (10, 10, 20)
    assert s.work.model_calls == 2
    chats = [x for x in s.work.spans if x.kind == "llm"]
    assert [(x.name, x.input_tokens, x.output_tokens) for x in chats] == [
        ("chat local", 7, 7),
        ("chat local", 3, 3),
    ]
    assert chats[0].attributes == {"gen_ai.request.model": "local"}
    assert chats[0].model == "local"
    assert chats[0].cost_usd == usage[0]["cost_usd"]
    record = w.usage.records[0]
    assert record.agent_id == s.code_agent_id
    assert record.thread_id == s.id
    assert record.run_id == s.id
    assert record.org_id == WHO.org_id
    assert record.provider == "local"
    assert record.model == "local"
    assert record.key_source == "platform"
    assert record.metadata == {"code_session_id": str(s.id)}
    assert record.cost_usd == usage[0]["cost_usd"]
    assert record.usage.input_tokens == 7
    assert len({r.id for r in w.usage.records}) == 2
    assert record.created_at == w.clock.now()


async def test_a_usage_store_that_fails_does_not_fail_the_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    w = world(step("done"))

    async def down(records: list[Any]) -> None:
        raise Unavailable("the database is away")

    w.usage.add_usage = down  # type: ignore[method-assign]
    s = await w.start()
    with caplog.at_level(logging.WARNING, logger="agentsvc.code_sessions"):
        await w.drain()
    assert (await w.get(s.id)).status == "finished"
    assert f"the usage of code session {s.id} was not stored: the database is away" in [
        r.getMessage() for r in caplog.records
    ]


async def test_an_answer_in_parts_is_recorded_whole() -> None:
    w = world(step("Look", "ing ", "done."))
    s = await w.start()
    await w.drain()
    messages = [e.data for e in await w.events(s.id) if e.type == "message"]
    assert messages[-1] == {"role": "assistant", "content": "Looking done."}


async def test_without_a_price_table_a_model_call_costs_nothing_known() -> None:
    w = world(step("done", tokens=5))
    w.engine._models._prices = None
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    usage = [e.data for e in await w.events(s.id) if e.type == "usage"]
    assert usage == [{"input_tokens": 5, "output_tokens": 5, "cost_usd": None}]
    assert s.usage.cost_usd == 0.0
    assert s.usage.tokens == 10
    assert w.usage.records[0].cost_usd is None


async def test_a_model_call_that_answers_after_a_failure_clears_the_attempts() -> None:
    w = world([Unavailable("the model is away")], step(call("ask_user", question="?")))
    s = await w.start()
    answers = await w.drain()
    assert isinstance(answers[0], Again)
    s = await w.get(s.id)
    assert s.status == "awaiting_input"
    assert s.work.attempts == 0
    notices = [e.data["text"] for e in await w.events(s.id) if e.type == "notice"]
    assert "the model call failed: the model is away; trying again" in notices


async def test_the_push_records_each_file_change_and_the_commit() -> None:
    w = world(
        step(
            FIX,
            call("write_file", "w1", path="new.txt", content="n\n"),
            call("exec", "e1", command="rm README.md"),
        ),
        step("Fixed."),
        settings=EngineSettings(author="Bot <bot@example.com>"),
    )
    s = await w.start("fix add please")
    await w.drain()
    s = await w.get(s.id)
    [push] = w.remote.pushes
    assert push["message"] == s.title
    assert push["author"] == "Bot <bot@example.com>"
    final = {
        e.data["path"]: e.data
        for e in await w.events(s.id)
        if e.type == "file_change" and e.data.get("final")
    }
    assert {p: d["change"] for p, d in final.items()} == {
        "README.md": "deleted",
        "app.py": "modified",
        "new.txt": "added",
    }
    assert "+n" in final["new.txt"]["diff"]
    assert final["app.py"]["diff"].startswith("--- a/app.py\n+++ b/app.py\n")
    assert "-# App" in final["README.md"]["diff"]
    commit = s.work.pushed_commit
    assert commit is not None
    notices = [e.data["text"] for e in await w.events(s.id) if e.type == "notice"]
    assert f"pushed {commit[:12]} to {s.branch}" in notices
    pushed = [x for x in s.work.spans if x.name == "git push"]
    assert [x.attributes for x in pushed] == [{"agentsvc.git.branch": s.branch}]
    [pr] = w.host.opened
    assert pr["title"] == s.title
    assert (pr["repo_url"], pr["token"], pr["head"], pr["base"]) == (REPO, TOKEN, s.branch, "main")
    pr_spans = [x for x in s.work.spans if x.name == "git pull_request"]
    assert [x.attributes for x in pr_spans] == [{"url.full": s.pr_url}]
    assert [x.kind for x in [*pushed, *pr_spans]] == ["tool", "tool"]
    assert len(w.remote.fetches) == 1  # the diffs come from the checkout this process holds
    events = [e for e in await w.events(s.id) if e.type == "pull_request"]
    assert [e.data for e in events] == [{"url": s.pr_url, "number": 1, "branch": s.branch}]


async def test_a_push_after_a_restart_fetches_the_base_again_for_the_diffs() -> None:
    w = world(step(FIX), step(call("ask_user", question="?")), step("done"))
    s = await w.start()
    await w.drain()
    assert (await w.get(s.id)).status == "awaiting_input"
    w.jobs.queued.clear()
    w.engine._snapshots.clear()  # another process takes over
    await w.sessions.send(WHO, s.id, "go on")
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert w.remote.fetches[-1] == (REPO, s.work.base_commit, TOKEN)
    [final] = [e for e in await w.events(s.id) if e.type == "file_change" and e.data.get("final")]
    assert "+    return a + b" in final.data["diff"]


async def test_the_base_gone_leaves_the_diff_out() -> None:
    w = world(step(FIX), step("done"))
    w.engine._handing._snapshots = {}  # as after a restart: no copy of the checkout
    real = w.remote.fetch

    async def once(url: str, ref: str | None, token: str | None) -> Any:
        if w.remote.fetches:
            w.remote.fetches.append((url, ref, token))
            raise GitRemoteError("git.example: gone", permanent=True)
        return await real(url, ref, token)

    w.remote.fetch = once  # type: ignore[method-assign]
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert len(w.remote.fetches) == 2
    [final] = [e for e in await w.events(s.id) if e.type == "file_change" and e.data.get("final")]
    assert final.data["diff"] is None
    assert final.data["change"] == "modified"


async def test_no_host_for_the_repository_finishes_with_the_branch_and_says_so() -> None:
    w = world(step(FIX), step("done"))
    w.engine._handing._hosts = []
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert s.branch is not None
    assert s.pr_url is None
    notices = [e.data["text"] for e in await w.events(s.id) if e.type == "notice"]
    assert "no git host adapter serves this repository: no pull request" in notices
    await _stamped_at(w, s.id, w.clock.now())


async def _stamped_at(w: World, session_id: Any, at: Any) -> None:
    """Every event of the session carries the clock's time: its creation's or
    ``at``, when the steps ran (the store stamps events with the write's time)."""
    events = await w.events(session_id)
    assert events
    assert [e.created_at for e in events if e.created_at not in (T0, at)] == []


async def test_every_step_stamps_its_events_with_the_clock() -> None:
    w = world(step(FIX), step("done"))
    s = await w.start()
    w.clock.advance(60)
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert s.pr_url is not None
    await _stamped_at(w, s.id, w.clock.now())
    assert s.updated_at == w.clock.now()


async def test_the_pull_request_goes_to_the_branch_the_session_checked_out() -> None:
    w = world(step(FIX), step("done"))
    _, files = w.remote.repos[REPO]["main"]
    w.remote.repos[REPO]["dev"] = ("d" * 40, dict(files))
    s = await w.start(ref="dev")
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    [pr] = w.host.opened
    assert pr["base"] == "dev"
    assert w.remote.pushes[0]["base"] == "d" * 40


async def test_a_pull_request_failure_is_tried_again_without_pushing_twice() -> None:
    w = world(step(FIX), step("done"))
    w.host.fail = [GitHostError("git.example: 502", permanent=False)]
    s = await w.start()
    answers = await w.drain()
    assert any(isinstance(a, Again) for a in answers)
    s = await w.get(s.id)
    assert s.status == "finished"
    assert len(w.remote.pushes) == 1
    assert s.pr_url == "https://git.example/acme/app/pull/1"
    notices = [e.data["text"] for e in await w.events(s.id) if e.type == "notice"]
    assert "the pull request could not be opened: git.example: 502; trying again" in notices


async def test_a_refused_pull_request_ends_the_session() -> None:
    w = world(step(FIX), step("done"))
    w.host.fail = [GitHostError("git.example: 422 invalid", permanent=True)]
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "error"
    assert s.error == "the pull request could not be opened: git.example: 422 invalid"


async def test_a_refused_push_ends_the_session() -> None:
    w = world(step(FIX), step("done"))
    s = await w.start()
    w.remote.repos[REPO][f"agentsvc/{s.id.hex[:8]}"] = ("c" * 40, {})
    answers = await w.drain()
    assert not any(isinstance(a, Again) for a in answers)  # not tried again
    s = await w.get(s.id)
    assert s.status == "error"
    assert (s.error or "").startswith("the push failed: git.example: branch")


async def test_the_pull_request_body_is_the_prompt_when_the_model_said_nothing() -> None:
    w = world(step(FIX), step(""))
    s = await w.start("make add add")
    await w.drain()
    [pr] = w.host.opened
    assert pr["body"] == "make add add"
    assert (await w.get(s.id)).status == "finished"


def _listing(w: World, answers: list[Any]) -> list[Any]:
    """The sandbox's next answers to the changed files' listing (``HASH_COMMAND``):
    a list of items it yields, or an exception it raises; then the real listing.
    Returns the spec of each listing asked for."""
    specs: list[Any] = []
    real = w.sandbox.exec

    def exec_(ref: str, spec: Any, command: str, **kw: Any) -> Any:
        if command != HASH_COMMAND:
            return real(ref, spec, command, **kw)
        specs.append(spec)
        assert kw == {"timeout_s": 120.0, "max_output": 8_000_000}
        if not answers:
            return real(ref, spec, command, **kw)
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer

        async def items() -> Any:
            for item in answer:
                yield item

        return items()

    w.sandbox.exec = exec_  # type: ignore[method-assign]
    return specs


@pytest.mark.parametrize(
    ("listing", "error"),
    [
        (ExecExit(exit_code=None, truncated=True), "the repository has too many files to compare"),
        (ExecExit(exit_code=None, timed_out=True), "the repository has too many files to compare"),
        (ExecExit(exit_code=1), "the files could not be listed in the sandbox"),
    ],
)
async def test_a_listing_of_the_changed_files_cut_short_or_failed_ends_the_session(
    listing: ExecExit, error: str
) -> None:
    w = world(step(FIX), step("done"))
    _listing(w, [[ExecOutput(stream="stdout", data=""), listing]])
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert (s.status, s.error) == ("error", error)
    assert w.remote.pushes == []


async def test_a_listing_the_sandbox_fails_is_tried_again_in_the_sessions_sandbox() -> None:
    w = world(step(FIX), step("done"))
    specs = _listing(w, [Unavailable("the sandbox is busy")])
    s = await w.start()
    answers = await w.drain()
    assert any(isinstance(a, Again) for a in answers)
    s = await w.get(s.id)
    assert s.status == "finished"
    assert len(w.remote.pushes) == 1
    notices = [e.data["text"] for e in await w.events(s.id) if e.type == "notice"]
    assert "the changed files could not be read: the sandbox is busy; trying again" in notices
    assert specs == [w.engine._creating.spec(s)] * 2


async def test_a_session_that_changed_nothing_finishes_without_a_push() -> None:
    w = world(step(call("read_file", path="README.md")), step("Nothing to fix."))
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    assert (w.remote.pushes, w.host.opened, s.branch, s.pr_url) == ([], [], None, None)
    events = await w.events(s.id)
    assert [e.data for e in events if e.type == "notice"][-1] == {
        "text": "no file changed: nothing to push"
    }
    assert [e.data["status"] for e in events if e.type == "status"][-1] == "finished"


async def test_a_push_that_failed_for_now_is_tried_again() -> None:
    w = world(step(FIX), step("done"))
    real = w.remote.push
    failed: list[str] = []

    async def once(url: str, token: str | None, **kw: Any) -> Any:
        if not failed:
            failed.append(url)
            raise GitRemoteError("git.example: 503", permanent=False)
        return await real(url, token, **kw)

    w.remote.push = once  # type: ignore[method-assign]
    s = await w.start()
    answers = await w.drain()
    assert any(isinstance(a, Again) for a in answers)
    s = await w.get(s.id)
    assert s.status == "finished"
    assert len(w.remote.pushes) == 1
    notices = [e.data["text"] for e in await w.events(s.id) if e.type == "notice"]
    assert "the push failed: git.example: 503; trying again" in notices


class _Held:
    """A model's stream that is no generator (as a provider's may be): it waits
    for its first event until cancelled, and records whether it was closed."""

    def __init__(self) -> None:
        self.closed = False
        self.waiting = asyncio.Event()

    def __aiter__(self) -> _Held:
        return self

    async def __anext__(self) -> Any:
        self.waiting.set()
        await asyncio.Event().wait()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self.closed = True


async def test_a_model_call_cut_short_closes_the_models_stream() -> None:
    w = world()
    held = _Held()
    w.model.stream = lambda request: held  # type: ignore[method-assign]
    await w.start()
    job = w.run_later()
    await asyncio.wait_for(held.waiting.wait(), 10)
    job.cancel()  # the process stops mid-call
    with pytest.raises(asyncio.CancelledError):
        await job
    assert held.closed


async def test_the_sandbox_is_made_from_the_code_agents_computer() -> None:
    w = world(step("done"))
    agent_id = await w.agent(
        computer={"memoryMb": 2048, "network": "allowlist", "allowedHosts": ["pypi.org"]}
    )
    started: list[tuple[SandboxSpec, str | None]] = []
    real = w.sandbox.start

    async def start(spec: SandboxSpec, *, resume: str | None = None) -> Any:
        started.append((spec, resume))
        return await real(spec, resume=resume)

    w.sandbox.start = start  # type: ignore[method-assign]
    s = await w.start(code_agent_id=agent_id)
    await w.drain()
    s = await w.get(s.id)
    assert s.status == "finished"
    spec = SandboxSpec(
        instance_id=str(s.id),
        org_id=WHO.org_id,
        persistent=True,
        memory_mb=2048,
        network="allowlist",
        allowed_hosts=("pypi.org",),
    )
    assert started[0] == (spec, None)
    assert started[1:] == [(spec, s.work.sandbox_ref)] * (len(started) - 1)
    assert (s.work.provider, s.work.sandbox_ref) == ("local", started and s.work.sandbox_ref)


@pytest.mark.parametrize(
    ("default", "error"),
    [
        (None, "no sandbox provider is configured"),
        ("e2b", "no sandbox provider e2b is configured"),
    ],
)
async def test_no_provider_configured_for_the_session_ends_it(
    default: str | None, error: str
) -> None:
    w = world(step("done"), settings=EngineSettings(default_provider=default))
    w.engine._creating._providers = {}
    s = await w.start()
    assert await w.drain() == [None]  # not tried again
    s = await w.get(s.id)
    assert (s.status, s.error) == ("error", error)


@pytest.mark.parametrize(
    ("failure", "error"),
    [
        (SandboxGone("sbx-1 is gone"), "the sandbox failed: sbx-1 is gone"),
        (Unavailable("the disk is full"), "the sandbox failed: the disk is full"),
    ],
)
async def test_a_sandbox_that_fails_while_the_files_are_written_ends_the_session(
    failure: Exception, error: str
) -> None:
    w = world(step("done"))

    async def write_file(ref: str, path: str, data: bytes) -> None:
        raise failure

    w.sandbox.write_file = write_file  # type: ignore[method-assign]
    s = await w.start()
    answers = await w.drain()
    s = await w.get(s.id)
    assert (s.status, s.error) == ("error", error)
    assert not any(isinstance(a, Again) for a in answers)


async def test_a_repository_that_cannot_be_fetched_ends_the_session_saying_why() -> None:
    w = world(step("done"))
    w.remote.fail = [GitRemoteError("git.example: 404 no such repository", permanent=True)]
    s = await w.start()
    answers = await w.drain()
    s = await w.get(s.id)
    assert (s.status, s.error) == (
        "error",
        "the repository could not be fetched: git.example: 404 no such repository",
    )
    assert not any(isinstance(a, Again) for a in answers)
    assert w.remote.fetches == [(REPO, None, TOKEN)]


async def _waiting_session(w: World) -> Any:
    """A session waiting for its user, with its job's queue emptied."""
    s = await w.start()
    await w.drain()
    w.jobs.queued.clear()
    s = await w.get(s.id)
    assert s.status == "awaiting_input"
    return s


@pytest.mark.parametrize(
    ("failure", "answer", "status", "text"),
    [
        (
            SandboxUnavailable("no capacity"),
            Again,
            "running",
            "the sandbox is unavailable: no capacity",
        ),
        (Unavailable("the host is away"), None, "error", "the sandbox failed: the host is away"),
    ],
)
async def test_a_sandbox_that_cannot_be_started_again_for_a_follow_up(
    failure: Exception, answer: Any, status: str, text: str
) -> None:
    w = world(step(call("ask_user", question="?")), step("done"))
    s = await _waiting_session(w)
    real = w.sandbox.start

    async def start(spec: SandboxSpec, *, resume: str | None = None) -> Any:
        w.sandbox.start = real  # type: ignore[method-assign]
        raise failure

    w.sandbox.start = start  # type: ignore[method-assign]
    await w.sessions.send(WHO, s.id, "go on")
    answers = await w.drain(limit=1)
    s = await w.get(s.id)
    assert s.status == status
    if answer is None:
        assert answers == [None]
        assert s.error == text
    else:
        assert isinstance(answers[0], answer)
        notices = [e.data["text"] for e in await w.events(s.id) if e.type == "notice"]
        assert notices[-1] == f"{text}; trying again"


async def test_a_follow_up_without_the_sessions_provider_ends_the_session() -> None:
    w = world(step(call("ask_user", question="?")), step("done"))
    s = await _waiting_session(w)
    w.engine._creating._providers = {}
    await w.sessions.send(WHO, s.id, "go on")
    assert await w.drain() == [None]  # not tried again
    s = await w.get(s.id)
    assert (s.status, s.error) == ("error", "the sandbox provider local is not configured")


async def test_a_sandbox_resumed_under_its_ref_but_without_its_files_ends_the_session() -> None:
    w = world(step(call("ask_user", question="?")), step("done"))
    s = await _waiting_session(w)

    async def start(spec: SandboxSpec, *, resume: str | None = None) -> Any:
        return SandboxStarted(ref=resume or "", state_lost=True)

    w.sandbox.start = start  # type: ignore[method-assign]
    await w.sessions.send(WHO, s.id, "go on")
    assert await w.drain() == [None]
    s = await w.get(s.id)
    assert (s.status, s.error) == (
        "error",
        "the sandbox lost its files (state_lost); the work is gone",
    )
