"""A code session's steps in detail (use_cases/code_sessions/creating.py,
model_calls.py, handing_back.py) over the world of
tests/unit/code_sessions_world.py: what the checkout records, what each model
call sends, records and counts, and what the push and the pull request leave."""

from __future__ import annotations

from typing import Any

import msgspec

from agentsvc_core.errors import Unavailable
from agentsvc_core.ports.git_remotes import GitHostError, GitRemoteError, Snapshot, SnapshotFile
from agentsvc_core.ports.jobs import Again
from agentsvc_core.use_cases.code_sessions import EngineSettings
from agentsvc_core.use_cases.code_sessions.model_calls import system_prompt
from tests.unit.code_sessions_world import REPO, call, step, world
from tests.unit.turn_world import WHO

FIX = call("edit", path="app.py", old_text="a - b", new_text="a + b")


async def test_the_checkout_is_announced_and_executables_made_runnable() -> None:
    w = world(step(call("exec", command="ls -l run.sh | cut -c1-10")), step("done"))
    commit, files = w.remote.repos[REPO]["main"]
    w.remote.repos[REPO]["main"] = (commit, files | {"run.sh": b"#!/bin/sh\necho hi\n"})
    fetch = w.remote.fetch

    async def executable_fetch(url: str, ref: str | None, token: str | None) -> Snapshot:
        got = await fetch(url, ref, token)
        marked = tuple(
            SnapshotFile(path=f.path, data=f.data, executable=f.path == "run.sh") for f in got.files
        )
        return Snapshot(commit=got.commit, ref=got.ref, files=marked, skipped=("vendor/lib",))

    w.remote.fetch = executable_fetch  # type: ignore[method-assign]
    s = await w.start()
    await w.drain()
    s = await w.get(s.id)
    [checkout] = [e for e in await w.events(s.id) if e.type == "notice"][:1]
    assert checkout.data == {
        "text": f"checked out main at {'a' * 12}",
        "files": 4,
        "skipped": ["vendor/lib"],
    }
    [command] = [e for e in await w.events(s.id) if e.type == "command"]
    assert command.data["output"].startswith("-rwx")
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
    assert system_prompt("").startswith("You work in a sandbox")
    assert [m.role for m in first.messages] == ["user"]
    assert first.messages[0].content == s.prompt
    assert first.messages[0].thread_id == s.id
    second = w.model.requests[1].messages
    assert len({m.id for m in second}) == 3
    # the tool's result names its tool, as a thread's does (the local model says it)
    assert [(m.role, m.sender_name) for m in second] == [
        ("user", None),
        ("assistant", None),
        ("tool", "read_file"),
    ]
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


async def test_a_usage_store_that_fails_does_not_fail_the_session() -> None:
    w = world(step("done"))

    async def down(records: list[Any]) -> None:
        raise Unavailable("the database is away")

    w.usage.add_usage = down  # type: ignore[method-assign]
    s = await w.start()
    await w.drain()
    assert (await w.get(s.id)).status == "finished"


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
    assert "-# App" in final["README.md"]["diff"]
    commit = s.work.pushed_commit
    assert commit is not None
    notices = [e.data["text"] for e in await w.events(s.id) if e.type == "notice"]
    assert f"pushed {commit[:12]} to {s.branch}" in notices
    pushed = [x for x in s.work.spans if x.name == "git push"]
    assert [x.attributes for x in pushed] == [{"agentsvc.git.branch": s.branch}]
    [pr] = w.host.opened
    assert pr["title"] == s.title
    pr_spans = [x for x in s.work.spans if x.name == "git pull_request"]
    assert [x.attributes for x in pr_spans] == [{"url.full": s.pr_url}]
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
    assert w.remote.fetches[-1][1] == s.work.base_commit
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
    await w.drain()
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
