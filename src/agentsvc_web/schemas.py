"""Request and response bodies. Requests are camelCase; agent responses snake_case.

Bounds here publish the core's numbers in the OpenAPI document; the core checks
them again (and what JSON Schema cannot say, such as NUL characters).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal, TypeVar
from uuid import UUID

import msgspec
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import KwargDefinition
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core import rules
from agentsvc_core.entities import (
    RUNTIME_PROVIDERS,
    Agent,
    ApiKey,
    McpServer,
    Participant,
    Thread,
    ToolProfile,
)
from agentsvc_core.errors import InvalidInput
from agentsvc_core.use_cases.branches import Shown
from agentsvc_web.model_params import ModelParamsBody, ModelParamsOut

Name = Annotated[str, Meta(min_length=1, max_length=rules.MAX_NAME)]
Description = Annotated[str, Meta(max_length=rules.MAX_DESCRIPTION)]
Preamble = Annotated[str, Meta(max_length=rules.MAX_PREAMBLE)]
ModelId = Annotated[
    str,
    Meta(min_length=1, max_length=rules.MAX_MODEL_ID, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$"),
]
ProfileName = Annotated[str, Meta(min_length=1, max_length=rules.MAX_PROFILE_NAME)]
ToolName = Annotated[str, Meta(min_length=1, max_length=rules.MAX_TOOL_NAME)]
RuntimeProvider = Literal[RUNTIME_PROVIDERS]  # type: ignore[valid-type]
ApprovalTimeout = Annotated[
    int,
    Meta(ge=rules.MIN_APPROVAL_TIMEOUT_MINUTES, le=rules.MAX_APPROVAL_TIMEOUT_MINUTES),
]


class _SchemaExtra(KwargDefinition):
    """Hashed by identity, so it can sit in an ``X | None`` (its ``schema_extra`` is a dict)."""

    __hash__ = object.__hash__


def items_schema(items: Schema) -> KwargDefinition:
    """Litestar leaves the bounds of a list's items out of the document: state them."""
    return _SchemaExtra(schema_extra={"items": items})


_Out = TypeVar("_Out", bound=msgspec.Struct)


def read_cursor(raw: str | None) -> tuple[datetime, UUID] | None:
    """A ``nextCursor`` of a list paged by creation (``cursor_text``); 422 for any
    other string."""
    if raw is None:
        return None
    at, _, item_id = raw.rpartition("_")
    try:
        value = msgspec.convert(at, datetime)
        return (value if value.tzinfo else value.replace(tzinfo=UTC), UUID(item_id))
    except (msgspec.ValidationError, ValueError):
        raise InvalidInput("cursor", "must be a nextCursor of this list") from None


def cursor_text(at: datetime, item_id: UUID) -> str:
    """The ``nextCursor`` after the item created ``at``: ``<created_at>_<id>``."""
    return f"{at.astimezone(UTC).isoformat().replace('+00:00', 'Z')}_{item_id}"


def copied(cls: type[_Out], source: object, **given: Any) -> _Out:
    """A response body of type ``cls`` from ``source`` (an entity or a use case's
    view): each field from ``source``'s attribute of the same name, but those in
    ``given`` (renamed, converted or not on ``source``). Every ``Out.of`` is this."""
    return cls(**{f: given[f] if f in given else getattr(source, f) for f in cls.__struct_fields__})


class ErrorBody(msgspec.Struct, omit_defaults=True):
    """Every error answer: ``{"error": CODE, "detail": "..."}``."""

    error: str
    detail: str | None = None


class OkBody(msgspec.Struct):
    ok: bool


# --- agents -----------------------------------------------------------------


class ToolProfileBody(msgspec.Struct, rename="camel"):
    tools: Annotated[list[ToolName], Meta(max_length=rules.MAX_PROFILE_TOOLS)] = []
    description: Description = ""

    def to_entity(self) -> ToolProfile:
        return ToolProfile(tools=tuple(self.tools), description=self.description)


ToolProfiles = Annotated[dict[ProfileName, ToolProfileBody], Meta(max_length=rules.MAX_PROFILES)]


