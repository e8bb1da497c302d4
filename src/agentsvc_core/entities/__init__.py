"""Entities: frozen msgspec Structs; their invariants live in ``agentsvc_core.rules``."""

from agentsvc_core.entities.agent import RUNTIME_PROVIDERS, Agent, ToolProfile
from agentsvc_core.entities.api_key import API_KEY_PREFIX, ApiKey
from agentsvc_core.entities.event_webhook import (
    EVENT_TYPES,
    DeliveryAttempt,
    DeliveryStatus,
    EventDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from agentsvc_core.entities.integration import Integration, IntegrationType
from agentsvc_core.entities.mcp import CachedTool, McpAttachment, McpServer, McpTransport
from agentsvc_core.entities.message import (
    Message,
    MessageStatus,
    Role,
    ToolCall,
    visible_in_history,
)
from agentsvc_core.entities.organization import Organization
from agentsvc_core.entities.principal import AuthMethod, OrgRole, Principal
from agentsvc_core.entities.run import Run, RunStatus
from agentsvc_core.entities.thread import Participant, ParticipantRole, Thread, ThreadKind
from agentsvc_core.entities.trace import (
    StoredSpan,
    TraceEvaluation,
    TraceRecord,
    TraceStatus,
    TraceSummary,
)
from agentsvc_core.entities.usage import (
    KeySource,
    Usage,
    UsagePurpose,
    UsageRecord,
    key_source,
)
from agentsvc_core.entities.webhook_tool import WebhookMethod, WebhookTool

__all__ = [
    "API_KEY_PREFIX",
    "EVENT_TYPES",
    "RUNTIME_PROVIDERS",
    "Agent",
    "ApiKey",
    "AuthMethod",
    "CachedTool",
    "DeliveryAttempt",
    "DeliveryStatus",
    "EventDelivery",
    "Integration",
    "IntegrationType",
    "KeySource",
    "McpAttachment",
    "McpServer",
    "McpTransport",
    "Message",
    "MessageStatus",
    "OrgRole",
    "Organization",
    "Participant",
    "ParticipantRole",
    "Principal",
    "Role",
    "Run",
    "RunStatus",
    "StoredSpan",
    "Thread",
    "ThreadKind",
    "ToolCall",
    "ToolProfile",
    "TraceEvaluation",
    "TraceRecord",
    "TraceStatus",
    "TraceSummary",
    "Usage",
    "UsagePurpose",
    "UsageRecord",
    "WebhookEndpoint",
    "WebhookEvent",
    "WebhookMethod",
    "WebhookTool",
    "key_source",
    "visible_in_history",
]
