"""The tool source of a configuration that switches its tools on
(use_cases/agent_settings.py ``GatedTools``, under the plan and memory tools): its
names, the switch, the refusals made before anything is read, and the error texts
the model reads."""

from __future__ import annotations

import uuid
from typing import Any, cast

import msgspec
import pytest

from agentsvc_adapters.clock import SystemClock
from agentsvc_adapters.crypto import AesGcmBox
from agentsvc_adapters.crypto.aesgcm import new_key_spec, parse_keys
from agentsvc_adapters.memory import MemoryStorage
from agentsvc_core.entities import Agent, Principal
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import SealedRecord, SecretStore, ToolCallContext, ToolSetup, ToolSpec
from agentsvc_core.use_cases import AgentDraft, Agents
from agentsvc_core.use_cases.agent_settings import (
    AgentSettings,
    GatedTools,
    Switched,
    ToolRefused,
)

ORG = "org-gated"
WHO = Principal(org_id=ORG, method="api_key")
BOX = AesGcmBox(parse_keys(new_key_spec("unit")))


class EchoConfig(Switched, frozen=True, kw_only=True):
    greeting: str = "hello"


class _Args(msgspec.Struct, frozen=True):
    text: str


class Echo(GatedTools[EchoConfig]):
    """Two tools: ``echo_say`` answers its text after the greeting; ``echo_fail``
    raises what its ``raise`` argument names."""

    names = ("echo_say", "echo_fail")
    noun = "echo"
    disabled = "echo is not enabled for this agent"

    def __init__(self, settings: AgentSettings[EchoConfig]) -> None:
        super().__init__(settings)
        self.ran: list[str] = []

    def specs(self, config: EchoConfig) -> list[ToolSpec]:
        return [ToolSpec(name=n, description=config.greeting) for n in self.names]

    def refusal(self, ctx: ToolCallContext) -> str | None:
        return "echo works inside a conversation only" if ctx.thread_id is None else None

    async def run(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
        config: EchoConfig,
    ) -> str:
        self.ran.append(name)
        if name == "echo_say":
            return f"{config.greeting} {msgspec.convert(arguments, _Args).text}"
        match arguments["raise"]:
            case "refused":
                raise ToolRefused("not this one")
            case "domain":
                raise NotFound("nothing there")
            case _:
                raise RuntimeError("a bug")


class Unreadable:
    """A store that must not be read: it stands in for the secret store (a cast
    where it is passed) and fails on the first attribute read."""

    def __getattribute__(self, name: str) -> Any:
        raise AssertionError(f"storage was read: {name}")


async def an_agent(storage: MemoryStorage) -> Agent:
    return await Agents(storage.agents, SystemClock(), "local").create(WHO, AgentDraft(name="echo"))


def echo_over(store: SecretStore, storage: MemoryStorage) -> Echo:
    return Echo(AgentSettings(store, storage.agents, BOX, "echo", EchoConfig))


def read_with(tools: Echo, agent: Agent, **config: Any) -> ToolSetup:
    """The turn's read of the agent's echo record (``config`` as stored)."""
    sealed = tools._settings._records.seal(
        ORG, "echo", str(agent.id), EchoConfig(agent_id=agent.id, org_id=ORG, **config)
    )
    return ToolSetup(records={"echo": SealedRecord(value=sealed)})


def in_thread(setup: ToolSetup | None) -> ToolCallContext:
    return ToolCallContext(tool_call_id="c1", thread_id=uuid.uuid4(), setup=setup)


async def test_it_owns_its_names_only_none_an_extension_and_reads_its_kind() -> None:
    storage = MemoryStorage()
    tools = echo_over(storage.secrets, storage)
    assert tools.kinds == ("echo",)
    assert [tools.owns(n) for n in ("echo_say", "echo_fail", "echo", "echo_sayx", "web_fetch")] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert not tools.is_extension("echo_say")


async def test_switched_off_it_offers_nothing_and_a_call_says_so_without_running() -> None:
    storage = MemoryStorage()
    agent = await an_agent(storage)
    silent = echo_over(cast("SecretStore", Unreadable()), storage)  # the turn's read is enough
    assert await silent.list_tools(WHO, agent, ToolSetup()) == []
    assert await silent.call(WHO, agent, "echo_say", {"text": "x"}, in_thread(ToolSetup())) == (
        "error: echo is not enabled for this agent"
    )
    tools = echo_over(storage.secrets, storage)
    off = read_with(tools, agent, enabled=False, greeting="hey")
    assert await tools.list_tools(WHO, agent, off) == []
    assert await tools.list_tools(WHO, agent, None) == []  # read now: never stored, off
    assert tools.ran == []


async def test_switched_on_it_offers_its_tools_and_runs_them_with_the_configuration() -> None:
    storage = MemoryStorage()
    agent = await an_agent(storage)
    tools = echo_over(storage.secrets, storage)
    on = read_with(tools, agent, enabled=True, greeting="hey")
    assert await tools.list_tools(WHO, agent, on) == [
        ToolSpec(name="echo_say", description="hey"),
        ToolSpec(name="echo_fail", description="hey"),
    ]
    assert await tools.call(WHO, agent, "echo_say", {"text": "you"}, in_thread(on)) == "hey you"
    assert tools.ran == ["echo_say"]


async def test_a_name_not_its_own_or_a_call_outside_a_conversation_reads_nothing() -> None:
    storage = MemoryStorage()
    agent = await an_agent(storage)
    tools = echo_over(cast("SecretStore", Unreadable()), storage)
    assert await tools.call(WHO, agent, "echo_sing", {}, in_thread(None)) == (
        "error: no echo tool named 'echo_sing'"
    )
    outside = ToolCallContext(tool_call_id="c1", setup=None)
    assert await tools.call(WHO, agent, "echo_say", {"text": "x"}, outside) == (
        "error: echo works inside a conversation only"
    )
    assert tools.ran == []


async def test_failures_the_model_should_read_are_error_texts_and_a_bug_propagates() -> None:
    storage = MemoryStorage()
    agent = await an_agent(storage)
    tools = echo_over(storage.secrets, storage)
    ctx = in_thread(read_with(tools, agent, enabled=True))

    async def call(name: str, arguments: dict[str, Any]) -> str:
        return await tools.call(WHO, agent, name, arguments, ctx)

    assert (await call("echo_say", {"text": 1})).startswith(
        "error: invalid arguments: Expected `str`, got `int`"
    )
    assert await call("echo_fail", {"raise": "refused"}) == "error: not this one"
    assert await call("echo_fail", {"raise": "domain"}) == "error: nothing there"
    with pytest.raises(RuntimeError, match="a bug"):
        await call("echo_fail", {"raise": "bug"})
