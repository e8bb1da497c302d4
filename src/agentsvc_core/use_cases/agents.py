from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable, Sequence
from uuid import UUID

import msgspec
from msgspec import UNSET, UnsetType

from agentsvc_core.entities import Agent, Principal, ToolProfile
from agentsvc_core.entities.agent import TemplateRef
from agentsvc_core.entities.model_params import ModelParams
from agentsvc_core.partial import given_fields
from agentsvc_core.ports import AgentRepository, Clock, SecretStore
from agentsvc_core.ports.projects import ProjectStore
from agentsvc_core.rules import DEFAULT_APPROVAL_TIMEOUT_MINUTES, check_agent
from agentsvc_core.use_cases.model_params import check_params
from agentsvc_core.use_cases.projects import check_project


class AgentDraft(msgspec.Struct, frozen=True, kw_only=True):
    """What a caller supplies to create an agent."""

    name: str
    description: str = ""
    stable_preamble: str = ""
    default_model: str | None = None
    tool_profiles: dict[str, ToolProfile] | None = None
    default_profile: str | None = None
    runtime_provider: str | None = None
    project_id: UUID | None = None
    template: TemplateRef | None = None  # set by Templates.use, never by a request
    approval_timeout_minutes: int = DEFAULT_APPROVAL_TIMEOUT_MINUTES
    model_params: ModelParams | None = None


class AgentChanges(msgspec.Struct, frozen=True, kw_only=True):
    """A partial update: ``UNSET`` leaves a field alone, ``None`` clears a nullable one."""

    name: str | UnsetType = UNSET
    description: str | UnsetType = UNSET
    stable_preamble: str | UnsetType = UNSET
    default_model: str | UnsetType = UNSET
    tool_profiles: dict[str, ToolProfile] | UnsetType | None = UNSET
    default_profile: str | UnsetType | None = UNSET
    runtime_provider: str | UnsetType | None = UNSET
    project_id: UUID | UnsetType | None = UNSET
    approval_timeout_minutes: int | UnsetType = UNSET
    model_params: ModelParams | UnsetType | None = UNSET  # replaced whole; None clears

    def supplied(self) -> dict[str, object]:
        return given_fields(self)


def _checked(agent: Agent) -> Agent:
    """Every invariant of an agent (``rules.check_agent``) and its model parameters'."""
    if agent.model_params is not None:
        check_params(agent.model_params, "model_params")
    return check_agent(agent)


class Agents:
    """Create, read, change and delete an organization's agents."""

    def __init__(
        self,
        repo: AgentRepository,
        clock: Clock,
        default_model: str,
        *,
        configs: tuple[SecretStore, tuple[str, ...]] | None = None,
        projects: ProjectStore | None = None,
        before_delete: Sequence[Callable[[str, UUID], Awaitable[None]]] = (),
    ) -> None:
        """``configs``: the store of the agent's configurations and their kinds, sealed
        records keyed by its id (resolver, compaction, the tool sources'): they go when
        the agent goes. ``projects``: where a ``project_id`` is checked (without it,
        no agent can name one). ``before_delete``: what must go before the agent's
        rows do, called with its organization and id (its computers' sandboxes, which
        the rows name)."""
        self._repo = repo
        self._clock = clock
        self._default_model = default_model
        self._configs = configs
        self._projects = projects
        self._before_delete = tuple(before_delete)

    async def create(self, who: Principal, draft: AgentDraft) -> Agent:
        now = self._clock.now()
        agent = _checked(
            Agent(
                id=uuid.uuid4(),
                org_id=who.org_id,
                name=draft.name,
                description=draft.description,
                stable_preamble=draft.stable_preamble,
                default_model=draft.default_model or self._default_model,
                tool_profiles=draft.tool_profiles,
                default_profile=draft.default_profile,
                runtime_provider=draft.runtime_provider,
                project_id=draft.project_id,
                template=draft.template,
                approval_timeout_minutes=draft.approval_timeout_minutes,
                model_params=draft.model_params,
                created_at=now,
                updated_at=now,
            )
        )
        await check_project(self._projects, who.org_id, draft.project_id)
        await self._repo.add(agent)
        return agent

    async def get(self, who: Principal, agent_id: UUID) -> Agent:
        return await self._repo.get(who.org_id, agent_id)

    async def list(self, who: Principal, *, project_id: UUID | None = None) -> list[Agent]:
        """Oldest first; with ``project_id``, that project's agents only."""
        return await self._repo.list(who.org_id, project_id=project_id)

    async def update(self, who: Principal, agent_id: UUID, changes: AgentChanges) -> Agent:
        fields = changes.supplied()
        if not fields:
            return await self._repo.get(who.org_id, agent_id)
        if not isinstance(changes.project_id, UnsetType):
            await check_project(self._projects, who.org_id, changes.project_id)
        now = self._clock.now()

        def apply(current: Agent) -> Agent:
            return _checked(msgspec.structs.replace(current, updated_at=now, **fields))

        return await self._repo.modify(who.org_id, agent_id, apply)

    async def delete(self, who: Principal, agent_id: UUID) -> None:
        for before in self._before_delete:
            await before(who.org_id, agent_id)
        await self._repo.delete(who.org_id, agent_id)
        if self._configs is not None:
            store, kinds = self._configs
            for kind in kinds:  # an agent id is a whole key: no other key starts with it
                await store.delete_prefix(who.org_id, kind, str(agent_id))
