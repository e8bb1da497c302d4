"""A server-side tool call of the reply loop (use_cases/turn/reply.py): its events, its
span, its time limit, and its failures as results the model can read."""

from __future__ import annotations

import asyncio

from agentsvc_core.entities import ToolCall
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import ServerTools, ToolAuthRequired, ToolCallContext
from agentsvc_core.ports.telemetry import Span, Tracer
from agentsvc_core.use_cases.turn._private import Plan, tool_out
from agentsvc_core.use_cases.turn.context import PROPOSE_PROFILE_SWITCH
from agentsvc_core.use_cases.turn.events import (
    AuthChallenge,
    Challenge,
    ProfileSwitchProposal,
    ToolCallEvent,
    ToolExecuting,
    ToolResult,
    Turn,
)
from agentsvc_core.use_cases.turn.spans import tool_span

__all__ = ["TOOL_TIMEOUT_S", "run_tool"]

TOOL_TIMEOUT_S = 60.0


async def run_tool(
    tools: ServerTools, tracer: Tracer, plan: Plan, call: ToolCall, turn: Turn
) -> str:
    """One server-side tool call in its ``execute_tool {tool}`` span: its events
    (``tool_call``, ``tool_executing``, then ``tool_result``, or an
    ``auth_challenge`` or a ``profile_switch_proposal``) and its result, which is
    what the model reads; a failure is a result too (``error: ...``), never an
    exception."""
    mcp = (
        call.name in plan.server_tools
        and call.name != PROPOSE_PROFILE_SWITCH
        and tools.is_extension(call.name)
    )
    with tool_span(tracer, call.name, call.id, mcp=mcp) as span:
        span.payload(input=call.arguments)
        result = await _tool_call(tools, plan, call, turn, span)
        span.payload(output=result)
        return result


async def _tool_call(tools: ServerTools, plan: Plan, call: ToolCall, turn: Turn, span: Span) -> str:
    span.set("agentsvc.tool.outcome", "ok")
    turn.emit(ToolCallEvent(tool=tool_out(call)))
    turn.emit(ToolExecuting(tool_name=call.name, tool_call_id=call.id))
    if call.name == PROPOSE_PROFILE_SWITCH:
        target = str(call.arguments.get("target", ""))
        reason = str(call.arguments.get("reason", ""))
        turn.emit(ProfileSwitchProposal(target=target, reason=reason))
        result = (
            f"The proposal to switch to {target!r} was shown to the user. "
            "The profile has not changed."
        )
    elif call.name not in plan.server_tools:
        result = f"error: the tool {call.name!r} is not available in this conversation"
        span.set("agentsvc.tool.outcome", "unavailable")
        span.fail("TOOL_UNAVAILABLE")
    else:
        try:
            result = await asyncio.wait_for(
                tools.call(
                    plan.who,
                    plan.agent,
                    call.name,
                    call.arguments,
                    ToolCallContext(
                        tool_call_id=call.id,
                        thread_id=plan.thread.id,
                        user_id=plan.user_id,
                        setup=plan.tool_setup,
                    ),
                ),
                TOOL_TIMEOUT_S,
            )
            if result.startswith("error:"):  # a tool that fails answers "error: ..."
                span.set("agentsvc.tool.outcome", "error")
                span.fail("TOOL_ERROR")
        except ToolAuthRequired as auth:
            span.set("agentsvc.tool.outcome", "auth_required")
            turn.emit(
                AuthChallenge(
                    tool_name=call.name,
                    challenge=Challenge(
                        provider=auth.provider,
                        redirect_url=auth.redirect_url,
                        description=auth.description,
                    ),
                )
            )
            result = (
                f"The user must first authorize access to {auth.provider}; "
                "they were shown a link to do so."
            )
        except TimeoutError:
            span.set("agentsvc.tool.outcome", "timeout")
            span.fail("TOOL_TIMEOUT")
            result = f"error: the tool {call.name!r} did not answer within {TOOL_TIMEOUT_S:.0f} s"
        except DomainError as exc:
            span.set("agentsvc.tool.outcome", "error")
            span.fail(type(exc).__name__)
            result = f"error: {exc.detail}"
    turn.emit(ToolResult(tool_name=call.name, tool_call_id=call.id, result=result))
    return result
