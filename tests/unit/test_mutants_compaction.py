"""Summary compaction (docs/compaction.md; use_cases/turn/compaction.py): the estimate,
what the summary covers, where the kept part starts, the summary request, and that a
failed or empty summary changes nothing."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agentsvc_adapters.crypto.aesgcm import AesGcmBox
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Message, Role, ToolCall, Usage
from agentsvc_core.errors import Upstream
from agentsvc_core.ports import TextDelta, UsageReport
from agentsvc_core.use_cases.turn.compaction import (
    KEEP_RECENT,
    SUMMARY_PROMPT,
    Checkpoint,
    Compactor,
    estimate,
    transcript,
)
from tests.contract.test_conversations_contract import a_message, a_thread
from tests.unit.turn_world import Script

THREAD = a_thread("org-compact")
BOX = AesGcmBox([("k1", b"\x04" * 32)])


def msg(role: Role = "user", content: str = "hi", **over: Any) -> Message:
    return a_message(THREAD, role, content, **over)


def compactor() -> Compactor:
    return Compactor(MemoryStorage().secrets, BOX)


def test_the_estimate_is_a_token_per_four_characters_plus_one() -> None:
    assert estimate("", []) == 1
    assert estimate("abc", []) == 1
    assert estimate("abcd", []) == 2
    assert estimate("ab", [msg(content="cdefgh")]) == 3
    call = ToolCall(id="c", name="abcd", arguments={"k": 1})  # str(arguments) is 8 characters
    assert estimate("", [msg("assistant", "", tool_calls=(call,))]) == 4


def test_the_transcript_names_who_said_what_and_the_tool_calls() -> None:
    call = ToolCall(id="c", name="kb", arguments={"q": "x"})
    lines = transcript(
        "",
        [
            msg("user", "find x"),
            msg("assistant", "looking", tool_calls=(call,)),
            msg("tool", "x is 1", sender_name="kb"),
            msg("tool", "anonymous"),
        ],
    )
    assert lines == (
        "user: find x\nassistant: looking [calls kb({'q': 'x'})]\nkb: x is 1\ntool: anonymous"
    )


def test_the_transcript_starts_with_the_summary_so_far() -> None:
    assert transcript("earlier", [msg("user", "more")]) == "Summary so far:\nearlier\n\nuser: more"


def test_after_keeps_the_messages_the_summary_does_not_cover() -> None:
    history = [msg(content=str(i)) for i in range(4)]
    assert Compactor.after(Checkpoint(), history) == history
    assert Compactor.after(Checkpoint(through=history[1].id), history) == history[2:]
    assert Compactor.after(Checkpoint(through=history[3].id), history) == []
    assert Compactor.after(Checkpoint(through=uuid.uuid4()), history) == history


def test_the_summary_follows_the_agents_instructions_in_the_system_prompt() -> None:
    assert Compactor.with_summary("Be kind.", Checkpoint()) == "Be kind."
    assert Compactor.with_summary("Be kind.", Checkpoint(summary="they met")) == (
        "Be kind.\n\nSummary of the earlier conversation:\nthey met"
    )
    assert Compactor.with_summary("", Checkpoint(summary="they met")) == (
        "Summary of the earlier conversation:\nthey met"
    )


def test_tokens_use_the_providers_last_count_plus_what_came_since() -> None:
    c = compactor()
    history = [msg(content="x" * 40) for _ in range(3)]
    assert c.tokens(Checkpoint(), "sys!", history) == estimate("sys!", history)
    counted = Checkpoint(input_tokens=1000, counted=2)
    assert c.tokens(counted, "sys!", history) == 1000 + estimate("", history[2:])
    assert c.tokens(Checkpoint(input_tokens=1000, counted=3), "s", history) == 1000 + 1
    # a count for more messages than there are (the history shrank): estimate instead
    assert c.tokens(Checkpoint(input_tokens=1000, counted=4), "sys!", history) == estimate(
        "sys!", history
    )


async def test_a_checkpoint_is_empty_until_saved_and_read_back_per_thread() -> None:
    c = compactor()
    assert await c.checkpoint("org-compact", THREAD.id) == Checkpoint()
    cp = Checkpoint(summary="s", through=uuid.uuid4(), input_tokens=5, counted=2)
    await c.save("org-compact", THREAD.id, cp)
    assert await c.checkpoint("org-compact", THREAD.id) == cp
    assert await c.checkpoint("org-compact", uuid.uuid4()) == Checkpoint()
    assert await c.checkpoint("org-other", THREAD.id) == Checkpoint()


def conversation(n: int) -> list[Message]:
    """``n`` exchanges: user, assistant."""
    out: list[Message] = []
    for i in range(n):
        out += [msg("user", f"q{i}"), msg("assistant", f"a{i}")]
    return out


async def test_the_summary_covers_all_but_the_recent_messages() -> None:
    model = Script([TextDelta(" the "), TextDelta("summary "), UsageReport(Usage(input_tokens=9))])
    history = conversation(4)  # 8 messages: the last 4 are kept
    done = await compactor().compact(model, "m1", Checkpoint(summary="before"), history, "sk-k")
    assert done is not None
    cp, usage = done
    assert cp == Checkpoint(summary="the summary", through=history[3].id)
    assert usage == Usage(input_tokens=9)
    (request,) = model.requests
    assert (request.model, request.system, request.max_tokens, request.api_key) == (
        "m1",
        SUMMARY_PROMPT,
        2048,
        "sk-k",
    )
    (sent,) = request.messages
    assert sent.role == "user"
    assert sent.content == transcript("before", history[:4])
    assert (sent.tool_calls, sent.tool_call_id) == ((), None)
    assert KEEP_RECENT == 4


async def test_the_kept_part_starts_at_a_user_message() -> None:
    call = ToolCall(id="c", name="kb", arguments={})
    history = [
        msg("user", "q0"),
        msg("assistant", "a0"),
        msg("user", "q1"),
        msg("assistant", "", tool_calls=(call,)),
        msg("tool", "r", tool_call_id="c"),
        msg("assistant", "a1"),
        msg("user", "q2"),
    ]
    model = Script([TextDelta("sum")])
    done = await compactor().compact(model, "m", Checkpoint(), history, None)
    assert done is not None
    assert done[0].through == history[1].id  # not in the middle of the tool exchange
    assert done[1] == Usage()


async def test_nothing_to_summarise_in_a_short_history() -> None:
    model = Script([TextDelta("sum")])
    for n in (0, 2):
        assert await compactor().compact(model, "m", Checkpoint(), conversation(n), None) is None
    # five messages, but the only user message to cut at is the first
    five = [msg("user"), *(msg("assistant") for _ in range(4))]
    assert await compactor().compact(model, "m", Checkpoint(), five, None) is None
    assert model.requests == []


async def test_exactly_one_message_more_than_kept_is_summarised() -> None:
    history = [
        msg("user", "old"),
        msg("user", "q"),
        msg("assistant"),
        msg("user"),
        msg("assistant"),
    ]
    model = Script([TextDelta("sum")])
    done = await compactor().compact(model, "m", Checkpoint(), history, None)
    assert done is not None
    assert done[0].through == history[0].id


@pytest.mark.parametrize(
    "step",
    [[Upstream("down")], [TextDelta("half"), RuntimeError("cut")], [TextDelta("  ")], []],
)
async def test_a_failed_or_empty_summary_changes_nothing(step: list[Any]) -> None:
    done = await compactor().compact(Script(step), "m", Checkpoint(), conversation(4), None)
    assert done is None


def test_the_transcript_lists_every_tool_call() -> None:
    calls = (ToolCall(id="1", name="a", arguments={}), ToolCall(id="2", name="b", arguments={}))
    assert transcript("", [msg("assistant", "x", tool_calls=calls)]) == (
        "assistant: x [calls a({})] [calls b({})]"
    )


@pytest.mark.parametrize("last_old", ["tool", "assistant"])
async def test_the_summary_request_is_a_plain_user_message(last_old: str) -> None:
    call = ToolCall(id="c", name="kb", arguments={})
    old = (
        [msg("user"), msg("assistant", "", tool_calls=(call,)), msg("tool", "r", tool_call_id="c")]
        if last_old == "tool"
        else [msg("user"), msg("assistant", "", tool_calls=(call,))]
    )
    model = Script([TextDelta("sum")])
    done = await compactor().compact(model, "m", Checkpoint(), [*old, *conversation(2)], None)
    assert done is not None
    assert done[0].through == old[-1].id
    (sent,) = model.requests[0].messages
    assert (sent.role, sent.tool_calls, sent.tool_call_id) == ("user", (), None)
