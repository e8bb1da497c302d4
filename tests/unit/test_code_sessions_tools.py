"""The code session's tools in a sandbox (use_cases/code_sessions/tools.py), over the
fake sandbox (real ``sh -c`` in a folder): what each answers the model, what it
writes in the timeline, its refusals, and the diffs."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from agentsvc_core.entities.code_session import Computer
from agentsvc_core.ports.sandboxes import SandboxSpec
from agentsvc_core.use_cases.code_sessions.tools import (
    SAFE_AGAIN,
    TOOL_SPECS,
    Workspace,
    unified_diff,
)
from tests.fakes.sandbox import FakeSandbox

SPEC = SandboxSpec(instance_id="i", org_id="o", persistent=True, memory_mb=256)


async def workspace(timeout_s: int = 10, cancelled: Any = None) -> tuple[Workspace, FakeSandbox]:
    sandbox = FakeSandbox()
    started = await sandbox.start(SPEC)

    async def never() -> bool:
        return False

    ws = Workspace(
        sandbox, started.ref, SPEC, Computer(exec_timeout_s=timeout_s), cancelled or never
    )
    await sandbox.write_file(started.ref, "a.txt", b"one\ntwo\nthree\n")
    await sandbox.write_file(started.ref, "src/b.py", b"x = 1\nx = 1\n")
    return ws, sandbox


def test_the_tools_offered_and_which_may_run_again() -> None:
    assert [t.name for t in TOOL_SPECS] == [
        "exec",
        "read_file",
        "write_file",
        "list_files",
        "search",
        "edit",
        "ask_user",
    ]
    for spec in TOOL_SPECS:
        assert spec.parameters["type"] == "object"
        assert spec.description
    required = {t.name: t.parameters["required"] for t in TOOL_SPECS}
    assert required == {
        "exec": ["command"],
        "read_file": ["path"],
        "write_file": ["path", "content"],
        "list_files": [],
        "search": ["pattern"],
        "edit": ["path", "old_text"],
        "ask_user": ["question"],
    }
    assert {"read_file", "write_file", "list_files", "search"} == SAFE_AGAIN


async def test_exec_answers_output_and_exit_code() -> None:
    ws, _ = await workspace()
    out = await ws.run("exec", {"command": "cat a.txt; echo oops >&2; exit 3"})
    assert out.is_error is True
    assert out.content.endswith("\n[exit code: 3]")
    assert "one\ntwo\nthree\n" in out.content
    assert "oops" in out.content
    [event] = out.events
    assert event.type == "command"
    assert event.data["command"] == "cat a.txt; echo oops >&2; exit 3"
    assert event.data["exit_code"] == 3
    assert event.data["timed_out"] is False
    assert event.data["truncated"] is False
    assert isinstance(event.data["duration_ms"], int)
    ok = await ws.run("exec", {"command": "true"})
    assert ok.is_error is False
    assert ok.content == "\n[exit code: 0]"


async def test_exec_past_its_time_is_killed() -> None:
    ws, _ = await workspace(timeout_s=1)
    out = await ws.run("exec", {"command": "echo before; sleep 5"})
    assert out.content == "before\n\n[killed after 1 s (time limit)]"
    assert out.events[0].data["timed_out"] is True
    assert out.is_error is True


async def test_exec_stops_when_the_session_is_cancelled() -> None:
    asked = asyncio.Event()

    async def cancelled() -> bool:
        return asked.is_set()

    ws, _ = await workspace(timeout_s=30, cancelled=cancelled)
    task = asyncio.create_task(ws.run("exec", {"command": "sleep 20"}))
    await asyncio.sleep(0.3)
    asked.set()
    out = await asyncio.wait_for(task, 5)
    assert out.content == "the command was stopped (cancel)"
    assert out.is_error is True
    assert out.events[0].data["cancelled"] is True
    assert out.events[0].data["exit_code"] is None


async def test_long_output_is_cut_for_the_model_and_the_timeline() -> None:
    ws, _ = await workspace()
    out = await ws.run("exec", {"command": "python3 -c 'print(\"x\" * 20000)'"})
    assert out.content.startswith("x" * 16_000 + "\n... (")
    assert "more)" in out.content
    assert len(out.events[0].data["output"]) == 20_001


async def test_read_list_and_search() -> None:
    ws, _ = await workspace()
    read = await ws.run("read_file", {"path": "a.txt"})
    assert read.content == "one\ntwo\nthree\n"
    assert read.events == []
    assert read.is_error is False
    listed = await ws.run("list_files", {})
    assert listed.content == "src/\na.txt (14 bytes)"
    inner = await ws.run("list_files", {"path": "src"})
    assert inner.content == "src/b.py (12 bytes)"
    found = await ws.run("search", {"pattern": "t.o"})
    assert found.content == "./a.txt:2:two\n"
    assert found.is_error is False
    none = await ws.run("search", {"pattern": "zebra", "path": "src"})
    assert none.content == "(no match)"
    tricky = await ws.run("search", {"pattern": "'; touch pwned; '"})
    assert tricky.content == "(no match)"
    assert (await ws.run("exec", {"command": "ls pwned"})).is_error


async def test_write_reports_a_diff() -> None:
    ws, sandbox = await workspace()
    new = await ws.run("write_file", {"path": "new/c.txt", "content": "hi\n"})
    assert new.content == "wrote 3 bytes to new/c.txt"
    [event] = new.events
    assert event.type == "file_change"
    assert event.data == {
        "path": "new/c.txt",
        "change": "added",
        "diff": "--- /dev/null\n+++ b/new/c.txt\n@@ -0,0 +1 @@\n+hi\n",
    }
    changed = await ws.run("write_file", {"path": "a.txt", "content": "one\n"})
    assert changed.events[0].data["change"] == "modified"
    assert changed.events[0].data["diff"] == (
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1 @@\n one\n-two\n-three\n"
    )
    assert await sandbox.read_file(ws.ref, "a.txt") == b"one\n"


async def test_edit_replaces_one_unique_string() -> None:
    ws, sandbox = await workspace()
    done = await ws.run("edit", {"path": "a.txt", "old_text": "two", "new_text": "2"})
    assert done.content == "edited a.txt"
    assert done.is_error is False
    assert await sandbox.read_file(ws.ref, "a.txt") == b"one\n2\nthree\n"
    assert done.events[0].data["change"] == "modified"
    assert "-two\n+2\n" in done.events[0].data["diff"]
    twice = await ws.run("edit", {"path": "src/b.py", "old_text": "x = 1", "new_text": "y"})
    assert twice.content == "error: old_text appears 2 times in src/b.py"
    assert twice.is_error is True
    missing = await ws.run("edit", {"path": "a.txt", "old_text": "zzz", "new_text": "y"})
    assert missing.content == "error: old_text is not in a.txt"
    removed = await ws.run("edit", {"path": "a.txt", "old_text": "2\n"})
    assert removed.content == "edited a.txt"
    assert await sandbox.read_file(ws.ref, "a.txt") == b"one\nthree\n"
    empty = await ws.run("edit", {"path": "a.txt", "old_text": ""})
    assert empty.content == "error: old_text must not be empty"


@pytest.mark.parametrize(
    ("name", "args", "said"),
    [
        ("exec", {}, "error: command must be a string"),
        ("read_file", {"path": 3}, "error: path must be a string"),
        ("write_file", {"path": "x"}, "error: content must be a string"),
        ("read_file", {"path": "nope.txt"}, "error: no file nope.txt"),
        ("read_file", {"path": "../out"}, "error: path: must be inside the workspace"),
        ("frobnicate", {}, "error: no tool named 'frobnicate'"),
    ],
)
async def test_refusals_are_the_models_to_read(name: str, args: dict[str, Any], said: str) -> None:
    ws, _ = await workspace()
    out = await ws.run(name, args)
    assert out.content == said
    assert out.is_error is True
    assert out.events == []


def test_unified_diff_of_a_deletion_and_of_bytes() -> None:
    assert unified_diff("a", b"x\n", None) == "--- a/a\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n"
    assert (
        unified_diff("p.bin", b"\xff\x00", b"\xfe") == "Binary files a/p.bin and b/p.bin differ\n"
    )
    assert unified_diff("same", b"x\n", b"x\n") == ""
    big = unified_diff("big", None, ("y" * 100 + "\n").encode() * 1000)
    assert big.endswith("\n... (cut)\n")
    assert len(big) == 64_000 + len("\n... (cut)\n")
