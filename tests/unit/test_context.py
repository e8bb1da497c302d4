"""Property tests of the context builder: prompt joining, history order, metadata merge."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from agentsvc_core.entities import Message, ToolCall
from agentsvc_core.rules import join_overlay
from agentsvc_core.use_cases.turn.context import merged_metadata, model_history, system_prompt

text = st.text(max_size=50)


def _blank_line_joined(parts: list[str]) -> str:
    """The rule spelled out: each part after the first is preceded by one blank line,
    i.e. two newline characters."""
    out = ""
    for i, part in enumerate(parts):
        out += part if i == 0 else "\n" + "\n" + part
    return out


@given(parts=st.lists(text, max_size=5))
def test_overlay_arrays_are_joined_with_a_blank_line(parts: list[str]) -> None:
    # overlay arrays are joined with a blank line, i.e. two newline characters
    # (docs/api.md, "Threads"); every element counts, an empty one too
    assert join_overlay(parts) == _blank_line_joined(parts)
    assert join_overlay(["a", "b", "c"]) == "a\n\nb\n\nc"
    assert join_overlay(["a", "", "b"]) == "a\n\n\n\nb"
    assert join_overlay([]) == ""
    assert join_overlay("single") == "single"
    assert join_overlay(None) is None


@given(preamble=text, thread=st.one_of(st.none(), text), message=st.one_of(st.none(), text))
def test_system_prompt_is_preamble_then_thread_then_message(
    preamble: str, thread: str | None, message: str | None
) -> None:
    # the system prompt is the agent's stablePreamble, then the thread overlay, then the
    # message overlay, joined by a blank line (docs/client-guide.md, "Per-message
    # options"). A part that is absent or empty is not a part: it adds no blank line
    # (no prompt starts, ends or doubles a blank line because an overlay was empty).
    present = [p for p in (preamble, thread, message) if p is not None and len(p) > 0]
    assert system_prompt(preamble, thread, message) == _blank_line_joined(present)


def test_system_prompt_examples() -> None:
    assert system_prompt("P", "T", "M") == "P\n\nT\n\nM"
    assert system_prompt("P", None, "M") == "P\n\nM"
    assert system_prompt("P", "", "M") == "P\n\nM"
    assert system_prompt("", "T", None) == "T"
    assert system_prompt("", None, None) == ""
    assert system_prompt("P\n", "T") == "P\n\n\nT"  # parts are not trimmed


@given(
    thread=st.dictionaries(text, text, max_size=6),
    message=st.one_of(st.none(), st.dictionaries(text, text, max_size=6)),
)
def test_message_metadata_wins_over_thread_metadata(
    thread: dict[str, str], message: dict[str, str] | None
) -> None:
    merged = merged_metadata(thread, message)
    assert set(merged) == set(thread) | set(message or {})
    for key, value in merged.items():
        assert value == (message or {}).get(key, thread.get(key))


roles = st.sampled_from(["user", "assistant", "tool"])


@given(
    spec=st.lists(
        st.tuples(roles, text, st.booleans()),
        max_size=30,
    )
)
def test_history_keeps_order_and_drops_only_empty_assistant_steps(
    spec: list[tuple[str, str, bool]],
) -> None:
    now = datetime.now(UTC)
    msgs = [
        Message(
            id=uuid.uuid4(),
            org_id="o",
            thread_id=uuid.UUID(int=1),
            role=role,  # type: ignore[arg-type]
            content=content,
            created_at=now,
            tool_calls=(ToolCall(id="c", name="t", arguments={}),)
            if has_calls and role == "assistant"
            else (),
        )
        for role, content, has_calls in spec
    ]
    kept = model_history(msgs)
    dropped = [m for m in msgs if m not in kept]
    assert kept == [m for m in msgs if m in kept]  # order preserved
    assert all(m.role == "assistant" and not m.content and not m.tool_calls for m in dropped)
    assert all(m.role != "user" for m in dropped)
