"""What the model is given: the system prompt, the history, the tools. Pure functions."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from agentsvc_core.entities import Agent, Message, Thread
from agentsvc_core.ports import ToolSpec

PROPOSE_PROFILE_SWITCH = "propose_profile_switch"


def system_prompt(preamble: str, *overlays: str | None) -> str:
    """Agent preamble, then the thread overlay, then the message overlay, joined by
    a blank line; empty parts are left out."""
    return "\n\n".join(part for part in (preamble, *overlays) if part)


def merged_metadata(thread: dict[str, str], message: dict[str, str] | None) -> dict[str, str]:
    """Thread metadata, then the message's over it (message keys win)."""
    return {**thread, **(message or {})}


def effective_profile(agent: Agent, thread: Thread, requested: str | None) -> str | None:
    """The message's ``toolProfile``, else the thread's active profile, else the
    agent's default profile."""
    return requested or thread.active_profile or agent.default_profile


def gate_tools(
    agent: Agent, profile: str | None, server_tools: Iterable[ToolSpec]
) -> list[ToolSpec]:
    """Server-side tools the model may see under ``profile`` (all when none)."""
    tools = list(server_tools)
    if profile is None or not agent.tool_profiles or profile not in agent.tool_profiles:
        return tools
    allowed = set(agent.tool_profiles[profile].tools)
    return [t for t in tools if t.name in allowed]


def profile_switch_tool(agent: Agent, current: str | None) -> ToolSpec | None:
    """Offered when the agent has profiles: lets the model propose a switch."""
    if not agent.tool_profiles:
        return None
    names = sorted(agent.tool_profiles)
    described = "; ".join(
        f"{n}: {agent.tool_profiles[n].description}" if agent.tool_profiles[n].description else n
        for n in names
    )
    return ToolSpec(
        name=PROPOSE_PROFILE_SWITCH,
        description=(
            "Propose that the user switch this conversation to another tool profile "
            f"(current: {current or 'none'}). Profiles: {described}. "
            "The switch happens only if the user accepts."
        ),
        parameters={
            "type": "object",
            "properties": {
                "target": {"type": "string", "enum": names},
                "reason": {"type": "string"},
            },
            "required": ["target", "reason"],
        },
    )


def model_history(messages: Sequence[Message]) -> list[Message]:
    """The messages the model is shown, oldest first: everything stored except
    assistant messages that ended before saying anything (failed/interrupted with
    no text, no tool calls and no provider block). Each tool result follows the
    assistant message that made its call: the result of a call a person approved
    is stored after the message sent with the approval, and is moved back to the
    other results of its step (providers want them together)."""
    shown: list[Message] = []
    append = shown.append  # (once per message of every turn: kept lean)
    calls: list[str] = []  # the latest step's tool call ids
    end = 0  # where their next result goes
    for m in messages:
        role = m.role
        if role == "tool":
            if m.tool_call_id in calls:
                if end == len(shown):
                    append(m)
                else:
                    shown.insert(end, m)
                end += 1
                continue
        elif role == "assistant":
            if m.tool_calls:
                append(m)
                calls, end = [c.id for c in m.tool_calls], len(shown)
                continue
            if not m.content:
                continue
        append(m)
    return shown
