"""One kind of an agent's configuration (``/api/agents/{id}/<kind>``: plan, memory,
web...), kept as a sealed record keyed by the agent's id: the defaults until a PUT
(so an agent never configured needs no row), read by the turn with the thread
(``opened``) or on its own (``of``), changed without losing a concurrent change
(``SealedRecords.change``). ``GatedTools``: the tool source of a configuration that
switches its tools on (plan, memory)."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar
from uuid import UUID

import msgspec

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.errors import DomainError
from agentsvc_core.ports import (
    AgentRepository,
    SealedRecord,
    SecretBox,
    SecretStore,
    ServerTools,
    ToolCallContext,
    ToolSetup,
    ToolSpec,
)
from agentsvc_core.use_cases.sealed import SealedRecords

__all__ = ["AgentSettings", "GatedTools", "Switched", "ToolRefused"]


C = TypeVar("C", bound=msgspec.Struct)


class AgentSettings(Generic[C]):
    """A configuration of ``kind``: a Struct of ``typ`` whose defaults need only
    ``agent_id`` and ``org_id``."""

    def __init__(
        self,
        store: SecretStore,
        agents: AgentRepository,
        box: SecretBox,
        kind: str,
        typ: type[C],
    ) -> None:
        self._records = SealedRecords(store, box)
        self._agents = agents
        self._kind = kind
        self._typ = typ

    @property
    def kind(self) -> str:
        return self._kind

    def _default(self, org: str, agent_id: UUID) -> C:
        return self._typ(agent_id=agent_id, org_id=org)

    async def of(self, org: str, agent_id: UUID) -> C:
        stored = await self._records.get(org, self._kind, str(agent_id), self._typ)
        return stored or self._default(org, agent_id)

    def opened(self, org: str, agent_id: UUID, records: Mapping[str, SealedRecord]) -> C:
        """From the records the turn read (defaults when none was stored)."""
        record = records.get(self._kind)
        if record is None:
            return self._default(org, agent_id)
        return self._records.open(org, self._kind, str(agent_id), record.value, self._typ)

    async def in_turn(self, org: str, agent_id: UUID, setup: ToolSetup | None) -> C:
        """For a tool source: from what the turn read, or read now outside a turn."""
        if setup is not None:
            return self.opened(org, agent_id, setup.records)
        return await self.of(org, agent_id)

    async def get(self, who: Principal, agent_id: UUID) -> C:
        await self._agents.get(who.org_id, agent_id)
        return await self.of(who.org_id, agent_id)

    async def _change(self, who: Principal, agent_id: UUID, apply: Callable[[C], C]) -> C:
        """``apply`` to the stored configuration (or the defaults); it may raise to
        refuse. A concurrent change of other fields is not lost."""
        await self._agents.get(who.org_id, agent_id)
        return await self._records.change(
            who.org_id,
            self._kind,
            str(agent_id),
            self._typ,
            lambda current: apply(current or self._default(who.org_id, agent_id)),
        )


class Switched(msgspec.Struct, frozen=True, kw_only=True):
    """A configuration whose ``enabled`` gives the model its tools (plan, memory)."""

    agent_id: UUID
    org_id: str
    enabled: bool = False  # the model gets the tools


S = TypeVar("S", bound=Switched)


class ToolRefused(Exception):
    """A gated tool's call refused with a reason the model reads (``error: ...``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class GatedTools(ServerTools, Generic[S]):
    """The tools an agent's configuration of one kind switches on (``Switched``):
    built-in names (``names``), no extension, offered only while ``enabled``. A
    call of a name not its own, made where it cannot work (``refusal``) or while
    the tools are off is an error text without reading further; invalid
    arguments, a ``ToolRefused`` and a domain error are error texts the model
    reads. The configuration comes with the turn's read (``kinds``), so an agent
    with the tools off costs no read at all."""

    names: tuple[str, ...] = ()  # the tools' names
    noun: str = ""  # what an unknown name's error calls them ("no <noun> tool named ...")
    disabled: str = ""  # the error while the configuration is off

    def __init__(self, settings: AgentSettings[S]) -> None:
        self._settings = settings
        self.kinds = (settings.kind,)

    def owns(self, name: str) -> bool:
        return name in self.names

    def is_extension(self, name: str) -> bool:
        return False

    async def list_tools(
        self, who: Principal, agent: Agent, setup: ToolSetup | None = None
    ) -> list[ToolSpec]:
        config = await self._settings.in_turn(who.org_id, agent.id, setup)
        return self.specs(config) if config.enabled else []

    async def call(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
    ) -> str:
        if name not in self.names:
            return f"error: no {self.noun} tool named {name!r}"
        refusal = self.refusal(ctx)
        if refusal is not None:
            return f"error: {refusal}"
        try:
            config = await self._settings.in_turn(who.org_id, agent.id, ctx.setup)
            if not config.enabled:
                return f"error: {self.disabled}"
            return await self.run(who, agent, name, arguments, ctx, config)
        except msgspec.ValidationError as exc:
            return f"error: invalid arguments: {exc}"
        except ToolRefused as exc:
            return f"error: {exc.text}"
        except DomainError as exc:
            return f"error: {exc.detail}"

    def refusal(self, ctx: ToolCallContext) -> str | None:
        """Why no tool of this source can run in this call's context (None: it can)."""
        return None

    @abstractmethod
    def specs(self, config: S) -> list[ToolSpec]:
        """The tools as the model sees them under ``config`` (enabled)."""

    @abstractmethod
    async def run(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
        config: S,
    ) -> str:
        """Run the tool ``name`` (one of ``names``) with the configuration enabled:
        its answer; raises ``msgspec.ValidationError``, ``ToolRefused`` or a domain
        error for the error texts."""
