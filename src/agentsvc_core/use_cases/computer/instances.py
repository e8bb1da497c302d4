"""An agent's computer at work: its instances (one per thread, or one the agent
shares, as its configuration's ``scope`` says), made on first use, resumed when
stopped, stopped when idle, and the commands and files the model and operators
use on them (docs/computer.md).

An instance's row is the truth about its sandbox: its ``status`` goes
``bootstrapping`` (being made or resumed) -> ``idle`` (running, nothing in
flight) <-> ``ready`` (a command runs) -> ``stopped`` (by an operator or the idle
sweep; a persistent one keeps its files) -> ``destroyed``; ``error`` when its
provider failed to start it. A start that could not resume the files (the
provider lost them) sets ``state_lost``: the instance says so until it stops, and
the model reads it in the tool's answer.

Limits per agent (``commands.CommandLimits``) refuse a command before it runs.
Starts of one instance are
serialised by a lock per instance key (this process); two processes racing to
make a thread's first instance are decided by the store (one active instance
per agent and thread): the loser uses the winner's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from typing import Any, TypeVar
from uuid import UUID

import msgspec

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.entities.computer import RUNNING, ComputerInstance
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.ports import AgentRepository, Clock
from agentsvc_core.ports.computer import ComputerStore
from agentsvc_core.ports.sandboxes import (
    ExecExit,
    ExecOutput,
    FileEntry,
    SandboxGone,
    SandboxProvider,
    SandboxUnavailable,
)
from agentsvc_core.use_cases.computer.commands import (
    CONCURRENT,
    CommandLimits,
    Execution,
    Spend,
)
from agentsvc_core.use_cases.computer.settings import (
    ComputerConfig,
    ComputerSettings,
    resolve_provider,
    spec_of,
)
from agentsvc_core.use_cases.threads import Threads

__all__ = ["INSTALL_HINTS", "Computers"]

# what each provider needs, for the error when it is not there
INSTALL_HINTS = {
    "local": "install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap)",
    "e2b": "set AGENTSVC_E2B_API_KEY to an E2B API key",
}
log = logging.getLogger("agentsvc.computer")
T = TypeVar("T")
Key = tuple[str, UUID, UUID | None]  # org, agent, thread (None: the shared instance)


class Computers:
    def __init__(
        self,
        store: ComputerStore,
        agents: AgentRepository,
        threads: Threads,
        settings: ComputerSettings,
        providers: Mapping[str, SandboxProvider],
        clock: Clock,
        spend: Spend,
        *,
        concurrent: int = CONCURRENT,
    ) -> None:
        """``spend``: takes a token of the agent's command budget, or raises
        ``RateLimited``; ``concurrent``: the most commands at once per agent."""
        self._store = store
        self._agents = agents
        self._threads = threads
        self._settings = settings
        self._providers = providers
        self._clock = clock
        self._limits = CommandLimits(spend, concurrent)
        self._busy: dict[UUID, int] = {}  # instance -> commands now (the sweep skips)
        self._locks: dict[Key, asyncio.Lock] = {}

    @property
    def settings(self) -> ComputerSettings:
        return self._settings

    @property
    def available(self) -> list[str]:
        """The providers that can serve on this service (installed, configured),
        by name."""
        return sorted(n for n, p in self._providers.items() if p.missing() is None)

    async def configuration(self, who: Principal, agent_id: UUID) -> tuple[ComputerConfig, str]:
        """The agent's configuration, and the provider its sandboxes run on."""
        agent = await self._agents.get(who.org_id, agent_id)
        config = await self._settings.of(who.org_id, agent_id)
        return config, resolve_provider(config, agent.runtime_provider)

    async def configure(
        self, who: Principal, agent_id: UUID, changes: dict[str, Any]
    ) -> tuple[ComputerConfig, str]:
        """Change the supplied fields (``ComputerSettings.update``)."""
        config = await self._settings.update(who, agent_id, changes)
        agent = await self._agents.get(who.org_id, agent_id)
        return config, resolve_provider(config, agent.runtime_provider)

    def provider(self, name: str) -> SandboxProvider:
        """The named provider, or ``SandboxUnavailable`` saying what to install or set."""
        found = self._providers.get(name)
        if found is None:
            hint = INSTALL_HINTS.get(name, "configure it")
            raise SandboxUnavailable(
                f"the computer's sandbox provider {name!r} is not available on this "
                f"service: {hint} (docs/computer.md)"
            )
        lacks = found.missing()
        if lacks is not None:
            raise SandboxUnavailable(lacks)
        return found

    # --- reads --------------------------------------------------------------------

    async def instances(self, who: Principal, agent_id: UUID) -> list[ComputerInstance]:
        await self._agents.get(who.org_id, agent_id)
        return await self._store.of_agent(who.org_id, agent_id)

    async def of_thread(self, who: Principal, thread_id: UUID) -> ComputerInstance:
        """The thread's active instance; ``NotFound`` when it has none (or the
        thread is not one ``who`` may see)."""
        thread = await self._threads.visible(who, thread_id)
        found = await self._store.of_thread(who.org_id, thread.id)
        if found is None:
            found = await self._shared_of(who.org_id, thread.agent_id)
        if found is None:
            raise NotFound("the thread has no computer instance")
        return found

    async def _shared_of(self, org: str, agent_id: UUID) -> ComputerInstance | None:
        """The agent's shared instance, when its scope is ``agent``."""
        config = await self._settings.of(org, agent_id)
        if config.scope != "agent":
            return None
        return await self._store.active(org, agent_id, None)

    async def _mine(self, who: Principal, agent_id: UUID, instance_id: UUID) -> ComputerInstance:
        found = await self._store.get(who.org_id, instance_id)
        if found.agent_id != agent_id:
            raise NotFound("computer instance not found")
        return found

    # --- instances ----------------------------------------------------------------

    async def running(
        self, org: str, agent: Agent, config: ComputerConfig, thread_id: UUID | None
    ) -> ComputerInstance:
        """The instance for ``thread_id`` (the shared one under scope ``agent``),
        made or resumed as needed: running when this returns."""
        thread = thread_id if config.scope == "thread" else None
        key = (org, agent.id, thread)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            instance = await self._store.active(org, agent.id, thread)
            if instance is None:
                instance = await self._new(org, agent, config, thread)
            if instance.status in RUNNING and instance.ref is not None:
                return instance
            return await self._start(instance, config)

    async def _new(
        self, org: str, agent: Agent, config: ComputerConfig, thread: UUID | None
    ) -> ComputerInstance:
        name = resolve_provider(config, agent.runtime_provider)
        self.provider(name)  # unavailable: no row is made
        now = self._clock.now()
        instance = ComputerInstance(
            id=uuid.uuid4(),
            org_id=org,
            agent_id=agent.id,
            thread_id=thread,
            provider=name,
            status="bootstrapping",
            persistent=config.persistent,
            created_at=now,
            last_used_at=now,
            idle_timeout_s=config.idle_timeout_s,
        )
        try:
            return await self._store.add(instance)
        except Conflict:  # another process made it meanwhile
            found = await self._store.active(org, agent.id, thread)
            if found is None:
                raise
            return found

    async def _start(self, instance: ComputerInstance, config: ComputerConfig) -> ComputerInstance:
        """Make or resume the instance's sandbox. A provider that fails leaves the
        instance in ``error`` with the reason (no secret: the port's errors carry none)."""
        provider = self.provider(instance.provider)
        org = instance.org_id
        await self._store.modify(
            org, instance.id, lambda i: msgspec.structs.replace(i, status="bootstrapping")
        )
        resume = instance.ref if instance.persistent else None
        if not instance.persistent and instance.ref is not None:
            with contextlib.suppress(SandboxGone):
                await provider.destroy(instance.ref)
        spec = spec_of(config, instance.id, instance.persistent)
        try:
            started = await provider.start(spec, resume=resume)
        except (SandboxUnavailable, SandboxGone) as exc:
            detail = exc.detail
            await self._store.modify(
                org, instance.id, lambda i: msgspec.structs.replace(i, status="error", error=detail)
            )
            raise
        now = self._clock.now()
        return await self._store.modify(
            org,
            instance.id,
            lambda i: msgspec.structs.replace(
                i,
                status="idle",
                ref=started.ref,
                state_lost=started.state_lost,
                error=None,
                last_used_at=now,
                idle_timeout_s=config.idle_timeout_s,
            ),
        )

    async def _lost(self, instance: ComputerInstance, config: ComputerConfig) -> ComputerInstance:
        """The sandbox was gone at the provider: start again (resuming its ref, so
        the provider answers ``state_lost``)."""
        return await self._start(instance, config)

    async def stop(self, who: Principal, agent_id: UUID, instance_id: UUID) -> ComputerInstance:
        """Stop the instance's sandbox (a persistent one keeps its files); a
        stopped or destroyed one is answered as it is."""
        instance = await self._mine(who, agent_id, instance_id)
        config = await self._settings.of(who.org_id, agent_id)
        return await self._stop(instance, config)

    async def _stop(self, instance: ComputerInstance, config: ComputerConfig) -> ComputerInstance:
        if instance.status in ("stopped", "destroyed"):
            return instance
        if instance.ref is not None:
            spec = spec_of(config, instance.id, instance.persistent)
            with contextlib.suppress(SandboxGone):
                await self.provider(instance.provider).stop(instance.ref, spec)
        return await self._store.modify(
            instance.org_id,
            instance.id,
            lambda i: msgspec.structs.replace(i, status="stopped", state_lost=False),
        )

    async def destroy(self, who: Principal, agent_id: UUID, instance_id: UUID) -> None:
        """Remove the instance's sandbox and files; idempotent."""
        instance = await self._mine(who, agent_id, instance_id)
        if instance.ref is not None:
            await self.provider(instance.provider).destroy(instance.ref)
        await self._store.modify(
            who.org_id,
            instance.id,
            lambda i: msgspec.structs.replace(
                i, status="destroyed", ref=None, state_lost=False, disk_bytes=0
            ),
        )

    async def drop_agent(self, org: str, agent_id: UUID) -> None:
        """Before an agent goes (its instances' rows go with it): remove its
        sandboxes at their providers. One that cannot be reached now is left to its
        provider (logged): the agent's deletion is not refused for it."""
        for instance in await self._store.of_agent(org, agent_id):
            if instance.ref is None:
                continue
            try:
                await self.provider(instance.provider).destroy(instance.ref)
            except (SandboxUnavailable, SandboxGone) as exc:
                log.warning("the sandbox of computer instance %s stays: %s", instance.id, exc)

    async def sweep_idle(self) -> int:
        """Stop the running instances unused for their idle timeout (none with a
        command in flight in this process); answers how many stopped."""
        stopped = 0
        for instance in await self._store.idle_since(self._clock.now()):
            if self._busy.get(instance.id):
                continue
            config = await self._settings.of(instance.org_id, instance.agent_id)
            with contextlib.suppress(SandboxUnavailable, NotFound):
                await self._stop(instance, config)
                stopped += 1
        return stopped

    # --- commands -----------------------------------------------------------------

    async def operator_exec(
        self, who: Principal, agent_id: UUID, instance_id: UUID, command: str, *, max_output: int
    ) -> Execution:
        """An operator's command on one instance (resumed when stopped)."""
        instance = await self._mine(who, agent_id, instance_id)
        if instance.status == "destroyed":
            raise NotFound("computer instance not found")
        agent = await self._agents.get(who.org_id, agent_id)
        config = await self._settings.of(who.org_id, agent_id)
        release = self._limits.take(who.org_id, agent_id)
        try:
            if instance.status not in RUNNING or instance.ref is None:
                async with self._locks.setdefault(
                    (who.org_id, agent.id, instance.thread_id), asyncio.Lock()
                ):
                    instance = await self._start(instance, config)
        except BaseException:
            release()
            raise
        events = self._exec(instance, config, command, config.exec_timeout_s, max_output)
        return Execution(instance, events, release)

    async def begin(
        self,
        org: str,
        agent: Agent,
        config: ComputerConfig,
        thread_id: UUID | None,
        command: str,
        *,
        timeout_s: float,
        max_output: int,
    ) -> Execution:
        """The model's (or a runner step's) command on the computer of ``thread_id``."""
        release = self._limits.take(org, agent.id)
        try:
            instance = await self.running(org, agent, config, thread_id)
        except BaseException:
            release()
            raise
        events = self._exec(instance, config, command, timeout_s, max_output)
        return Execution(instance, events, release)

    async def _exec(
        self,
        instance: ComputerInstance,
        config: ComputerConfig,
        command: str,
        timeout_s: float,
        max_output: int,
    ) -> AsyncGenerator[ExecOutput | ExecExit]:
        provider = self.provider(instance.provider)
        assert instance.ref is not None
        await self._used(instance, "ready")
        self._busy[instance.id] = self._busy.get(instance.id, 0) + 1
        spec = spec_of(config, instance.id, instance.persistent)
        try:
            try:
                stream = provider.exec(
                    instance.ref, spec, command, timeout_s=timeout_s, max_output=max_output
                )
                first = await anext(stream)
            except SandboxGone:
                instance = await self._lost(instance, config)
                assert instance.ref is not None
                stream = provider.exec(
                    instance.ref, spec, command, timeout_s=timeout_s, max_output=max_output
                )
                first = await anext(stream)
            try:
                yield first
                async for event in stream:
                    yield event
            finally:
                close = getattr(stream, "aclose", None)
                if close is not None:  # the port: leaving the iterator kills the command
                    await close()
        finally:
            left = self._busy.get(instance.id, 1) - 1
            if left:
                self._busy[instance.id] = left
            else:
                self._busy.pop(instance.id, None)
            await self._used(instance, "idle" if not left else "ready")

    async def _used(self, instance: ComputerInstance, status: str | None) -> None:
        """Note a use: its status (None: as it is), the time, and when it goes
        idle what its workspace holds."""
        now = self._clock.now()
        size: int | None = None
        if status == "idle" and instance.ref is not None:
            with contextlib.suppress(SandboxGone, SandboxUnavailable):
                size = await self.provider(instance.provider).disk_bytes(instance.ref)

        def change(i: ComputerInstance) -> ComputerInstance:
            if i.status not in RUNNING:  # stopped or destroyed meanwhile
                return i
            return msgspec.structs.replace(
                i,
                status=status or i.status,
                last_used_at=now,
                disk_bytes=i.disk_bytes if size is None else size,
            )

        with contextlib.suppress(NotFound):
            await self._store.modify(instance.org_id, instance.id, change)

    # --- files (the model's tools) ------------------------------------------------

    async def _files(
        self,
        org: str,
        agent: Agent,
        config: ComputerConfig,
        thread_id: UUID | None,
        use: Callable[[SandboxProvider, str], Awaitable[T]],
    ) -> tuple[ComputerInstance, T]:
        """``use`` the running instance's sandbox (by its ref); a sandbox the
        provider lost is started again (``state_lost``) and used once more."""
        instance = await self.running(org, agent, config, thread_id)
        provider = self.provider(instance.provider)
        assert instance.ref is not None
        try:
            answer = await use(provider, instance.ref)
        except SandboxGone:
            instance = await self._lost(instance, config)
            assert instance.ref is not None
            answer = await use(provider, instance.ref)
        await self._used(instance, None)
        return instance, answer

    async def read_file(
        self, org: str, agent: Agent, config: ComputerConfig, thread_id: UUID | None, path: str
    ) -> tuple[ComputerInstance, bytes]:
        return await self._files(
            org, agent, config, thread_id, lambda p, ref: p.read_file(ref, path)
        )

    async def write_file(
        self,
        org: str,
        agent: Agent,
        config: ComputerConfig,
        thread_id: UUID | None,
        path: str,
        data: bytes,
    ) -> ComputerInstance:
        instance, _ = await self._files(
            org, agent, config, thread_id, lambda p, ref: p.write_file(ref, path, data)
        )
        return instance

    async def list_files(
        self, org: str, agent: Agent, config: ComputerConfig, thread_id: UUID | None, path: str
    ) -> tuple[ComputerInstance, list[FileEntry]]:
        return await self._files(
            org, agent, config, thread_id, lambda p, ref: p.list_files(ref, path)
        )
