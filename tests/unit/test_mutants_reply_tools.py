"""use_cases/turn/reply_tools.py: a server-side tool call's events, outcome, span and
result (mutation tests, docs/development.md)."""

from __future__ import annotations

import uuid
from collections.abc import Coroutine
from types import SimpleNamespace
from typing import Any

import pytest

from agentsvc_core.entities import ToolCall
from agentsvc_core.errors import Upstream
from agentsvc_core.ports import ToolAuthRequired, ToolSpec
from agentsvc_core.ports.telemetry import AttributeValue
from agentsvc_core.use_cases.turn import reply_tools
from agentsvc_core.use_cases.turn._private import Plan
from agentsvc_core.use_cases.turn.context import PROPOSE_PROFILE_SWITCH
from agentsvc_core.use_cases.turn.events import (
    AuthChallenge,
    Challenge,
    ProfileSwitchProposal,
    ToolCallEvent,
    ToolCallOut,
    ToolExecuting,
    ToolResult,
    Turn,
)
from agentsvc_core.use_cases.turn.reply_tools import TOOL_TIMEOUT_S, run_tool
from tests.contract.test_agents_contract import agent_in
from tests.contract.test_conversations_contract import a_thread
from tests.unit.turn_world import WHO, Script, Tools

ORG = WHO.org_id


class FakeSpan:
    def __init__(self, name: str, attributes: dict[str, AttributeValue]) -> None:
        self.name = name
        self.attributes = dict(attributes)
        self.failed: list[str] = []
        self.ended = False
        self.input: object = None
        self.output: object = None

    def set(self, key: str, value: AttributeValue) -> None:
        self.attributes[key] = value

    def fail(self, error_type: str) -> None:
        self.failed.append(error_type)

    def payload(self, input: object = None, output: object = None) -> None:
        if input is not None:
            self.input = input
        if output is not None:
            self.output = output

    def __enter__(self) -> FakeSpan:
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        self.ended = True


class FakeTracer:
    def __init__(self) -> None:
        self.spans: list[FakeSpan] = []

    @property
    def propagating(self) -> bool:
        return False

    def start(
        self,
        name: str,
        kind: str = "internal",
        attributes: dict[str, AttributeValue] | None = None,
        parent: object = None,
    ) -> FakeSpan:
        span = FakeSpan(name, attributes or {})
        self.spans.append(span)
        return span


def a_plan(*server: str) -> Plan:
    agent = agent_in(ORG, default_model="local")
    return Plan(
        who=WHO,
        thread=a_thread(ORG, agent.id),
        agent=agent,
        model=Script(),
        model_name="local",
        model_id="local",
        system="",
        server_tools={n: ToolSpec(name=n, description=n) for n in server},
        client_tools={},
        offered=[],
        metadata={},
    )


async def call(
    name: str, tools: Tools, *server: str, arguments: dict[str, Any] | None = None
) -> tuple[str, list[Any], FakeSpan]:
    turn = Turn(uuid.uuid4(), uuid.uuid4())
    tracer = FakeTracer()
    plan = a_plan(*server)
    the_call = ToolCall(id="c-1", name=name, arguments=arguments or {"q": 1})
    result = await run_tool(tools, tracer, plan, the_call, turn)  # type: ignore[arg-type]
    assert len(tracer.spans) == 1
    assert tracer.spans[0].ended
    return result, turn.events, tracer.spans[0]


def opening(name: str, arguments: dict[str, Any] | None = None) -> list[Any]:
    return [
        ToolCallEvent(tool=ToolCallOut(id="c-1", name=name, arguments=arguments or {"q": 1})),
        ToolExecuting(tool_name=name, tool_call_id="c-1"),
    ]


async def test_a_tool_that_answers_gives_its_answer_to_the_model_and_the_client() -> None:
    tools = Tools("search")
    tools.answers["search"] = "found 3"
    result, events, span = await call("search", tools, "search")
    assert result == "found 3"
    assert events == [
        *opening("search"),
        ToolResult(tool_name="search", tool_call_id="c-1", result="found 3"),
    ]
    assert tools.called == [("search", {"q": 1})]
    assert len(tools.callers) == 1
    assert tools.callers[0][0] == WHO
    assert tools.callers[0][1].org_id == ORG
    assert span.name == "execute_tool search"
    assert span.attributes == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "search",
        "gen_ai.tool.call.id": "c-1",
        "gen_ai.tool.type": "extension",
        "agentsvc.tool.outcome": "ok",
    }
    assert span.failed == []