def profiles_to_entity(body: dict[str, ToolProfileBody] | None) -> dict[str, ToolProfile] | None:
    return None if body is None else {k: v.to_entity() for k, v in body.items()}


class AgentCreateBody(msgspec.Struct, rename="camel"):
    name: Name
    description: Description = ""
    stable_preamble: Preamble = ""
    default_model: ModelId | None = None
    # Accepted on create as well as on update, so an agent can be made in one call.
    tool_profiles: ToolProfiles | None = None
    default_profile: ProfileName | None = None
    runtime_provider: RuntimeProvider | None = None
    project_id: UUID | None = None
    approval_timeout_minutes: ApprovalTimeout = rules.DEFAULT_APPROVAL_TIMEOUT_MINUTES
    # the defaults of its model parameters; a send's own override them (docs/models.md)
    model_params: ModelParamsBody | None = None


class AgentPatchBody(msgspec.Struct, rename="camel"):
    name: Name | UnsetType = UNSET
    description: Description | UnsetType = UNSET
    stable_preamble: Preamble | UnsetType = UNSET
    default_model: ModelId | UnsetType = UNSET
    tool_profiles: ToolProfiles | UnsetType | None = UNSET
    default_profile: ProfileName | UnsetType | None = UNSET
    runtime_provider: RuntimeProvider | UnsetType | None = UNSET
    project_id: UUID | UnsetType | None = UNSET
    approval_timeout_minutes: ApprovalTimeout | UnsetType = UNSET
    model_params: ModelParamsBody | UnsetType | None = UNSET  # replaced whole; null clears


class ToolProfileOut(msgspec.Struct):
    tools: list[str]
    description: str


class TemplateRefOut(msgspec.Struct):
    id: str
    version: int


class AgentOut(msgspec.Struct):
    id: UUID
    org_id: str
    name: str
    description: str
    default_model: str
    created_at: datetime
    published_chats: list[dict[str, Any]]
    stable_preamble: str
    tool_profiles: dict[str, ToolProfileOut] | None
    default_profile: str | None
    runtime_provider: str | None
    project_id: UUID | None
    template: TemplateRefOut | None  # the official template it was made from
    updated_at: datetime
    # how long its tool calls wait for a person's approval (docs/tools.md)
    approval_timeout_minutes: int
    # its model parameters' defaults (null: none set)
    model_params: ModelParamsOut | None

    @classmethod
    def of(cls, a: Agent, published: list[dict[str, Any]] | None = None) -> AgentOut:
        return copied(
            cls,
            a,
            published_chats=published or [],  # controllers/publishing/schemas.py: chat_refs
            model_params=ModelParamsOut.of(a.model_params),
            template=None
            if a.template is None
            else TemplateRefOut(id=a.template.id, version=a.template.version),
            tool_profiles=None
            if a.tool_profiles is None
            else {
                k: ToolProfileOut(tools=list(p.tools), description=p.description)
                for k, p in a.tool_profiles.items()
            },
        )


# --- API keys ---------------------------------------------------------------


class KeyCreateBody(msgspec.Struct, rename="camel"):
    name: Annotated[str, Meta(max_length=rules.MAX_KEY_NAME)] = ""


class KeyOut(msgspec.Struct):
    id: UUID
    org_id: str
    name: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None

    @classmethod
    def of(cls, k: ApiKey) -> KeyOut:
        return copied(cls, k, prefix=k.display_prefix)


class IssuedKeyOut(KeyOut):
    """The one answer that carries a key's plaintext: it is never shown again."""

    key: str

    @classmethod
    def issued(cls, k: ApiKey, token: str) -> IssuedKeyOut:
        return copied(cls, k, prefix=k.display_prefix, key=token)


# --- threads ----------------------------------------------------------------

