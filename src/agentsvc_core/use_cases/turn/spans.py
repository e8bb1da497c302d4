"""The spans of a turn, named and attributed by the OpenTelemetry GenAI semantic
conventions (docs/architecture.md, "Spans"): what use_cases/turn/conversation.py and
use_cases/turn/reply.py call around the reply, each model call, each tool call and a
compaction. No attribute carries a key, a token or a secret, nor message or tool
content; the ids are the agent's, the thread's and the run's.
"""

from __future__ import annotations

from agentsvc_core.entities import Run, Usage
from agentsvc_core.entities.model_params import ModelParams
from agentsvc_core.ports.telemetry import AttributeValue, Span, Tracer
from agentsvc_core.use_cases.turn._private import Called, Plan, ReplyState

__all__ = [
    "COMPACTION_SPAN",
    "FAMILY",
    "PROVIDER_NAMES",
    "chat_ended",
    "chat_span",
    "compaction_span",
    "reply_ended",
    "reply_span",
    "tool_span",
    "usage_attributes",
]

# the provider family (metrics label, ``agentsvc.provider.family``) -> the GenAI
# ``gen_ai.provider.name`` of its wire format
PROVIDER_NAMES = {"alpha": "anthropic", "beta": "openai", "local": "agentsvc"}
FAMILY = "agentsvc.provider.family"
COMPACTION_SPAN = "compaction"


def _provider(plan: Plan) -> str:
    family = plan.model.provider
    return PROVIDER_NAMES.get(family, family)


def reply_span(tracer: Tracer, plan: Plan, run: Run) -> Span:
    """``invoke_agent {agent name}``: the whole reply, child of the request's span."""
    return tracer.start(
        f"invoke_agent {plan.agent.name}",
        "internal",
        {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": _provider(plan),
            FAMILY: plan.model.provider,
            "gen_ai.agent.id": str(plan.agent.id),
            "gen_ai.agent.name": plan.agent.name,
            "gen_ai.conversation.id": str(run.thread_id),
            "gen_ai.request.model": plan.model_id,
            "agentsvc.run.id": str(run.id),
        },
    )


def usage_attributes(span: Span, usage: Usage) -> None:
    span.set("gen_ai.usage.input_tokens", usage.input_tokens)
    span.set("gen_ai.usage.output_tokens", usage.output_tokens)
    if usage.cached_input_tokens:
        span.set("gen_ai.usage.cache_read.input_tokens", usage.cached_input_tokens)


def reply_ended(span: Span, state: ReplyState) -> None:
    """The reply's outcome (``agentsvc.run.status``: completed, stopped, failed,
    interrupted, requires_action), its token totals, and the error's code."""
    span.set("agentsvc.run.status", state.status)
    usage_attributes(span, state.total)
    if state.status in {"failed", "interrupted"}:
        span.fail(state.error.code if state.error is not None else state.status)
    span.end()


def chat_span(tracer: Tracer, plan: Plan) -> Span:
    """``chat {model}``: one model call (client span), with the model parameters it
    was sent (``gen_ai.request.*``; ``gen_ai.output.type`` json for a JSON Schema;
    not the stop texts, which are the user's text)."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": _provider(plan),
        FAMILY: plan.model.provider,
        "gen_ai.request.model": plan.model_name,
        "gen_ai.conversation.id": str(plan.thread.id),
        "gen_ai.request.max_tokens": plan.max_tokens,
    }
    if plan.params is not None:
        _request_params(attributes, plan.params)
    return tracer.start(f"chat {plan.model_name}", "client", attributes)


def _request_params(attributes: dict[str, AttributeValue], params: ModelParams) -> None:
    if params.temperature is not None:
        attributes["gen_ai.request.temperature"] = params.temperature
    if params.top_p is not None:
        attributes["gen_ai.request.top_p"] = params.top_p
    if params.structured() is not None:
        attributes["gen_ai.output.type"] = "json"


def chat_ended(span: Span, called: Called, times: list[int]) -> None:
    """How the call ended: finish reason, tokens, time to first chunk (``times``:
    when the request went out and when its first event came), key source."""
    span.set("gen_ai.response.finish_reasons", (called.finish,))
    usage_attributes(span, called.usage)
    span.set("agentsvc.key_source", called.source)
    if len(times) > 1:
        span.set("gen_ai.response.time_to_first_chunk", (times[1] - times[0]) / 1e9)
    if called.stopped:
        span.set("agentsvc.stopped", True)
    if called.finish == "compaction":
        span.set("agentsvc.compaction", "native")
    if called.failure is not None:
        span.fail(called.failure.code)


def tool_span(tracer: Tracer, name: str, call_id: str, *, mcp: bool) -> Span:
    """``execute_tool {tool}``: one server-side tool call (``agentsvc.tool.outcome``
    set when it ends: ok, error, timeout, auth_required, unavailable)."""
    attributes: dict[str, AttributeValue] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "extension" if mcp else "function",
    }
    server, sep, _ = name.partition("__")
    if mcp and sep:  # an MCP tool is named <server slug>__<tool>
        attributes["agentsvc.mcp.server"] = server
    return tracer.start(f"execute_tool {name}", "internal", attributes)


def compaction_span(tracer: Tracer, plan: Plan) -> Span:
    """``compaction``: a summary compaction (beta family); it makes a model call
    (``gen_ai.request.model``, its tokens) and ends with ``agentsvc.compaction.outcome``
    (compacted, skipped, failed)."""
    return tracer.start(
        COMPACTION_SPAN,
        "internal",
        {
            "agentsvc.compaction": "summary",
            FAMILY: plan.model.provider,
            "gen_ai.request.model": plan.model_name,
            "gen_ai.conversation.id": str(plan.thread.id),
        },
    )
