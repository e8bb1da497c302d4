"""Channels (docs/channels.md): the owner's routes under ``/api/agents/{id}/channels``
and the public inbound endpoint ``/api/channels/{channelId}/webhook``.

The owner's routes follow the house's roles: reads are the members', changes an
admin's. The inbound endpoint has no API key: the channel's platform proves
itself (a signature, a secret token), the channel's type reads the request, and
the answer goes at once, before any model is called. It is rate-limited per
channel and per client address (``ChannelLimits``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, Response, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody, QueryParameter

from agentsvc_core.entities.channel import (
    Channel,
    ChannelEvent,
    ChannelType,
    Contact,
    ContactStatus,
    EventState,
)
from agentsvc_core.errors import InvalidInput
from agentsvc_core.ports.channel_platforms import Inbound, InboundRefused, InboundRequest
from agentsvc_core.use_cases.channels import (
    ChannelChanges,
    ChannelDraft,
    ChannelInbound,
    Channels,
    ChannelView,
)
from agentsvc_web.auth import principal_of
from agentsvc_web.drafts import camel_body, draft_of
from agentsvc_web.errors import error_response
from agentsvc_web.limits import TokenBuckets, client_address
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, cursor_text, read_cursor

__all__ = [
    "AgentChannelsController",
    "ChannelLimits",
    "ChannelWebhookController",
]

Req = Request[Any, Any, Any]
Cursor = Annotated[str | None, QueryParameter(name="cursor", max_length=100)]
Limit = Annotated[int, QueryParameter(name="limit", ge=1, le=100)]
# a message's cursor holds the platform's event id (at most 256 characters)
EventCursor = Annotated[str | None, QueryParameter(name="cursor", max_length=300)]

if TYPE_CHECKING:  # the drafts' own shape, in camelCase on the wire
    ChannelBody = ChannelDraft
    ChannelPatchBody = ChannelChanges
else:
    ChannelBody = camel_body(ChannelDraft, "ChannelBody", __name__)
    ChannelPatchBody = camel_body(ChannelChanges, "ChannelPatchBody", __name__)


class ChannelOut(msgspec.Struct, omit_defaults=True):
    """A channel as its owner sees it: never a credential (``has_credentials``
    only); ``signing_secret`` is in the answer that made a generic channel only."""

    id: UUID
    agent_id: UUID
    type: str
    name: str
    status: str
    status_reason: str | None
    has_credentials: bool
    config: dict[str, str | int | bool]
    dm_policy: str
    allow_from: list[str]
    group_policy: str
    inbound_url: str
    created_at: datetime
    updated_at: datetime
    signing_secret: str | None = None

    @classmethod
    def of(cls, view: ChannelView) -> ChannelOut:
        c: Channel = view.channel
        return cls(
            id=c.id,
            agent_id=c.agent_id,
            type=c.type,
            name=c.name,
            status=c.status,
            status_reason=c.status_reason,
            has_credentials=c.credentials_sealed is not None,
            config=dict(c.config),
            dm_policy=c.dm_policy,
            allow_from=list(c.allow_from),
            group_policy=c.group_policy,
            inbound_url=view.inbound_url,
            created_at=c.created_at,
            updated_at=c.updated_at,
            signing_secret=view.signing_secret,
        )


class ContactOut(msgspec.Struct):
    """A contact; ``pairing_code`` is the one-time code a ``pending`` contact was
    sent, for the owner to match with the one the contact shows them before
    approving (null once approved)."""

    id: UUID
    channel_id: UUID
    external_id: str
    display_name: str | None
    username: str | None
    thread_id: UUID | None
    status: str
    pairing_code: str | None
    first_seen_at: datetime
    last_message_at: datetime | None

    @classmethod
    def of(cls, c: Contact) -> ContactOut:
        return cls(**{f: getattr(c, f) for f in cls.__struct_fields__})


class ContactListOut(msgspec.Struct, rename="camel"):
    contacts: list[ContactOut]
    next_cursor: str | None


class ChannelMessageOut(msgspec.Struct):
    """A message that reached the channel and what came of it: ``state`` is
    ``done`` (answered and delivered), ``skipped`` (stored, not answered: a policy,
    a blocked or waiting contact), ``failed`` (``error`` says why: the turn gave no
    reply, or the platform refused the reply for good or after every retry), or a
    step on the way (``received``, ``admitted``, ``answering``, ``replied``)."""

    event_id: str
    chat_id: str
    sender_id: str
    sender_name: str | None
    contact_id: UUID | None
    thread_id: UUID | None
    text: str
    state: str
    reply_message_id: UUID | None
    parts_sent: int
    attempts: int
    error: str | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, e: ChannelEvent) -> ChannelMessageOut:
        return cls(**{f: getattr(e, f) for f in cls.__struct_fields__})


class ChannelMessageListOut(msgspec.Struct, rename="camel"):
    messages: list[ChannelMessageOut]
    next_cursor: str | None


def _event_cursor(e: ChannelEvent) -> str:
    """``<created_at>~<event_id>`` (an ISO time holds no ``~``)."""
    return f"{e.created_at.astimezone(UTC).isoformat().replace('+00:00', 'Z')}~{e.event_id}"


def _read_event_cursor(raw: str | None) -> tuple[datetime, str] | None:
    if raw is None:
        return None
    at, sep, event_id = raw.partition("~")
    try:
        if not sep or not event_id:
            raise ValueError(raw)
        value = msgspec.convert(at, datetime)
    except (msgspec.ValidationError, ValueError):
        raise InvalidInput("cursor", "must be a nextCursor of this list") from None
    return (value if value.tzinfo else value.replace(tzinfo=UTC), event_id)


class ContactPatchBody(msgspec.Struct, frozen=True):
    status: ContactStatus


class QrOut(msgspec.Struct):
    data_url: str  # data:image/png;base64,...
    expires_at: datetime | None


class PairingOut(msgspec.Struct, omit_defaults=True):
    status: str
    qr: QrOut | None
    pairing_code: str | None = None


class AgentChannelsController(Controller):
    path = "/api/agents/{agent_id:uuid}/channels"
    tags = ["channels"]

    @get(
        "/",
        operation_id="listAgentChannels",
        responses=errors(404),
        summary="The agent's channels, oldest first",
    )
    async def list_channels(
        self, request: Req, channels: NamedDependency[Channels], agent_id: FromPath[UUID]
    ) -> list[ChannelOut]:
        return [ChannelOut.of(v) for v in await channels.of_agent(principal_of(request), agent_id)]

    @post(
        "/",
        operation_id="createAgentChannel",
        status_code=201,
        responses=errors(400, 404, 409, 413, 415, 422, 502),
        summary="Connect the agent to a messaging platform (409 CHANNEL_TYPE_TAKEN for a"
        " second whatsapp_web); a generic channel's signing secret is in this answer only",
    )
    async def create(
        self,
        request: Req,
        channels: NamedDependency[Channels],
        agent_id: FromPath[UUID],
        data: JSONBody[ChannelBody],
    ) -> ChannelOut:
        draft = draft_of(data, ChannelDraft)
        return ChannelOut.of(await channels.create(principal_of(request), agent_id, draft))

    @patch(
        "/{channel_id:uuid}",
        operation_id="updateAgentChannel",
        responses=errors(400, 404, 413, 415, 422, 502),
        summary="Change the supplied fields; new credentials or config connect it again",
    )
    async def update(
        self,
        request: Req,
        channels: NamedDependency[Channels],
        agent_id: FromPath[UUID],
        channel_id: FromPath[UUID],
        data: JSONBody[ChannelPatchBody],
    ) -> ChannelOut:
        changes = draft_of(data, ChannelChanges)
        view = await channels.update(principal_of(request), agent_id, channel_id, changes)
        return ChannelOut.of(view)

    @delete(
        "/{channel_id:uuid}",
        operation_id="deleteAgentChannel",
        status_code=200,
        responses=errors(404),
        summary="Disconnect and delete the channel (its threads stay)",
    )
    async def remove(
        self,
        request: Req,
        channels: NamedDependency[Channels],
        agent_id: FromPath[UUID],
        channel_id: FromPath[UUID],
    ) -> OkBody:
        await channels.delete(principal_of(request), agent_id, channel_id)
        return OkBody(ok=True)

    @get(
        "/{channel_id:uuid}/contacts",
        operation_id="listChannelContacts",
        responses=errors(404, 422),
        summary="The people who wrote to the channel, newest first, by pages",
    )
    async def contacts(
        self,
        request: Req,
        channels: NamedDependency[Channels],
        agent_id: FromPath[UUID],
        channel_id: FromPath[UUID],
        cursor: Cursor = None,
        limit: Limit = 50,
    ) -> ContactListOut:
        rows, more = await channels.contacts(
            principal_of(request), agent_id, channel_id, before=read_cursor(cursor), limit=limit
        )
        return ContactListOut(
            contacts=[ContactOut.of(c) for c in rows],
            next_cursor=cursor_text(rows[-1].first_seen_at, rows[-1].id) if more else None,
        )

    @get(
        "/{channel_id:uuid}/messages",
        operation_id="listChannelMessages",
        responses=errors(404, 422),
        summary="The messages that reached the channel, newest first, by pages, each"
        " with what came of it (delivered, skipped by a policy, or failed and why)",
    )
    async def messages(
        self,
        request: Req,
        channels: NamedDependency[Channels],
        agent_id: FromPath[UUID],
        channel_id: FromPath[UUID],
        # ``state`` is Litestar's own keyword: the query's name, not the parameter's
        only: Annotated[EventState | None, QueryParameter(name="state")] = None,
        cursor: EventCursor = None,
        limit: Limit = 50,
    ) -> ChannelMessageListOut:
        rows, more = await channels.messages(
            principal_of(request),
            agent_id,
            channel_id,
            before=_read_event_cursor(cursor),
            limit=limit,
            state=only,
        )
        return ChannelMessageListOut(
            messages=[ChannelMessageOut.of(e) for e in rows],
            next_cursor=_event_cursor(rows[-1]) if more else None,
        )

    @patch(
        "/{channel_id:uuid}/contacts/{contact_id:uuid}",
        operation_id="updateChannelContact",
        responses=errors(400, 404, 413, 415, 422),
        summary="Approve a contact's pairing, block a contact, or make it wait again",
    )
    async def set_contact(
        self,
        request: Req,
        channels: NamedDependency[Channels],
        agent_id: FromPath[UUID],
        channel_id: FromPath[UUID],
        contact_id: FromPath[UUID],
        data: JSONBody[ContactPatchBody],
    ) -> ContactOut:
        contact = await channels.set_contact(
            principal_of(request), agent_id, channel_id, contact_id, data.status
        )
        return ContactOut.of(contact)

    @get(
        "/{channel_type:str}/qr",
        operation_id="getChannelQr",
        responses=errors(404, 409, 422, 502),
        summary="The QR code that pairs the agent's whatsapp_web channel (409"
        " ALREADY_CONNECTED; qr is null once expired: ask again)",
    )
    async def qr(
        self,
        request: Req,
        channels: NamedDependency[Channels],
        agent_id: FromPath[UUID],
        channel_type: FromPath[ChannelType],
    ) -> PairingOut:
        state = await channels.pairing(principal_of(request), agent_id, channel_type)
        qr = (
            QrOut(data_url=state.qr_data_url, expires_at=state.qr_expires_at)
            if state.qr_data_url is not None
            else None
        )
        return PairingOut(status=state.status, qr=qr, pairing_code=state.pairing_code)


# --- the public inbound endpoint -----------------------------------------------------

PER_ADDRESS_PER_MIN = 300  # one client address, to one channel
PER_CHANNEL_PER_MIN = 1200  # one channel, from every address


class ChannelLimits:
    """Request budgets of the inbound endpoints (token buckets in this process): per
    (channel, client address) and per channel. A refusal is 429 ``RATE_LIMITED``
    with ``Retry-After``."""

    def __init__(self, max_keys: int = 50_000) -> None:
        self._address = TokenBuckets(PER_ADDRESS_PER_MIN, max_keys=max_keys)
        self._channel = TokenBuckets(PER_CHANNEL_PER_MIN, max_keys=max_keys)

    def check(self, request: Req, channel_id: UUID) -> None:
        self._address.spend((channel_id, client_address(request.scope)), "from this address")
        self._channel.spend(channel_id, "to this channel")


async def _inbound(request: Req, inbound: ChannelInbound, channel_id: UUID) -> Response[Any]:
    limits = request.app.state.channel_limits
    assert isinstance(limits, ChannelLimits)
    channel = await inbound.channel(channel_id)
    limits.check(request, channel.id)
    method: Literal["GET", "POST"] = "POST" if request.method == "POST" else "GET"
    read = await inbound.receive(
        channel,
        InboundRequest(
            method=method,
            headers={k.lower(): v for k, v in request.headers.items()},
            query=dict(request.query_params),
            body=await request.body() if method == "POST" else b"",
        ),
    )
    if isinstance(read, InboundRefused):
        return error_response(read.status, read.detail)
    if isinstance(read, Inbound):
        return Response(read.ack, status_code=200, media_type=read.ack_content_type)
    return Response(read.body, status_code=read.status, media_type=read.content_type)


class ChannelWebhookController(Controller):
    """``/api/channels/{channelId}/webhook``: public; the platform's proof
    authenticates it, the channel's type reads it."""

    path = "/api/channels/{channel_id:uuid}/webhook"
    tags = ["channels"]

    @post(
        "/",
        operation_id="channelWebhook",
        security=[],
        status_code=200,
        responses=errors(400, 401, 403, 404, 405, 413, 429),
        summary="A platform's delivery to the channel (acknowledged at once; the"
        " answer goes back through the platform)",
    )
    async def inbound_post(
        self,
        request: Req,
        channel_inbound: NamedDependency[ChannelInbound],
        channel_id: FromPath[UUID],
    ) -> Response[Any]:
        return await _inbound(request, channel_inbound, channel_id)

    @get(
        "/",
        operation_id="channelWebhookCheck",
        security=[],
        responses=errors(400, 401, 403, 404, 405, 429),
        summary="A platform's verification of the channel's URL (WhatsApp's hub.challenge)",
    )
    async def inbound_get(
        self,
        request: Req,
        channel_inbound: NamedDependency[ChannelInbound],
        channel_id: FromPath[UUID],
    ) -> Response[Any]:
        return await _inbound(request, channel_inbound, channel_id)
