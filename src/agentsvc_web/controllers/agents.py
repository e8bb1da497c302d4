from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter
from msgspec import UNSET

from agentsvc_core.use_cases import AgentChanges, AgentDraft, Agents
from agentsvc_core.use_cases.publishing import Publishing
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.publishing.schemas import chat_refs
from agentsvc_web.model_params import params_of
from agentsvc_web.openapi import READ, WRITE, errors
from agentsvc_web.schemas import (
    AgentCreateBody,
    AgentOut,
    AgentPatchBody,
    OkBody,
    profiles_to_entity,
)

Req = Request[Any, Any, Any]
# ``?projectId=``: that project's agents only
ProjectId = Annotated[UUID | None, QueryParameter(name="projectId")]


class AgentController(Controller):
    path = "/api/agents"
    tags = ["agents"]

    @get(
        "/",
        operation_id="listAgents",
        responses=errors(422),
        summary="List the organization's agents (?projectId=: one project's)",
    )
    async def list_agents(
        self,
        request: Req,
        agents: NamedDependency[Agents],
        publishing: NamedDependency[Publishing],
        project_id: ProjectId = None,
    ) -> list[AgentOut]:
        who = principal_of(request)
        listed = await agents.list(who, project_id=project_id)
        chats = await publishing.summaries(who, [a.id for a in listed])
        return [AgentOut.of(a, chat_refs(chats, a.id)) for a in listed]

    @post(
        "/",
        operation_id="createAgent",
        status_code=201,
        responses=errors(400, 404, 413, 415, 422),
        summary="Create an agent",
    )
    async def create_agent(
        self, request: Req, agents: NamedDependency[Agents], data: JSONBody[AgentCreateBody]
    ) -> AgentOut:
        draft = AgentDraft(
            name=data.name,
            description=data.description,
            stable_preamble=data.stable_preamble,
            default_model=data.default_model,
            tool_profiles=profiles_to_entity(data.tool_profiles),
            default_profile=data.default_profile,
            runtime_provider=data.runtime_provider,
            project_id=data.project_id,
            approval_timeout_minutes=data.approval_timeout_minutes,
            model_params=None if data.model_params is None else params_of(data.model_params),
        )
        return AgentOut.of(await agents.create(principal_of(request), draft))

    @get("/{agent_id:uuid}", operation_id="getAgent", responses=READ, summary="Get an agent")
    async def get_agent(
        self,
        request: Req,
        agents: NamedDependency[Agents],
        publishing: NamedDependency[Publishing],
        agent_id: FromPath[UUID],
    ) -> AgentOut:
        who = principal_of(request)
        agent = await agents.get(who, agent_id)
        return AgentOut.of(agent, chat_refs(await publishing.summaries(who, [agent.id]), agent.id))

    @patch(
        "/{agent_id:uuid}",
        operation_id="updateAgent",
        responses=WRITE,
        summary="Change the supplied fields of an agent",
    )
    async def patch_agent(
        self,
        request: Req,
        agents: NamedDependency[Agents],
        publishing: NamedDependency[Publishing],
        agent_id: FromPath[UUID],
        data: JSONBody[AgentPatchBody],
    ) -> AgentOut:
        changes = AgentChanges(
            name=data.name,
            description=data.description,
            stable_preamble=data.stable_preamble,
            default_model=data.default_model,
            tool_profiles=UNSET
            if data.tool_profiles is UNSET
            else profiles_to_entity(data.tool_profiles),
            default_profile=data.default_profile,
            runtime_provider=data.runtime_provider,
            project_id=data.project_id,
            approval_timeout_minutes=data.approval_timeout_minutes,
            model_params=data.model_params
            if data.model_params is None or data.model_params is UNSET
            else params_of(data.model_params),
        )
        who = principal_of(request)
        agent = await agents.update(who, agent_id, changes)
        return AgentOut.of(agent, chat_refs(await publishing.summaries(who, [agent.id]), agent.id))

    @delete(
        "/{agent_id:uuid}",
        operation_id="deleteAgent",
        status_code=200,
        responses=READ,
        summary="Delete an agent (its threads are kept)",
    )
    async def delete_agent(
        self, request: Req, agents: NamedDependency[Agents], agent_id: FromPath[UUID]
    ) -> OkBody:
        await agents.delete(principal_of(request), agent_id)
        return OkBody(ok=True)
