"""Entities: frozen msgspec Structs; their invariants live in ``agentsvc_core.rules``."""

from agentsvc_core.entities.agent import RUNTIME_PROVIDERS, Agent, ToolProfile
from agentsvc_core.entities.api_key import API_KEY_PREFIX, ApiKey
from agentsvc_core.entities.organization import Organization
from agentsvc_core.entities.principal import AuthMethod, Principal

__all__ = [
    "API_KEY_PREFIX",
    "RUNTIME_PROVIDERS",
    "Agent",
    "ApiKey",
    "AuthMethod",
    "Organization",
    "Principal",
    "ToolProfile",
]
