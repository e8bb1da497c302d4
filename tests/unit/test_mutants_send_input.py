"""The checks of a send (docs/client-guide.md, "Your own tools (client-side tools)" and
"Per-message options"), made before anything is read or stored
(use_cases/turn/send_input.py): each names the field at fault (docs/api.md, "Errors")."""

from __future__ import annotations

import pytest

from agentsvc_core.entities import ToolCall
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import ToolSpec
from agentsvc_core.rules import MAX_CLIENT_TOOLS, MAX_CONTENT, MAX_PREAMBLE
from agentsvc_core.use_cases.turn.send_input import (
    SendInput,
    ToolResultIn,
    check_input,
    check_tool_results,
)


def refused(msg: SendInput) -> InvalidInput:
    with pytest.raises(InvalidInput) as info:
        check_input(msg)
    return info.value


def tools(n: int) -> list[ToolSpec]:
    return [ToolSpec(name=f"t{i}") for i in range(n)]


def test_content_up_to_the_limit_is_accepted_and_one_more_character_is_not() -> None:
    check_input(SendInput(content="x" * MAX_CONTENT))
    assert refused(SendInput(content="x" * (MAX_CONTENT + 1))).field == "content"


def test_content_with_a_nul_is_refused() -> None:
    assert refused(SendInput(content="a\x00b")).field == "content"


def test_blank_content_without_tool_results_is_refused() -> None:
    for blank in ("", "  \n\t"):
        error = refused(SendInput(content=blank))
        assert (error.field, error.problem) == ("content", "must not be empty")


def test_empty_content_is_accepted_with_tool_results() -> None:
    check_input(SendInput(content="", tool_results=[ToolResultIn(tool_call_id="c", output="r")]))


def test_a_model_override_must_be_a_model_id() -> None:
    check_input(SendInput(content="hi", model_override="beta:gpt-4o"))
    assert refused(SendInput(content="hi", model_override="no spaces")).field == "model_override"


def test_the_message_overlay_is_bounded_like_a_preamble() -> None:
    check_input(SendInput(content="hi", system_prompt_overlay="x" * MAX_PREAMBLE))
    too_long = SendInput(content="hi", system_prompt_overlay="x" * (MAX_PREAMBLE + 1))
    assert refused(too_long).field == "system_prompt_overlay"
    assert refused(SendInput(content="hi", system_prompt_overlay="\x00")).field == (
        "system_prompt_overlay"
    )


def test_metadata_is_checked() -> None:
    assert refused(SendInput(content="hi", metadata={"k": "\x00"})).field == "metadata.k"


def test_at_most_the_limit_of_client_tools() -> None:
    check_input(SendInput(content="hi", tools=tools(MAX_CLIENT_TOOLS)))
    error = refused(SendInput(content="hi", tools=tools(MAX_CLIENT_TOOLS + 1)))
    assert (error.field, error.problem) == ("tools", f"at most {MAX_CLIENT_TOOLS} tools")


def test_client_tool_names_must_be_unique() -> None:
    error = refused(SendInput(content="hi", tools=[ToolSpec(name="a"), ToolSpec(name="a")]))
    assert (error.field, error.problem) == ("tools", "tool names must be unique")


def test_the_profile_switch_tool_name_is_reserved() -> None:
    error = refused(SendInput(content="hi", tools=[ToolSpec(name="propose_profile_switch")]))
    assert (error.field, error.problem) == ("tools", "'propose_profile_switch' is reserved")


def test_every_tool_result_is_checked() -> None:
    results = [
        ToolResultIn(tool_call_id="a", output="fine"),
        ToolResultIn(tool_call_id="b", output="x" * (MAX_CONTENT + 1)),
    ]
    assert refused(SendInput(content="", tool_results=results)).field == "tool_results"


PENDING = (
    ToolCall(id="c1", name="a", arguments={}),
    ToolCall(id="c2", name="b", arguments={}),
)


def answers(*ids: str) -> SendInput:
    return SendInput(
        content="", tool_results=[ToolResultIn(tool_call_id=i, output="r") for i in ids]
    )


def test_results_answering_exactly_the_pending_calls_in_any_order_are_accepted() -> None:
    check_tool_results(PENDING, answers("c2", "c1"))
    check_tool_results((), SendInput(content="hi"))


@pytest.mark.parametrize("ids", [(), ("c1",), ("c1", "c2", "c3"), ("c1", "c1")])
def test_results_that_do_not_answer_exactly_the_pending_calls_are_refused(
    ids: tuple[str, ...],
) -> None:
    with pytest.raises(InvalidInput) as info:
        check_tool_results(PENDING, answers(*ids))
    assert (info.value.field, info.value.problem) == (
        "tool_results",
        "the previous reply is waiting for client tool results: send toolResults "
        "answering exactly the calls ['c1', 'c2']",
    )


def test_results_when_nothing_waits_for_them_are_refused() -> None:
    with pytest.raises(InvalidInput) as info:
        check_tool_results((), answers("c1"))
    assert (info.value.field, info.value.problem) == (
        "tool_results",
        "no reply is waiting for client tool results",
    )
