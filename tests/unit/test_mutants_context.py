"""Which tools the model sees under a profile, which profile applies, and the
switch-proposal tool, pinned. Written to kill the mutants `make mutation` found
alive in ``agentsvc_core.use_cases.turn.context`` (docs/development.md)."""

from __future__ import annotations

import uuid
from typing import Any

from agentsvc_core.entities import Message, Thread, ToolCall, ToolProfile
from agentsvc_core.ports import ToolSpec
from agentsvc_core.use_cases.turn.context import (
    PROPOSE_PROFILE_SWITCH,
    effective_profile,
    gate_tools,
    model_history,
    profile_switch_tool,
    system_prompt,
)
from tests.unit.test_mutants_rules import NOW, agent

TOOLS = [ToolSpec(name="search"), ToolSpec(name="mcp__write"), ToolSpec(name="read")]
PROFILES = {
    "reader": ToolProfile(tools=("search", "read"), description="look things up"),
    "writer": ToolProfile(tools=("mcp__write",)),
}


def thread(active_profile: str | None = None) -> Thread:
    fields: dict[str, Any] = {
        "id": uuid.uuid4(),
        "org_id": "org",
        "agent_id": uuid.uuid4(),
        "title": None,
        "kind": "single",
        "status": "idle",
        "active_profile": active_profile,
        "system_prompt_overlay": None,
        "metadata": {},
        "resource_bindings": [],
        "created_by": None,
        "created_at": NOW,
        "updated_at": NOW,
    }
    return Thread(**fields)


def names(tools: list[ToolSpec]) -> list[str]:
    return [t.name for t in tools]


def test_a_profile_shows_only_its_tools_in_their_order() -> None:
    gated = gate_tools(agent(tool_profiles=PROFILES), "reader", iter(TOOLS))
    assert names(gated) == ["search", "read"]
    assert names(gate_tools(agent(tool_profiles=PROFILES), "writer", TOOLS)) == ["mcp__write"]


def test_without_a_known_profile_every_tool_is_shown() -> None:
    with_profiles = agent(tool_profiles=PROFILES)
    assert names(gate_tools(with_profiles, None, iter(TOOLS))) == names(TOOLS)
    assert names(gate_tools(with_profiles, "unknown", iter(TOOLS))) == names(TOOLS)
    assert names(gate_tools(agent(), "reader", iter(TOOLS))) == names(TOOLS)
    assert names(gate_tools(agent(tool_profiles={}), "reader", iter(TOOLS))) == names(TOOLS)


def test_an_empty_profile_shows_no_tool() -> None:
    empty = agent(tool_profiles={"none": ToolProfile()})
    assert gate_tools(empty, "none", TOOLS) == []


def test_the_profile_is_the_message_then_the_thread_then_the_agent() -> None:
    a = agent(tool_profiles=PROFILES, default_profile="reader")
    assert effective_profile(a, thread("writer"), "reader") == "reader"
    assert effective_profile(a, thread("writer"), None) == "writer"
    assert effective_profile(a, thread(None), None) == "reader"
    assert effective_profile(agent(), thread(None), None) is None


def test_no_switch_tool_without_profiles() -> None:
    assert profile_switch_tool(agent(), "x") is None
    assert profile_switch_tool(agent(tool_profiles={}), None) is None


def test_the_switch_tool() -> None:
    tool = profile_switch_tool(agent(tool_profiles=PROFILES), "writer")
    assert tool is not None
    assert tool.name == PROPOSE_PROFILE_SWITCH == "propose_profile_switch"
    assert tool.description == (
        "Propose that the user switch this conversation to another tool profile "
        "(current: writer). Profiles: reader: look things up; writer. "
        "The switch happens only if the user accepts."
    )
    assert tool.parameters == {
        "type": "object",
        "properties": {
            "target": {"type": "string", "enum": ["reader", "writer"]},
            "reason": {"type": "string"},
        },
        "required": ["target", "reason"],
    }
    unnamed = profile_switch_tool(agent(tool_profiles=PROFILES), None)
    assert unnamed is not None
    assert "(current: none)" in unnamed.description


def test_empty_prompt_parts_are_left_out() -> None:
    assert system_prompt("", None, "m") == "m"
    assert system_prompt("p") == "p"
    assert system_prompt("", None, "") == ""


def test_an_assistant_step_that_said_nothing_is_left_out() -> None:
    def message(role: str, content: str, calls: int = 0) -> Message:
        return Message(
            id=uuid.uuid4(),
            org_id="org",
            thread_id=uuid.UUID(int=1),
            role=role,  # type: ignore[arg-type]
            content=content,
            created_at=NOW,
            tool_calls=tuple(ToolCall(id=f"c{i}", name="t", arguments={}) for i in range(calls)),
        )

    user, empty = message("user", "hi"), message("assistant", "")
    said, called = message("assistant", "hello"), message("assistant", "", calls=1)
    empty_user = message("user", "")
    assert model_history([user, empty, said, called, empty_user]) == [
        user,
        said,
        called,
        empty_user,
    ]


def test_a_result_stored_after_a_later_message_goes_back_to_its_step() -> None:
    """An approved call's result is stored after the message sent with the approval:
    the model is shown it with its step's other results."""

    def message(role: str, content: str = "", **over: Any) -> Message:
        return Message(
            id=uuid.uuid4(),
            org_id="org",
            thread_id=uuid.UUID(int=1),
            role=role,  # type: ignore[arg-type]
            content=content,
            created_at=NOW,
            **over,
        )

    def calls(*ids: str) -> Message:
        made = tuple(ToolCall(id=i, name="t", arguments={}) for i in ids)
        return message("assistant", tool_calls=made)

    first, second = calls("a1"), calls("b1", "b2")
    a1 = message("tool", "r", tool_call_id="a1")
    b1 = message("tool", "r", tool_call_id="b1")
    b2 = message("tool", "r", tool_call_id="b2")
    orphan = message("tool", "r", tool_call_id="zz")
    asked, later = message("user", "go"), message("user", "and then")
    assert model_history([asked, first, a1, second, b1, later, b2, orphan]) == [
        asked,
        first,
        a1,
        second,
        b1,
        b2,
        later,
        orphan,  # no call of the latest step: where it was
    ]
    # in order already: unchanged
    assert model_history([first, a1, second, b1, b2, later]) == [first, a1, second, b1, b2, later]
    # a result of an older step stays where it is
    assert model_history([first, second, later, a1]) == [first, second, later, a1]
