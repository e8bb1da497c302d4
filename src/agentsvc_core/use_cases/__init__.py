"""Use cases: one module per aggregate, one method per operation."""

from agentsvc_core.use_cases.agents import AgentChanges, AgentDraft, Agents
from agentsvc_core.use_cases.api_keys import ApiKeys, IssuedKey
from agentsvc_core.use_cases.auth import Authenticator
from agentsvc_core.use_cases.threads import ThreadChanges, ThreadDraft, ThreadPage, Threads
from agentsvc_core.use_cases.turn.conversation import (
    Conversation,
    SendInput,
    ToolApprovalIn,
    ToolResultIn,
)
from agentsvc_core.use_cases.turn.events import Turn

__all__ = [
    "AgentChanges",
    "AgentDraft",
    "Agents",
    "ApiKeys",
    "Authenticator",
    "Conversation",
    "IssuedKey",
    "SendInput",
    "ThreadChanges",
    "ThreadDraft",
    "ThreadPage",
    "Threads",
    "ToolApprovalIn",
    "ToolResultIn",
    "Turn",
]