async def test_a_tool_not_offered_is_unavailable_and_not_called() -> None:
    tools = Tools("search")
    result, events, span = await call("search", tools)
    expected = "error: the tool 'search' is not available in this conversation"
    assert result == expected
    assert events == [
        *opening("search"),
        ToolResult(tool_name="search", tool_call_id="c-1", result=expected),
    ]
    assert tools.called == []
    assert span.attributes["gen_ai.tool.type"] == "function"
    assert span.attributes["agentsvc.tool.outcome"] == "unavailable"
    assert span.failed == ["TOOL_UNAVAILABLE"]


async def test_a_tool_answering_error_is_a_failed_call_whose_answer_the_model_reads() -> None:
    tools = Tools("search")
    tools.answers["search"] = "error: the index is down"
    result, events, span = await call("search", tools, "search")
    assert result == "error: the index is down"
    assert events[-1] == ToolResult("search", "c-1", "error: the index is down")
    assert span.attributes["agentsvc.tool.outcome"] == "error"
    assert span.failed == ["TOOL_ERROR"]


async def test_an_answer_that_mentions_an_error_later_is_ok() -> None:
    tools = Tools("search")
    tools.answers["search"] = "no error: all fine"
    result, _, span = await call("search", tools, "search")
    assert result == "no error: all fine"
    assert span.attributes["agentsvc.tool.outcome"] == "ok"
    assert span.failed == []


async def test_a_tool_that_needs_authorization_shows_the_user_a_challenge() -> None:
    tools = Tools("drive")
    tools.answers["drive"] = ToolAuthRequired("Google", "https://auth.example/x", "your Drive")
    result, events, span = await call("drive", tools, "drive")
    assert result == (
        "The user must first authorize access to Google; they were shown a link to do so."
    )
    assert events == [
        *opening("drive"),
        AuthChallenge(
            tool_name="drive",
            challenge=Challenge(
                provider="Google", redirect_url="https://auth.example/x", description="your Drive"
            ),
        ),
        ToolResult(tool_name="drive", tool_call_id="c-1", result=result),
    ]
    assert span.attributes["agentsvc.tool.outcome"] == "auth_required"
    assert span.failed == []


async def test_a_tool_that_fails_answers_its_error_detail() -> None:
    tools = Tools("search")
    tools.answers["search"] = Upstream("the server said 502")
    result, events, span = await call("search", tools, "search")
    assert result == "error: the server said 502"
    assert events[-1] == ToolResult("search", "c-1", "error: the server said 502")
    assert span.attributes["agentsvc.tool.outcome"] == "error"
    assert span.failed == ["Upstream"]


async def test_a_tool_is_given_60_seconds_then_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    limits: list[float] = []

    async def wait_for(aw: Coroutine[Any, Any, Any], limit: float) -> Any:
        limits.append(limit)
        aw.close()
        raise TimeoutError

    # Only reply_tools' own asyncio.wait_for is replaced: patching the asyncio module
    # itself reached every task on the loop (a follower's Event.wait was closed under it).
    monkeypatch.setattr(reply_tools, "asyncio", SimpleNamespace(wait_for=wait_for))
    tools = Tools("slow")
    result, events, span = await call("slow", tools, "slow")
    assert TOOL_TIMEOUT_S == 60.0
    assert limits == [60.0]
    assert result == "error: the tool 'slow' did not answer within 60 s"
    assert events[-1] == ToolResult("slow", "c-1", result)
    assert span.attributes["agentsvc.tool.outcome"] == "timeout"
    assert span.failed == ["TOOL_TIMEOUT"]


@pytest.mark.parametrize("server", [(), (PROPOSE_PROFILE_SWITCH,)])
async def test_a_profile_switch_is_proposed_to_the_user_not_made(server: tuple[str, ...]) -> None:
    tools = Tools(PROPOSE_PROFILE_SWITCH)
    arguments = {"target": "coder", "reason": "code questions"}
    result, events, span = await call(PROPOSE_PROFILE_SWITCH, tools, *server, arguments=arguments)
    assert result == (
        "The proposal to switch to 'coder' was shown to the user. The profile has not changed."
    )
    assert events == [
        *opening(PROPOSE_PROFILE_SWITCH, arguments),
        ProfileSwitchProposal(target="coder", reason="code questions"),
        ToolResult(tool_name=PROPOSE_PROFILE_SWITCH, tool_call_id="c-1", result=result),
    ]
    assert tools.called == []
    assert span.attributes["gen_ai.tool.type"] == "function"
    assert span.attributes["agentsvc.tool.outcome"] == "ok"
    assert span.failed == []


async def test_a_profile_switch_without_arguments_proposes_nothing_named() -> None:
    tools = Tools()
    result, events, _ = await call(PROPOSE_PROFILE_SWITCH, tools, arguments={"x": 1})
    assert events[2] == ProfileSwitchProposal(target="", reason="")
    assert result.startswith("The proposal to switch to '' was shown")