Overlay = (
    Annotated[str, Meta(max_length=rules.MAX_PREAMBLE)]
    | list[Annotated[str, Meta(max_length=rules.MAX_PREAMBLE)]]
)
Metadata = Annotated[
    dict[
        Annotated[str, Meta(min_length=1, max_length=rules.MAX_METADATA_KEY)],
        Annotated[str, Meta(max_length=rules.MAX_METADATA_VALUE)],
    ],
    Meta(max_length=rules.MAX_METADATA_KEYS),
]
Title = Annotated[str, Meta(max_length=rules.MAX_TITLE)]
UserId = Annotated[str, Meta(min_length=1, max_length=rules.MAX_USER_ID)]


class ThreadCreateBody(msgspec.Struct, rename="camel"):
    agent_id: UUID
    title: Title | None = None
    kind: Literal["single", "multiplayer"] = "single"
    resource_bindings: Annotated[list[dict[str, Any]], Meta(max_length=rules.MAX_BINDINGS)] = []
    active_profile: ProfileName | None = None
    system_prompt_overlay: Overlay | None = None
    metadata: Metadata = {}


class ThreadPatchBody(msgspec.Struct, rename="camel"):
    title: Title | UnsetType | None = UNSET
    active_profile: ProfileName | UnsetType | None = UNSET
    system_prompt_overlay: Overlay | UnsetType | None = UNSET
    metadata: Metadata | UnsetType | None = UNSET


class ThreadOut(msgspec.Struct):
    id: UUID
    org_id: str
    agent_id: UUID
    title: str | None
    kind: str
    status: str
    active_profile: str | None
    created_at: datetime
    updated_at: datetime
    system_prompt_overlay: str | None
    metadata: dict[str, str]
    resource_bindings: list[dict[str, Any]]
    created_by: str | None
    # the reply running now (re-attach with GET /api/threads/{id}/stream), null when idle
    active_run_id: UUID | None
    # the current branch's last message once the thread has branches (an edit, a
    # regenerate); null while its history is one line
    head_id: UUID | None

    @classmethod
    def of(cls, t: Thread) -> ThreadOut:
        return copied(cls, t)


class ThreadListOut(msgspec.Struct, rename="camel"):
    threads: list[ThreadOut]
    next_cursor: str | None


class MessageOut(msgspec.Struct):
    id: UUID
    role: str
    content: str
    sender_name: str | None
    created_at: datetime
    sender_id: str | None
    status: str
    # the message it follows on its branch, and its versions (the messages that
    # follow the same one: "2 of 3"), docs/threads.md
    parent_id: UUID | None
    sibling_index: int
    sibling_count: int
    prev_sibling_id: UUID | None
    next_sibling_id: UUID | None

    @classmethod
    def of(cls, s: Shown) -> MessageOut:
        return copied(
            cls,
            s.message,
            parent_id=s.parent_id,
            sibling_index=s.sibling_index,
            sibling_count=s.sibling_count,
            prev_sibling_id=s.prev_sibling_id,
            next_sibling_id=s.next_sibling_id,
        )


class MessageListOut(msgspec.Struct):
    messages: list[MessageOut]
    total: int


class ParticipantBody(msgspec.Struct, rename="camel"):
    user_id: UserId
    display_name: Title | None = None
    role: Literal["owner", "member"] = "member"


class ParticipantRemoveBody(msgspec.Struct, rename="camel"):
    user_id: UserId


class ParticipantOut(msgspec.Struct, rename="camel"):
    user_id: str
    display_name: str | None
    role: str
    added_at: datetime

    @classmethod
    def of(cls, p: Participant) -> ParticipantOut:
        return copied(cls, p)


class ParticipantListOut(msgspec.Struct):
    participants: list[ParticipantOut]


# --- MCP servers (responses are camelCase, unlike the rest) ---------------------

ToolNames = Annotated[
    list[ToolName],
    Meta(max_length=rules.MAX_PROFILE_TOOLS),
    items_schema(Schema(type=OpenAPIType.STRING, min_length=1, max_length=rules.MAX_TOOL_NAME)),
]
# "slug must not be sent": present means 422 (checked in the controller), and the
# document says so, so generated clients and fuzzers do not send it
Slug = Annotated[
    Any,
    KwargDefinition(
        schema_extra={"not": Schema()}, description="derived from the name; never sent"
    ),
]


