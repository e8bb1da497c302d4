"""An agent's computer configuration (``GET/PUT /api/agents/{id}/computer``): a
sealed record of kind ``computer`` like the plan and web configurations, off by
default, and where its sandboxes run (``resolve_provider``)."""

from __future__ import annotations

import re
from typing import Any, Literal
from uuid import UUID

import idna
import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports import AgentRepository, SecretBox, SecretStore
from agentsvc_core.ports.sandboxes import SandboxSpec
from agentsvc_core.use_cases.agent_settings import AgentSettings, Switched

__all__ = [
    "BOUNDS",
    "KIND",
    "MAX_HOSTS",
    "PROVIDERS",
    "TOOL_NAMES",
    "ComputerConfig",
    "ComputerSettings",
    "normalise_host",
    "resolve_provider",
    "spec_of",
]

KIND = "computer"
# the computer tools' names (use_cases/computer/tools.py)
EXEC_TOOL, READ_TOOL = "computer_exec", "computer_read_file"
WRITE_TOOL, LIST_TOOL = "computer_write_file", "computer_list_files"
TOOL_NAMES = (EXEC_TOOL, READ_TOOL, WRITE_TOOL, LIST_TOOL)
PROVIDERS = ("local", "e2b")
Provider = Literal["local", "e2b"]
Scope = Literal["thread", "agent"]
Network = Literal["none", "allowlist"]

# (field, least, most)
BOUNDS = (
    ("idle_timeout_s", 60, 7 * 24 * 3600),
    ("exec_timeout_s", 1, 3600),
    ("memory_mb", 64, 16_384),
)
MAX_HOSTS = 100
MAX_HOST = 253
_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOST = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")


class ComputerConfig(Switched, frozen=True, kw_only=True):
    """``enabled``: the model gets the computer tools."""

    # where the sandboxes run; None: from the agent's runtimeProvider
    provider: Provider | None = None
    persistent: bool = True  # an instance keeps its files across a stop
    scope: Scope = "thread"  # one instance per thread, or one the agent's threads share
    idle_timeout_s: int = 7200  # a running instance unused this long is stopped
    exec_timeout_s: int = 60  # the most a command may run (wall time), then it is killed
    memory_mb: int = 512
    network: Network = "none"  # allowlist: HTTP(S) to allowed_hosts only
    allowed_hosts: tuple[str, ...] = ()
    # the computer tools whose every call waits for a person's approval
    require_approval: tuple[str, ...] = ()


def resolve_provider(config: ComputerConfig, runtime_provider: str | None) -> str:
    """The provider the configuration names, else the agent's runtime's:
    ``alternative`` the hosted provider (e2b), ``native`` or none the local one."""
    if config.provider is not None:
        return config.provider
    return "e2b" if runtime_provider == "alternative" else "local"


def spec_of(config: ComputerConfig, instance_id: UUID, persistent: bool) -> SandboxSpec:
    """What a sandbox of this configuration is made with (``persistent``: the
    instance's, fixed when it was made)."""
    return SandboxSpec(
        instance_id=str(instance_id),
        org_id=config.org_id,
        persistent=persistent,
        memory_mb=config.memory_mb,
        network=config.network,
        allowed_hosts=config.allowed_hosts,
    )


def normalise_host(value: str) -> str:
    """A host name as the egress proxy matches it: lowercase ASCII (IDNA), no
    trailing dot; exactly that host (a name covers none of its subdomains). An
    address, a port, a scheme, a path or a wildcard is refused."""
    name = value.strip().lower()
    if not name.isascii():
        try:
            name = idna.encode(name, uts46=True).decode("ascii")
        except idna.IDNAError:
            name = ""
    name = name.removesuffix(".")
    numeric = bool(name) and name.rsplit(".", 1)[-1].isdigit()
    if not name or len(name) > MAX_HOST or numeric or not _HOST.fullmatch(name):
        raise InvalidInput(
            "allowed_hosts",
            f"{value!r} is not a host name (such as pypi.org: no scheme, port, path, "
            "address or wildcard)",
        )
    return name


def _hosts(values: object) -> tuple[str, ...]:
    if not isinstance(values, list | tuple):
        raise InvalidInput("allowed_hosts", "must be a list of host names")
    if len(values) > MAX_HOSTS:
        raise InvalidInput("allowed_hosts", f"at most {MAX_HOSTS} hosts")
    return tuple(dict.fromkeys(normalise_host(str(v)) for v in values))


def checked(config: ComputerConfig) -> ComputerConfig:
    """``config`` if its numbers are within bounds and its choices known, else
    ``InvalidInput`` naming the field."""
    for field, least, most in BOUNDS:
        value = getattr(config, field)
        if not least <= value <= most:
            raise InvalidInput(field, f"must be between {least} and {most}")
    if config.provider is not None and config.provider not in PROVIDERS:
        raise InvalidInput("provider", f"one of {', '.join(PROVIDERS)} or null")
    if config.scope not in ("thread", "agent"):
        raise InvalidInput("scope", "thread or agent")
    if config.network not in ("none", "allowlist"):
        raise InvalidInput("network", "none or allowlist")
    unknown = [n for n in config.require_approval if n not in TOOL_NAMES]
    if unknown:
        raise InvalidInput(
            "require_approval", f"{unknown[0]!r} is not one of {', '.join(TOOL_NAMES)}"
        )
    return config


class ComputerSettings(AgentSettings[ComputerConfig]):
    def __init__(self, store: SecretStore, agents: AgentRepository, box: SecretBox) -> None:
        super().__init__(store, agents, box, KIND, ComputerConfig)

    async def update(
        self, who: Principal, agent_id: UUID, changes: dict[str, Any]
    ) -> ComputerConfig:
        """Only the supplied fields change (a concurrent PUT of others is not lost);
        the result is checked as a whole."""

        def apply(current: ComputerConfig) -> ComputerConfig:
            given = dict(changes)
            if "allowed_hosts" in given:
                given["allowed_hosts"] = _hosts(given["allowed_hosts"])
            if "require_approval" in given:
                given["require_approval"] = tuple(dict.fromkeys(given["require_approval"]))
            return checked(msgspec.structs.replace(current, **given))

        return await self._change(who, agent_id, apply)
