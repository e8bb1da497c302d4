"""Ports: what the core needs from the world, as ``typing.Protocol`` classes."""

from agentsvc_core.ports.clock import Clock, SystemClock
from agentsvc_core.ports.storage import (
    AgentRepository,
    ApiKeyRepository,
    OrganizationRepository,
    Storage,
)
from agentsvc_core.ports.tokens import TokenVerifier, VerifiedToken

__all__ = [
    "AgentRepository",
    "ApiKeyRepository",
    "Clock",
    "OrganizationRepository",
    "Storage",
    "SystemClock",
    "TokenVerifier",
    "VerifiedToken",
]
