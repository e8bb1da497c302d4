"""Ports: what the core needs from the world, as ``typing.Protocol`` classes."""

from agentsvc_core.ports.clock import Clock
from agentsvc_core.ports.databases import (
    DatabaseError,
    DatabaseTarget,
    SqlDatabases,
    TableName,
    TableRows,
)
from agentsvc_core.ports.integrations import IntegrationStore
from agentsvc_core.ports.llm import (
    ChatModel,
    CompactionBlock,
    Finished,
    ModelEvent,
    ModelRequest,
    ModelRouter,
    NativeCompaction,
    TextDelta,
    ToolCallRequested,
    ToolSpec,
    UsageReport,
)
from agentsvc_core.ports.mcp import McpCallResult, McpClient, McpEndpoint, McpTool
from agentsvc_core.ports.resolver import (
    CredentialResolver,
    Resolution,
    ResolverOutcome,
    ResolverRequest,
)
from agentsvc_core.ports.sealed import SealedRecord, SecretStore
from agentsvc_core.ports.secrets import SecretBox, SecretUnreadable
from agentsvc_core.ports.signals import (
    Revocations,
    StopBus,
    StopSignal,
)
from agentsvc_core.ports.storage import (
    AgentRepository,
    ApiKeyRepository,
    ConversationStore,
    McpRepository,
    OrganizationRepository,
    Storage,
    ThreadRepository,
    TurnInputs,
    TurnReader,
)
from agentsvc_core.ports.streams import EventBatch, FollowRequests, StoredStream, StreamStore
from agentsvc_core.ports.tokens import TokenVerifier, VerifiedToken
from agentsvc_core.ports.tools import (
    RESERVED_TOOL_PREFIXES,
    TOOL_SEPARATOR,
    NoServerTools,
    ServerTools,
    ToolAuthRequired,
    ToolCallContext,
    ToolSetup,
)
from agentsvc_core.ports.traces import (
    AnalyticsGroups,
    AnalyticsStore,
    ThreadGroup,
    TraceFilter,
    TraceGroup,
    TraceStore,
    UsageGroup,
)

__all__ = [
    "RESERVED_TOOL_PREFIXES",
    "TOOL_SEPARATOR",
    "AgentRepository",
    "AnalyticsGroups",
    "AnalyticsStore",
    "ApiKeyRepository",
    "ChatModel",
    "Clock",
    "CompactionBlock",
    "ConversationStore",
    "CredentialResolver",
    "DatabaseError",
    "DatabaseTarget",
    "EventBatch",
    "Finished",
    "FollowRequests",
    "IntegrationStore",
    "McpCallResult",
    "McpClient",
    "McpEndpoint",
    "McpRepository",
    "McpTool",
    "ModelEvent",
    "ModelRequest",
    "ModelRouter",
    "NativeCompaction",
    "NoServerTools",
    "OrganizationRepository",
    "Resolution",
    "ResolverOutcome",
    "ResolverRequest",
    "Revocations",
    "SealedRecord",
    "SecretBox",
    "SecretStore",
    "SecretUnreadable",
    "ServerTools",
    "SqlDatabases",
    "StopBus",
    "StopSignal",
    "Storage",
    "StoredStream",
    "StreamStore",
    "TableName",
    "TableRows",
    "TextDelta",
    "ThreadGroup",
    "ThreadRepository",
    "TokenVerifier",
    "ToolAuthRequired",
    "ToolCallContext",
    "ToolCallRequested",
    "ToolSetup",
    "ToolSpec",
    "TraceFilter",
    "TraceGroup",
    "TraceStore",
    "TurnInputs",
    "TurnReader",
    "UsageGroup",
    "UsageReport",
    "VerifiedToken",
]
