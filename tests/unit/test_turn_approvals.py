"""Approval before a call (docs/tools.md, "Approval before a call"): a server-side
call whose source says it needs approval is not run; the turn ends with
``requires_action`` listing it (kind ``approval``); the next send's
``toolApprovals`` runs it (approved) or tells the model why not (denied, or
expired after the agent's ``approval_timeout_minutes``)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import ToolSpec
from agentsvc_core.use_cases.turn.conversation import SendInput, ToolApprovalIn, ToolResultIn
from agentsvc_core.use_cases.turn.events import (
    Done,
    RequiresAction,
    ToolCallEvent,
    ToolCallOut,
    ToolResult,
)
from agentsvc_core.use_cases.turn.reply import NOBODY_TO_APPROVE
from tests.unit.turn_world import (
    WHO,
    Script,
    Tools,
    World,
    calls,
    read_all,
    says,
    world,
)

DENIED = "error: the user denied this call; it was not run"


async def send(w: World, msg: SendInput) -> list[Any]:
    """A send through the API (``post``): its sender can answer approvals."""
    return await read_all(await w.conversation.post(WHO, w.thread.id, msg))


def approvals(*answers: tuple[str, bool] | tuple[str, bool, str]) -> SendInput:
    return SendInput(
        content="",
        tool_approvals=[
            ToolApprovalIn(tool_call_id=a[0], approved=a[1], reason=a[2] if len(a) > 2 else None)
            for a in answers
        ],
    )


def gated_tools() -> Tools:
    """``kb`` runs at once; ``refund`` waits for approval."""
    tools = Tools("kb")
    tools.specs.append(ToolSpec(name="refund", description="refund an order", approval=True))
    return tools


async def waiting_for_refund(**agent: Any) -> World:
    w = await world(
        Script(calls("refund"), says("done")),
        gated_tools(),
        agent={"default_model": "local", **agent} if agent else None,
    )
    events = await send(w, SendInput(content="refund it"))
    assert events[-2] == RequiresAction(
        tool_calls=[
            ToolCallOut(id="c-refund", name="refund", arguments={"q": "refund"}, kind="approval")
        ]
    )
    assert isinstance(events[-1], Done)
    return w


async def test_a_call_that_needs_approval_is_not_run_and_waits() -> None:
    w = await waiting_for_refund()
    assert w.tools.called == []
    (run,) = await w.runs()
    assert run.status == "requires_action"
    assert [(c.id, c.approval) for c in run.pending_tool_calls] == [("c-refund", True)]
    assert [m.role for m in await w.messages()] == ["user", "assistant"]
    # the assistant message keeps the call as the model made it
    (_, assistant) = await w.messages()
    assert [c.approval for c in assistant.tool_calls] == [False]


async def test_an_approved_call_runs_before_the_model_is_called_again() -> None:
    w = await waiting_for_refund()
    events = await send(w, approvals(("c-refund", True)))
    assert w.tools.called == [("refund", {"q": "refund"})]
    call = next(e for e in events if isinstance(e, ToolCallEvent))
    assert call.tool == ToolCallOut(id="c-refund", name="refund", arguments={"q": "refund"})
    assert ToolResult(tool_name="refund", tool_call_id="c-refund", result="refund answered") in (
        events
    )
    shown = w.model.requests[-1].messages
    assert [(m.role, m.content) for m in shown[-2:]] == [
        ("assistant", ""),
        ("tool", "refund answered"),
    ]
    stored = await w.messages()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].tool_call_id == "c-refund"
    (_, second) = await w.runs()
    assert (second.status, second.pending_tool_calls) == ("completed", ())


async def test_a_denied_call_is_never_run_and_the_model_reads_why() -> None:
    w = await waiting_for_refund()
    await send(w, approvals(("c-refund", False, "  no receipt  ")))
    assert w.tools.called == []
    last = w.model.requests[-1].messages[-1]
    assert (last.role, last.tool_call_id, last.sender_name) == ("tool", "c-refund", "refund")
    assert last.content == f"{DENIED}. Reason: no receipt"


async def test_a_denial_without_a_reason_says_only_that() -> None:
    w = await waiting_for_refund()
    await send(w, approvals(("c-refund", False, " ")))
    assert w.model.requests[-1].messages[-1].content == DENIED
    w = await waiting_for_refund()
    await send(w, approvals(("c-refund", False)))
    assert w.model.requests[-1].messages[-1].content == DENIED


async def test_a_send_must_answer_exactly_the_waiting_calls() -> None:
    w = await waiting_for_refund()
    for msg in (
        SendInput(content="never mind"),
        approvals(("other", True)),
        approvals(("c-refund", True), ("c-refund", False)),
        approvals(("c-refund", True), ("other", True)),
    ):
        with pytest.raises(InvalidInput) as info:
            await w.conversation.post(WHO, w.thread.id, msg)
        assert info.value.field == "tool_approvals"
        assert "c-refund" in info.value.detail
    assert w.tools.called == []
    # results for a client call nobody made are refused as before
    with pytest.raises(InvalidInput) as info:
        await w.conversation.post(
            WHO,
            w.thread.id,
            SendInput(content="", tool_results=[ToolResultIn(tool_call_id="c-refund", output="x")]),
        )
    assert info.value.field == "tool_results"


async def test_approvals_when_nothing_waits_are_refused() -> None:
    w = await world(Script(says("hi")), gated_tools())
    await send(w, SendInput(content="hi"))
    with pytest.raises(InvalidInput) as info:
        await w.conversation.post(WHO, w.thread.id, approvals(("c-refund", True)))
    assert info.value.field == "tool_approvals"
    assert info.value.detail.endswith("no reply is waiting for approvals")


async def test_an_approval_lasts_the_agents_limit_and_not_a_second_more() -> None:
    w = await waiting_for_refund()
    w.clock.advance(60 * 60)  # exactly the default 60 minutes: still waiting
    with pytest.raises(InvalidInput):
        await w.conversation.post(WHO, w.thread.id, SendInput(content="hello?"))
    w.clock.advance(1)
    await send(w, SendInput(content="hello?"))  # expired: the send need not answer it
    assert w.tools.called == []
    shown = w.model.requests[-1].messages
    assert [m.role for m in shown[-3:]] == ["assistant", "tool", "user"]
    assert shown[-2].content == (
        "error: the call was not run: nobody approved it within 60 minutes"
    )


async def test_an_expired_approval_does_not_run_even_when_approved() -> None:
    w = await waiting_for_refund(approval_timeout_minutes=5)
    w.clock.advance(5 * 60 + 1)
    with pytest.raises(InvalidInput):  # an answer given must still name the calls
        await w.conversation.post(WHO, w.thread.id, approvals(("other", True)))
    await send(w, approvals(("c-refund", True)))
    assert w.tools.called == []
    assert w.model.requests[-1].messages[-1].content == (
        "error: the call was not run: nobody approved it within 5 minutes"
    )


async def test_a_step_mixing_client_and_approval_calls_waits_for_both() -> None:
    w = await world(Script(calls("kb", "refund", "pick"), says("done")), gated_tools())
    events = await send(w, SendInput(content="go", tools=[ToolSpec(name="pick")]))
    # the server tool that needs no approval ran; the others wait, in the model's order
    assert w.tools.called == [("kb", {"q": "kb"})]
    assert events[-2] == RequiresAction(
        tool_calls=[
            ToolCallOut(id="c-refund", name="refund", arguments={"q": "refund"}, kind="approval"),
            ToolCallOut(id="c-pick", name="pick", arguments={"q": "pick"}),
        ]
    )
    result = [ToolResultIn(tool_call_id="c-pick", output="picked")]
    answer = [ToolApprovalIn(tool_call_id="c-refund", approved=True)]
    for partial, field in (
        (SendInput(content="", tool_results=result), "tool_approvals"),
        (SendInput(content="", tool_approvals=answer), "tool_results"),
    ):
        with pytest.raises(InvalidInput) as info:
            await w.conversation.post(WHO, w.thread.id, partial)
        assert info.value.field == field
    await send(w, SendInput(content="", tool_results=result, tool_approvals=answer))
    assert w.tools.called == [("kb", {"q": "kb"}), ("refund", {"q": "refund"})]
    shown = w.model.requests[-1].messages
    assert [(m.role, m.tool_call_id) for m in shown[-4:]] == [
        ("assistant", None),
        ("tool", "c-kb"),
        ("tool", "c-pick"),
        ("tool", "c-refund"),
    ]


async def test_an_approved_result_joins_its_step_before_the_message_sent_with_it() -> None:
    w = await waiting_for_refund()
    msg = SendInput(
        content="and thanks",
        tool_approvals=[ToolApprovalIn(tool_call_id="c-refund", approved=True)],
    )
    await send(w, msg)
    shown = w.model.requests[-1].messages
    assert [(m.role, m.content) for m in shown[-3:]] == [
        ("assistant", ""),
        ("tool", "refund answered"),
        ("user", "and thanks"),
    ]
    # stored in the order it happened; the next turn shows it in the same order
    stored = await w.messages()
    assert [m.role for m in stored[-4:]] == ["assistant", "user", "tool", "assistant"]
    await send(w, SendInput(content="more"))
    again = w.model.requests[-1].messages
    assert [m.role for m in again[1:5]] == ["assistant", "tool", "user", "assistant"]


def test_a_client_call_has_no_kind_on_the_wire() -> None:
    """A client that knows only the spec sees the calls as it always did."""
    wire = msgspec.json.encode(ToolCallOut(id="c", name="pick", arguments={}))
    assert wire == b'{"id":"c","name":"pick","arguments":{}}'
    wire = msgspec.json.encode(ToolCallOut(id="c", name="x", arguments={}, kind="approval"))
    assert wire == b'{"id":"c","name":"x","arguments":{},"kind":"approval"}'


async def test_where_nobody_can_approve_the_call_is_refused_at_once() -> None:
    """A runner's step, a channel, a public chat (``Conversation.send``): nobody can
    answer an approval, so the call is not run and the turn does not pause."""
    w = await world(Script(calls("refund", "kb"), says("done")), gated_tools())
    events = await read_all(await w.conversation.send(WHO, w.thread.id, SendInput(content="go")))
    assert not any(isinstance(e, RequiresAction) for e in events)
    assert isinstance(events[-1], Done)
    assert w.tools.called == [("kb", {"q": "kb"})]
    shown = w.model.requests[-1].messages
    assert [(m.tool_call_id, m.content) for m in shown[-2:]] == [
        ("c-refund", NOBODY_TO_APPROVE),
        ("c-kb", "kb answered"),
    ]
    (run,) = await w.runs()
    assert (run.status, run.pending_tool_calls) == ("completed", ())


class HoldSecondBegin:
    """The conversation store, holding the second ``begin_turn`` until released."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.begins = 0
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def begin_turn(self, *args: Any, **kwargs: Any) -> Any:
        self.begins += 1
        if self.begins == 2:
            self.entered.set()
            await self.release.wait()
        return await self.inner.begin_turn(*args, **kwargs)


async def test_two_sends_approving_the_same_call_run_it_once() -> None:
    held: HoldSecondBegin | None = None

    def wrap(inner: Any) -> HoldSecondBegin:
        nonlocal held
        held = HoldSecondBegin(inner)
        return held

    w = await world(Script(calls("refund"), says("done")), gated_tools(), store=wrap)
    await send(w, SendInput(content="refund it"))
    assert held is not None
    # B read the waiting call and is held before its run is stored; A answers it too
    late = asyncio.create_task(w.conversation.post(WHO, w.thread.id, approvals(("c-refund", True))))
    await held.entered.wait()
    await send(w, approvals(("c-refund", True)))
    assert w.tools.called == [("refund", {"q": "refund"})]
    held.release.set()
    await read_all(await late)
    assert w.tools.called == [("refund", {"q": "refund"})]  # not a second time
