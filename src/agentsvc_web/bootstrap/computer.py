"""The agents' computers: their configuration, their instances and commands (with
the limits per agent) and the model's tools, over the sandbox providers
``agentsvc_adapters.sandboxes.registry`` builds (docs/computer.md)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NamedTuple

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.sandboxes import registry
from agentsvc_core.ports import Clock, SecretBox, Storage
from agentsvc_core.ports.mcp import UrlPolicy
from agentsvc_core.ports.sandboxes import SandboxProvider
from agentsvc_core.use_cases.computer import Computers, ComputerSettings
from agentsvc_core.use_cases.threads import Threads
from agentsvc_web.limits import TokenBuckets
from agentsvc_web.settings import Settings

__all__ = [
    "COMMANDS_PER_MIN",
    "ComputerArea",
    "outbound_guard",
    "sandbox_providers",
    "wire_computer",
]

COMMANDS_PER_MIN = 60  # per agent, the model's and operators' commands together


class ComputerArea(NamedTuple):
    computer_settings: ComputerSettings
    computers: Computers


def outbound_guard(settings: Settings, urls: UrlPolicy) -> OutboundGuard:
    """The outbound guard the host was given (or one of their own for a host that
    passes another URL policy)."""
    if isinstance(urls, OutboundGuard):
        return urls
    return OutboundGuard(allow_private_network=settings.allow_private_network)


def sandbox_providers(settings: Settings, urls: UrlPolicy) -> Mapping[str, SandboxProvider]:
    """The providers the environment configures, over the outbound guard."""
    return registry.providers(os.environ, outbound_guard(settings, urls), settings.data_dir)


def wire_computer(
    settings: Settings,
    storage: Storage,
    box: SecretBox,
    clock: Clock,
    threads: Threads,
    providers: Mapping[str, SandboxProvider],
) -> ComputerArea:
    config = ComputerSettings(storage.secrets, storage.agents, box)
    budget = TokenBuckets(COMMANDS_PER_MIN, max_keys=settings.rate_limit_max_keys)
    computers = Computers(
        storage.computers, storage.agents, threads, config, providers, clock, budget.spend
    )
    return ComputerArea(config, computers)