# What the core's rules accept (rules.check_header, check_text), stated for clients
_NO_CONTROLS = r"^[^\x00-\x08\x0a-\x1f\x7f-\x9f]*$"
_NO_NUL = r"^[^\x00]*$"
_HEADERS_SCHEMA = _SchemaExtra(
    schema_extra={
        "propertyNames": Schema(
            type=OpenAPIType.STRING, max_length=256, pattern=f"^{rules.HEADER_NAME}$"
        ),
        "additionalProperties": Schema(
            type=OpenAPIType.STRING, max_length=16_384, pattern=_NO_CONTROLS
        ),
    }
)
_ENV_SCHEMA = _SchemaExtra(
    schema_extra={
        "propertyNames": Schema(
            type=OpenAPIType.STRING, max_length=256, pattern=r"^[^\x00]*[^\x00\s][^\x00]*$"
        ),
        "additionalProperties": Schema(type=OpenAPIType.STRING, max_length=16_384, pattern=_NO_NUL),
    }
)


class CredentialsBody(msgspec.Struct, rename="camel"):
    headers: Annotated[dict[str, str], _HEADERS_SCHEMA] = {}
    env: Annotated[dict[str, str], _ENV_SCHEMA] = {}


class McpCreateBody(msgspec.Struct, rename="camel", forbid_unknown_fields=False):
    name: Name
    transport: Literal["streamable_http", "sse", "stdio"]
    url: Annotated[str, Meta(max_length=4096)] | None = None
    command: Annotated[str, Meta(max_length=4096)] | None = None
    args: Annotated[list[Annotated[str, Meta(max_length=4096)]], Meta(max_length=64)] = []
    credentials: CredentialsBody | None = None
    allowed_tools: ToolNames | None = None
    slug: Slug = msgspec.UNSET


class McpPatchBody(msgspec.Struct, rename="camel"):
    name: Name | UnsetType = UNSET
    url: Annotated[str, Meta(max_length=4096)] | UnsetType | None = UNSET
    command: Annotated[str, Meta(max_length=4096)] | UnsetType | None = UNSET
    args: (
        Annotated[list[Annotated[str, Meta(max_length=4096)]], Meta(max_length=64)] | UnsetType
    ) = UNSET
    credentials: CredentialsBody | UnsetType | None = UNSET
    allowed_tools: ToolNames | UnsetType | None = UNSET
    slug: Slug = msgspec.UNSET


class CachedToolOut(msgspec.Struct, rename="camel"):
    name: str
    description: str


class McpOut(msgspec.Struct, rename="camel"):
    id: UUID
    name: str
    slug: str
    transport: str
    url: str | None
    status: str
    has_credentials: bool
    tools_cache: list[CachedToolOut]
    created_at: datetime
    command: str | None
    args: list[str]
    allowed_tools: list[str] | None
    updated_at: datetime

    @classmethod
    def of(cls, s: McpServer) -> McpOut:
        return copied(
            cls,
            s,
            tools_cache=[
                CachedToolOut(name=t.name, description=t.description) for t in s.tools_cache
            ],
            args=list(s.args),
            allowed_tools=None if s.allowed_tools is None else list(s.allowed_tools),
        )


class TestedToolOut(msgspec.Struct, rename="camel"):
    name: str
    description: str
    input_schema: dict[str, Any]


class McpTestOut(msgspec.Struct, rename="camel", omit_defaults=True):
    ok: bool
    tools: list[TestedToolOut]
    error: str | None = None


class AttachBody(msgspec.Struct, rename="camel"):
    mcp_server_id: UUID
    allowed_tools: ToolNames | None = None
    # the server's tools whose calls wait for a person's approval (docs/tools.md)
    require_approval: ToolNames | None = None


class DetachBody(msgspec.Struct, rename="camel"):
    mcp_server_id: UUID


class AttachmentOut(msgspec.Struct, rename="camel"):
    mcp_server_id: UUID
    allowed_tools: list[str] | None
    effective_tools: list[str]
    created_at: datetime
    server: McpOut
    require_approval: list[str]
