"""Use cases: one module per aggregate, one method per operation."""

from agentsvc_core.use_cases.agents import AgentChanges, AgentDraft, Agents
from agentsvc_core.use_cases.api_keys import ApiKeys, IssuedKey
from agentsvc_core.use_cases.auth import Authenticator

__all__ = [
    "AgentChanges",
    "AgentDraft",
    "Agents",
    "ApiKeys",
    "Authenticator",
    "IssuedKey",
]
