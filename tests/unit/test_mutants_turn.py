"""The events of a streamed reply (docs/client-guide.md, "Events"; use_cases/turn/events.py)
and the turn's small shared parts (use_cases/turn/_private.py): event names and JSON
field names as docs/client-guide.md gives them, and how a reply interrupted at shutdown
is kept."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import msgspec

from agentsvc_core.entities import ToolCall, Usage, key_source
from agentsvc_core.errors import Upstream
from agentsvc_core.use_cases.turn._private import (
    INTERRUPTED,
    ReplyState,
    interrupted,
    message_status,
    tool_out,
    usage_out,
)
from agentsvc_core.use_cases.turn.events import (
    EVENT_NAMES,
    AuthChallenge,
    Challenge,
    Done,
    ErrorEvent,
    Meta,
    ProfileSwitchProposal,
    RequiresAction,
    Token,
    ToolCallEvent,
    ToolCallOut,
    ToolExecuting,
    ToolResult,
    Turn,
    UsageOut,
)
from tests.contract.test_conversations_contract import a_message, a_thread


def test_every_event_has_the_name_the_spec_gives() -> None:
    assert {cls.__name__: name for cls, name in EVENT_NAMES.items()} == {
        "Meta": "meta",
        "Token": "token",
        "ToolCallEvent": "tool_call",
        "ToolExecuting": "tool_executing",
        "ToolResult": "tool_result",
        "AuthChallenge": "auth_challenge",
        "RequiresAction": "requires_action",
        "ProfileSwitchProposal": "profile_switch_proposal",
        "Done": "done",
        "ErrorEvent": "error",
        "CompactionEvent": "compaction",  # not the spec's: only for a send that asks
    }


def test_event_data_has_the_spec_field_names() -> None:
    enc = msgspec.json.encode
    run, thread = uuid.UUID(int=1), uuid.UUID(int=2)
    at = datetime(2026, 1, 1, tzinfo=UTC)
    meta = msgspec.json.decode(
        enc(Meta(started_at=at, run_id=run, thread_id=thread, model="m", trace_id="ab" * 16))
    )
    # the five fields of meta (docs/client-guide.md, "Events"), the trace id among them
    assert set(meta) == {"startedAt", "runId", "threadId", "model", "traceId"}
    challenge = AuthChallenge(
        tool_name="t", challenge=Challenge(provider="p", redirect_url="https://a.example")
    )
    assert msgspec.json.decode(enc(challenge)) == {
        "toolName": "t",
        "challenge": {"provider": "p", "redirectUrl": "https://a.example"},
    }
    call = ToolCallOut(id="c", name="n", arguments={"a": 1})
    assert msgspec.json.decode(enc(RequiresAction(tool_calls=[call]))) == {
        "toolCalls": [{"id": "c", "name": "n", "arguments": {"a": 1}}]
    }
    assert set(msgspec.json.decode(enc(ToolExecuting(tool_name="t", tool_call_id="c")))) == {
        "tool_name",
        "tool_call_id",
    }
    assert msgspec.json.decode(enc(Done(ok=True, content="x"))) == {"ok": True, "content": "x"}
    usage = UsageOut(input_tokens=1, output_tokens=2, total_tokens=3)
    assert msgspec.json.decode(enc(usage)) == {
        "inputTokens": 1,
        "outputTokens": 2,
        "totalTokens": 3,
    }
    assert msgspec.json.decode(enc(ErrorEvent(code="X"))) == {"code": "X"}
    assert msgspec.json.decode(enc(ProfileSwitchProposal(target="a", reason="b"))) == {
        "target": "a",
        "reason": "b",
    }
    assert msgspec.json.decode(enc(ToolCallEvent(tool=call)))["tool"]["name"] == "n"
    assert set(msgspec.json.decode(enc(ToolResult(tool_name="t", tool_call_id="c", result="r"))))
    assert msgspec.json.decode(enc(Token(delta="d"))) == {"delta": "d"}


def test_usage_out_carries_every_count() -> None:
    assert usage_out(Usage(input_tokens=3, output_tokens=4, cached_input_tokens=2)) == UsageOut(
        input_tokens=3, output_tokens=4, total_tokens=7, cached_input_tokens=2
    )


def test_the_key_that_paid() -> None:
    assert key_source("sk-user") == "byok"
    assert key_source(None) == "platform"
    assert key_source("") == "platform"


def test_how_a_call_ended_is_the_assistant_messages_status() -> None:
    assert message_status(False, None) == "complete"
    assert message_status(True, None) == "stopped"
    assert message_status(True, Upstream("x")) == "stopped"
    assert message_status(False, Upstream("x")) == "failed"


def test_a_tool_call_out_is_the_call() -> None:
    call = ToolCall(id="c", name="n", arguments={"a": 1})
    assert tool_out(call) == ToolCallOut(id="c", name="n", arguments={"a": 1})


async def test_an_interrupted_reply_marks_only_a_last_assistant_message() -> None:
    thread = a_thread("org-i")
    begun: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    said = a_message(thread, "assistant", "partial")
    state = ReplyState(messages=[], begun=begun, new=[a_message(thread, "user"), said])
    interrupted(state)
    assert (state.status, state.error) == ("interrupted", INTERRUPTED)
    assert [m.status for m in state.new] == ["complete", "interrupted"]
    assert state.new[1].content == "partial"
    tool_last = ReplyState(messages=[], begun=begun, new=[said, a_message(thread, "tool")])
    interrupted(tool_last)
    assert [m.status for m in tool_last.new] == ["complete", "complete"]
    empty = ReplyState(messages=[], begun=begun)
    interrupted(empty)
    assert empty.status == "interrupted"
    assert (
        ErrorEvent(
            code="INTERRUPTED", detail="the service is shutting down; the partial reply was kept"
        )
        == INTERRUPTED
    )


async def test_a_reader_of_a_closed_turn_gets_the_rest_then_nothing() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    turn.emit(Token(delta="a"))
    turn.close()
    assert await turn.read(0, 5) == [Token(delta="a")]
    assert await turn.read(1, 5) == []
    assert turn.closed


async def test_a_reader_that_timed_out_leaves_no_waiter_behind() -> None:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    for _ in range(3):
        assert await turn.read(0, 0) is None
    assert turn._waiters == []
