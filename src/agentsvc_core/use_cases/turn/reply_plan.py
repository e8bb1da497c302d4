"""Planning a reply, the middle of a send (use_cases/turn/conversation.py): what the send
decides before its run is stored, in the order it may refuse: the model, the agent's
configurations (resolver, compaction) and the tool profile (``choose``); then, with
the server-side tools listed, the plan the reply follows (``plan_reply``). Nothing
here reads or writes: the send does its reads and hands over what they returned."""

from __future__ import annotations

from datetime import timedelta

import msgspec

from agentsvc_core.entities import Agent, Message, Principal, Thread
from agentsvc_core.entities.model_params import ModelParams
from agentsvc_core.entities.skill import SkillBinding
from agentsvc_core.ports import ChatModel, ModelRouter, NativeCompaction, ToolSetup, ToolSpec
from agentsvc_core.ports.llm import NATIVE_COMPACTION_FAMILIES, SUMMARY_COMPACTION_FAMILIES
from agentsvc_core.ports.storage import TurnInputs
from agentsvc_core.ports.tools import Attached
from agentsvc_core.use_cases.model_params import DEFAULT_OUTPUT_TOKENS, check_for_family
from agentsvc_core.use_cases.org_settings import (
    AgentConfigs,
    CompactionConfig,
    KeyBroker,
    ResolverConfig,
)
from agentsvc_core.use_cases.turn._private import BudgetGate, Plan
from agentsvc_core.use_cases.turn.context import (
    effective_profile,
    gate_tools,
    merged_metadata,
    profile_switch_tool,
    system_prompt,
)
from agentsvc_core.use_cases.turn.send_input import SendInput

__all__ = ["Chosen", "applies_summaries", "choose", "note_answered", "plan_reply"]


class Chosen(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """What a send chose before its server-side tools are listed."""

    who: Principal
    thread: Thread
    agent: Agent
    msg: SendInput
    model: ChatModel
    model_name: str
    model_id: str
    resolver: ResolverConfig | None
    compaction: CompactionConfig | None
    profile: str | None  # the tool profile in force
    setup: ToolSetup  # what the tool sources get of the turn's read
    params: ModelParams | None = None  # the send's model parameters over the agent's


def choose(
    router: ModelRouter,
    configs: AgentConfigs | None,
    who: Principal,
    thread: Thread,
    agent: Agent,
    msg: SendInput,
    inputs: TurnInputs,
    extra_mcp: Attached,
    extra_skills: tuple[SkillBinding, ...] = (),
) -> Chosen:
    """The model (``InvalidInput`` for one no family serves), the model parameters
    in force (``InvalidInput`` for one its family cannot honour), the agent's
    configurations from the records the turn read, the tool profile, and the MCP
    servers the tools come from: the agent's, then a runner's it has not (and the
    runner's skills, ``extra_skills``, which the skills' tool source adds to the
    agent's)."""
    model_id = msg.model_override or agent.default_model
    model, model_name = router.route(model_id)
    params = agent.model_params if msg.params is None else msg.params.over(agent.model_params)
    if params is not None:
        check_for_family(model.provider, params)
    resolver, compaction = (
        configs.opened(who.org_id, agent.id, inputs.records) if configs else (None, None)
    )
    return Chosen(
        who=who,
        thread=thread,
        agent=agent,
        msg=msg,
        model=model,
        model_name=model_name,
        model_id=model_id,
        resolver=resolver,
        compaction=compaction,
        profile=effective_profile(agent, thread, msg.tool_profile),
        params=params,
        setup=ToolSetup(
            mcp=_with_extra_mcp(inputs.mcp, extra_mcp),
            records=inputs.records,
            thread_id=thread.id,
            skills=extra_skills,
        ),
    )


def plan_reply(
    chosen: Chosen,
    listed: list[ToolSpec],
    *,
    user_id: str | None,
    keep_events: timedelta,
    keys: KeyBroker | None,
    gate: BudgetGate | None,
    stored_parent: str | None,
) -> Plan:
    """What the reply will do: its model and system prompt, the tools it offers
    (the listed server-side tools its profile allows, the client's, the profile
    switch), the keys that pay for it (the agent's credential resolver, when on)
    and its compaction (summaries for the beta family, the provider's own for
    alpha). ``user_id``: who sent the message."""
    agent, thread, msg, model = chosen.agent, chosen.thread, chosen.msg, chosen.model
    server = {t.name: t for t in gate_tools(agent, chosen.profile, listed)}
    client = {t.name: t for t in msg.tools}
    offered = [*server.values(), *client.values()]
    switch = profile_switch_tool(agent, chosen.profile)
    if switch is not None:
        offered.append(switch)
    resolver = chosen.resolver
    return Plan(
        keep_events=keep_events,
        who=chosen.who,
        thread=thread,
        agent=agent,
        model=model,
        model_name=chosen.model_name,
        model_id=chosen.model_id,
        system=system_prompt(
            agent.stable_preamble,
            *(t.instructions for t in server.values() if t.instructions),
            thread.system_prompt_overlay,
            msg.system_prompt_overlay,
        ),
        server_tools=server,
        client_tools=client,
        tool_setup=chosen.setup,
        user_id=user_id,
        offered=offered,
        metadata=merged_metadata(thread.metadata, msg.metadata),
        keys=keys.for_turn(resolver, user_id=user_id or "")
        if keys is not None and resolver is not None and resolver.enabled
        else None,
        gate=gate,
        stored_parent=stored_parent,
        compaction=chosen.compaction if applies_summaries(model) else None,
        native=_native_compaction(chosen.compaction, model),
        show_compaction="compaction" in msg.include_events,
        params=chosen.params,
        max_tokens=(chosen.params and chosen.params.max_output_tokens) or DEFAULT_OUTPUT_TOKENS,
    )


def applies_summaries(model: ChatModel) -> bool:
    """Whether a turn of this family sends the thread's summary (use_cases/turn/
    compaction.py) when the agent's compaction is on: the summary family, which makes
    them past its threshold, and the native one, which sends one made on request
    (``POST /api/threads/{id}/compact``) but leaves the rest to its provider."""
    return model.provider in SUMMARY_COMPACTION_FAMILIES | NATIVE_COMPACTION_FAMILIES


def note_answered(plan: Plan, new: list[Message]) -> None:
    """What the reply answers: the user's messages and the client's tool results."""
    plan.inputs = tuple(m.content for m in new if m.role == "user")
    plan.tool_results = tuple((m.tool_call_id or "", m.content) for m in new if m.role == "tool")


def _with_extra_mcp(own: Attached, extra: Attached) -> Attached:
    if not extra:
        return own
    ids = {a.mcp_id for a, _ in own}
    return [*own, *(x for x in extra if x[0].mcp_id not in ids)]


def _native_compaction(
    compaction: CompactionConfig | None, model: ChatModel
) -> NativeCompaction | None:
    """The alpha family compacts on the provider's side, when the agent turned it on."""
    if (
        compaction is None
        or not compaction.enabled
        or model.provider not in NATIVE_COMPACTION_FAMILIES
    ):
        return None
    return NativeCompaction(
        trigger_tokens=compaction.alpha_trigger_tokens,
        instructions=compaction.alpha_instructions,
        pause_after=compaction.alpha_pause_after,
    )
