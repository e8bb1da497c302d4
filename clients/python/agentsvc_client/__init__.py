"""agentsvc-client: the typed Python client of agentsvc, the Agent Conversation Service.

::

    from agentsvc_client import Client

    with Client("http://127.0.0.1:8000", api_key="ask_...") as client:
        thread = client.threads.create(agent_id=client.agents.create(name="Hi").id)
        for event in client.send_message(thread.id, "Hello!"):
            print(event)
"""

from agentsvc_client import errors, event_webhooks, events, models, tools, webhooks
from agentsvc_client._operations import OPERATIONS
from agentsvc_client._stream import AsyncReplyStream, ReplyStream
from agentsvc_client.client import AsyncClient, Client, __version__
from agentsvc_client.errors import (
    AgentsvcError,
    APIConnectionError,
    BadRequest,
    Conflict,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    ReplyError,
    ServerError,
    StreamInterrupted,
    ThreadBusy,
    Unauthorized,
    UnexpectedResponse,
    UnsupportedMediaType,
    ValidationError,
)
from agentsvc_client.event_webhooks import verify_webhook
from agentsvc_client.events import (
    AuthChallenge,
    Done,
    Error,
    Event,
    Meta,
    ProfileSwitchProposal,
    RequiresAction,
    Token,
    ToolCall,
    ToolExecuting,
    ToolResult,
)
from agentsvc_client.tools import (
    Approval,
    Tool,
    arun_tools,
    asend_approvals,
    run_tools,
    send_approvals,
)
from agentsvc_client.webhooks import WebhookVerificationError

__all__ = [
    "OPERATIONS",
    "APIConnectionError",
    "AgentsvcError",
    "Approval",
    "AsyncClient",
    "AsyncReplyStream",
    "AuthChallenge",
    "BadRequest",
    "Client",
    "Conflict",
    "Done",
    "Error",
    "Event",
    "Forbidden",
    "Meta",
    "MethodNotAllowed",
    "NotFound",
    "PayloadTooLarge",
    "ProfileSwitchProposal",
    "RateLimited",
    "ReplyError",
    "ReplyStream",
    "RequiresAction",
    "ServerError",
    "StreamInterrupted",
    "ThreadBusy",
    "Token",
    "Tool",
    "ToolCall",
    "ToolExecuting",
    "ToolResult",
    "Unauthorized",
    "UnexpectedResponse",
    "UnsupportedMediaType",
    "ValidationError",
    "WebhookVerificationError",
    "__version__",
    "arun_tools",
    "asend_approvals",
    "errors",
    "event_webhooks",
    "events",
    "models",
    "run_tools",
    "send_approvals",
    "tools",
    "verify_webhook",
    "webhooks",
]
