"""An agent's channels as its owner manages them: ``/api/agents/{id}/channels``
(GET, POST), ``.../channels/{channelId}`` (PATCH, DELETE), their contacts and the
QR pairing of ``whatsapp_web`` (docs/channels.md).

Credentials are one JSON object of strings, sealed at once and never answered
(``has_credentials`` only); the generic ``webhook`` channel's own signing secret
is made here and answered once, by the POST that made it. Creating a channel (or
changing its credentials or ``config``) connects it through its platform, which
says its status; deleting it disconnects it, best effort."""

from __future__ import annotations

import base64
import contextlib
import re
import secrets
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, TypeVar
from uuid import UUID

import msgspec
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities import Principal
from agentsvc_core.entities.channel import (
    Channel,
    ChannelEvent,
    ChannelStatus,
    ChannelType,
    Contact,
    ContactStatus,
    DmPolicy,
    EventState,
    GroupPolicy,
)
from agentsvc_core.errors import Conflict, DomainError, InvalidInput, NotFound
from agentsvc_core.ports import AgentRepository, Clock, SecretBox
from agentsvc_core.ports.channel_platforms import (
    ChannelPlatform,
    ChannelPlatforms,
    PlatformNotConfigured,
)
from agentsvc_core.ports.channels import ChannelStore
from agentsvc_core.ports.event_webhooks import EventPublisher, NoEvents
from agentsvc_core.rules import check_text
from agentsvc_core.use_cases.event_webhooks.payloads import status_changed

__all__ = [
    "GENERATED_SECRET",
    "ChannelChanges",
    "ChannelDraft",
    "ChannelView",
    "Channels",
    "PairingView",
    "credentials_context",
    "inbound_url",
    "open_credentials",
]

MAX_NAME = 120
MAX_ALLOW = 500
MAX_FIELD = 4096
# the channel types whose credentials include a secret the service makes (shown once)
GENERATED_SECRET: Mapping[ChannelType, str] = {"webhook": "signing_secret"}


V = TypeVar("V")


def snake_keys(fields: Mapping[str, V]) -> dict[str, V]:
    """``fields`` with camelCase keys in snake_case, as request bodies are camelCase
    and the platforms' fields are named in snake_case (``botToken`` is ``bot_token``;
    ``bot_token`` stays as it is)."""
    return {re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", k).lower(): v for k, v in fields.items()}


Name = Annotated[str, Meta(max_length=MAX_NAME)]
AllowFrom = Annotated[
    list[Annotated[str, Meta(min_length=1, max_length=256)]], Meta(max_length=MAX_ALLOW)
]
Fields = Annotated[dict[str, str], Meta(max_length=32)]
Config = Annotated[dict[str, str | int | bool], Meta(max_length=32)]


class ChannelDraft(msgspec.Struct, frozen=True, kw_only=True):
    """A channel as POST creates it (the body, in camelCase)."""

    type: ChannelType
    name: Name = ""
    credentials: Fields = {}
    config: Config = {}
    dm_policy: DmPolicy = "open"
    allow_from: AllowFrom = []
    group_policy: GroupPolicy = "mention"


class ChannelChanges(msgspec.Struct, frozen=True, kw_only=True):
    """What PATCH changes; ``credentials`` and ``config`` are merged over the stored
    ones (a key given replaces that key)."""

    name: Name | UnsetType = UNSET
    credentials: Fields | UnsetType = UNSET
    config: Config | UnsetType = UNSET
    dm_policy: DmPolicy | UnsetType = UNSET
    allow_from: AllowFrom | UnsetType = UNSET
    group_policy: GroupPolicy | UnsetType = UNSET


class ChannelView(msgspec.Struct, frozen=True, kw_only=True):
    channel: Channel
    inbound_url: str
    signing_secret: str | None = None  # the generic channel's, in its create answer only


class PairingView(msgspec.Struct, frozen=True, kw_only=True):
    status: ChannelStatus
    qr_data_url: str | None
    qr_expires_at: datetime | None
    pairing_code: str | None


def credentials_context(channel: Channel) -> str:
    return f"channel:{channel.org_id}:{channel.id}"


def open_credentials(box: SecretBox, channel: Channel) -> dict[str, str]:
    if channel.credentials_sealed is None:
        return {}
    raw = box.open(channel.credentials_sealed, credentials_context(channel))
    return msgspec.json.decode(raw, type=dict[str, str])


def inbound_url(base_url: str, channel_id: UUID) -> str:
    return f"{base_url.rstrip('/')}/api/channels/{channel_id}/webhook"


def _check_fields(kind: str, given: Mapping[str, object], known: tuple[str, ...]) -> None:
    for key, value in given.items():
        if key not in known:
            allowed = ", ".join(known) or "none"
            raise InvalidInput(f"{kind}.{key}", f"not a field of this channel type ({allowed})")
        if isinstance(value, str):
            check_text(f"{kind}.{key}", value, max_len=MAX_FIELD, required=True)


def _check_complete(kind: str, given: Mapping[str, object], needed: tuple[str, ...]) -> None:
    for key in needed:
        if key not in given:
            raise InvalidInput(f"{kind}.{key}", "required for this channel type")


class Channels:
    def __init__(
        self,
        store: ChannelStore,
        agents: AgentRepository,
        platforms: ChannelPlatforms,
        box: SecretBox,
        clock: Clock,
        base_url: str,
        events: EventPublisher | None = None,
    ) -> None:
        """``events``: told when a channel's status changes (event webhooks)."""
        self._events = events or NoEvents()
        self._store = store
        self._agents = agents
        self._platforms = platforms
        self._box = box
        self._clock = clock
        self._base_url = base_url

    def view(self, channel: Channel, signing_secret: str | None = None) -> ChannelView:
        return ChannelView(
            channel=channel,
            inbound_url=inbound_url(self._base_url, channel.id),
            signing_secret=signing_secret,
        )

    def _platform(self, kind: ChannelType) -> ChannelPlatform:
        found = self._platforms.get(kind)
        if found is None:
            raise InvalidInput("type", f"this deployment has no {kind} channels")
        return found

    async def of_agent(self, who: Principal, agent_id: UUID) -> list[ChannelView]:
        await self._agents.get(who.org_id, agent_id)
        return [self.view(c) for c in await self._store.of_agent(who.org_id, agent_id)]

    async def _own(self, who: Principal, agent_id: UUID, channel_id: UUID) -> Channel:
        channel = await self._store.get(who.org_id, channel_id)
        if channel.agent_id != agent_id:
            raise NotFound("channel not found")
        return channel

    async def create(self, who: Principal, agent_id: UUID, draft: ChannelDraft) -> ChannelView:
        await self._agents.get(who.org_id, agent_id)
        platform = self._platform(draft.type)
        name = check_text("name", draft.name, max_len=MAX_NAME) or draft.type
        given, settings = snake_keys(draft.credentials), snake_keys(draft.config)
        _check_fields("credentials", given, platform.credential_fields)
        _check_complete("credentials", given, platform.credential_fields)
        _check_fields("config", settings, platform.config_fields)
        _check_complete("config", settings, platform.config_fields)
        if draft.type == "whatsapp_web" and any(
            c.type == "whatsapp_web" for c in await self._store.of_agent(who.org_id, agent_id)
        ):
            raise Conflict("the agent has a whatsapp_web channel", code="CHANNEL_TYPE_TAKEN")
        credentials = dict(given)
        made = GENERATED_SECRET.get(draft.type)
        secret = None
        if made is not None:
            secret = credentials[made] = "chs_" + secrets.token_urlsafe(32)
        now = self._clock.now()
        channel = Channel(
            id=uuid.uuid4(),
            org_id=who.org_id,
            agent_id=agent_id,
            type=draft.type,
            name=name,
            status="pending",
            status_reason=None,
            config=dict(settings),
            credentials_sealed=None,
            dm_policy=draft.dm_policy,
            allow_from=tuple(draft.allow_from),
            group_policy=draft.group_policy,
            created_at=now,
            updated_at=now,
        )
        channel = await self._connect(platform, self._sealed(channel, credentials), credentials)
        return self.view(await self._store.add(channel), secret)

    def _sealed(self, channel: Channel, credentials: Mapping[str, str]) -> Channel:
        sealed = (
            self._box.seal(msgspec.json.encode(dict(credentials)), credentials_context(channel))
            if credentials
            else None
        )
        return msgspec.structs.replace(channel, credentials_sealed=sealed)

    async def _connect(
        self, platform: ChannelPlatform, channel: Channel, credentials: Mapping[str, str]
    ) -> Channel:
        """The channel as its platform's ``connect`` left it (status, what it told us,
        and the credentials it made with the platform, such as the WhatsApp Web
        sidecar's webhook secret, sealed with the others)."""
        try:
            done = await platform.connect(
                credentials, channel.config, inbound_url(self._base_url, channel.id)
            )
        except PlatformNotConfigured as exc:  # the deployment lacks a setting: 422
            raise InvalidInput("type", exc.detail) from None
        if done.credentials:
            channel = self._sealed(channel, {**credentials, **done.credentials})
        return msgspec.structs.replace(
            channel,
            status=done.status,
            status_reason=done.reason,
            config={**channel.config, **done.config},
        )

    async def update(
        self, who: Principal, agent_id: UUID, channel_id: UUID, changes: ChannelChanges
    ) -> ChannelView:
        channel = await self._own(who, agent_id, channel_id)
        platform = self._platform(channel.type)
        fields: dict[str, object] = {}
        if not isinstance(changes.name, UnsetType):
            fields["name"] = check_text("name", changes.name, max_len=MAX_NAME) or channel.type
        for key in ("dm_policy", "group_policy"):
            value = getattr(changes, key)
            if not isinstance(value, UnsetType):
                fields[key] = value
        if not isinstance(changes.allow_from, UnsetType):
            fields["allow_from"] = tuple(changes.allow_from)
        reconnect = None
        if not isinstance(changes.credentials, UnsetType) or not isinstance(
            changes.config, UnsetType
        ):
            reconnect = await self._reconnected(platform, channel, changes)
        now = self._clock.now()

        def change(stored: Channel) -> Channel:
            base = stored if reconnect is None else reconnect
            return msgspec.structs.replace(base, **fields, updated_at=now)

        return self.view(await self._store.modify(who.org_id, channel_id, change))

    async def _reconnected(
        self, platform: ChannelPlatform, channel: Channel, changes: ChannelChanges
    ) -> Channel:
        credentials = open_credentials(self._box, channel)
        if not isinstance(changes.credentials, UnsetType):
            given = snake_keys(changes.credentials)
            _check_fields("credentials", given, platform.credential_fields)
            credentials.update(given)
        config = dict(channel.config)
        if not isinstance(changes.config, UnsetType):
            settings = snake_keys(changes.config)
            _check_fields("config", settings, platform.config_fields)
            config.update(settings)
        changed = msgspec.structs.replace(channel, config=config)
        return await self._connect(platform, self._sealed(changed, credentials), credentials)

    async def delete(self, who: Principal, agent_id: UUID, channel_id: UUID) -> None:
        channel = await self._own(who, agent_id, channel_id)
        platform = self._platforms.get(channel.type)
        if platform is not None:
            # best effort: the channel goes whatever the platform says
            with contextlib.suppress(DomainError):
                await platform.disconnect(open_credentials(self._box, channel), channel.config)
        await self._store.delete(who.org_id, channel_id)

    # --- contacts ---------------------------------------------------------------

    async def contacts(
        self,
        who: Principal,
        agent_id: UUID,
        channel_id: UUID,
        *,
        before: tuple[datetime, UUID] | None,
        limit: int,
    ) -> tuple[list[Contact], bool]:
        """A page of the channel's contacts, newest first, and whether more follow."""
        await self._own(who, agent_id, channel_id)
        rows = await self._store.contacts(who.org_id, channel_id, before=before, limit=limit + 1)
        return rows[:limit], len(rows) > limit

    # --- inbound messages and what came of them ---------------------------------

    async def messages(
        self,
        who: Principal,
        agent_id: UUID,
        channel_id: UUID,
        *,
        before: tuple[datetime, str] | None,
        limit: int,
        state: EventState | None = None,
    ) -> tuple[list[ChannelEvent], bool]:
        """A page of the messages that reached the channel, newest first, each with
        what came of it (answered, skipped by a policy, or a delivery that failed
        for good and why), and whether more follow."""
        await self._own(who, agent_id, channel_id)
        rows = await self._store.events(
            who.org_id, channel_id, before=before, limit=limit + 1, state=state
        )
        return rows[:limit], len(rows) > limit

    async def set_contact(
        self,
        who: Principal,
        agent_id: UUID,
        channel_id: UUID,
        contact_id: UUID,
        status: ContactStatus,
    ) -> Contact:
        """Approve a pairing, block a contact, or make it wait again. An approved
        contact's one-time code is spent."""
        await self._own(who, agent_id, channel_id)

        def change(c: Contact) -> Contact:
            code = None if status == "approved" else c.pairing_code
            return msgspec.structs.replace(c, status=status, pairing_code=code)

        return await self._store.modify_contact(who.org_id, channel_id, contact_id, change)

    # --- QR pairing -------------------------------------------------------------

    async def pairing(self, who: Principal, agent_id: UUID, kind: ChannelType) -> PairingView:
        """The QR code (and code) that pairs the agent's channel of ``kind``: only a
        platform paired by QR (``whatsapp_web``) has one (422 for another type, 404
        when the agent has no such channel, 409 ``ALREADY_CONNECTED``). An expired
        QR is answered as none, not as a failure: ask again for a fresh one."""
        await self._agents.get(who.org_id, agent_id)
        platform = self._platforms.get(kind)
        pair = getattr(platform, "pairing", None)
        if platform is None or pair is None:
            raise InvalidInput("type", f"{kind} channels are not paired by QR code")
        channel = next(
            (c for c in await self._store.of_agent(who.org_id, agent_id) if c.type == kind), None
        )
        if channel is None:
            raise NotFound(f"the agent has no {kind} channel")
        if channel.status == "connected":
            raise Conflict("the channel is connected already", code="ALREADY_CONNECTED")
        state = await pair(open_credentials(self._box, channel), channel.config)
        now = self._clock.now()
        if state.status != channel.status or state.reason != channel.status_reason:
            changed = await self._store.modify(
                who.org_id,
                channel.id,
                lambda c: msgspec.structs.replace(
                    c, status=state.status, status_reason=state.reason, updated_at=now
                ),
            )
            await status_changed(self._events, channel, changed)
        if state.status == "connected":
            raise Conflict("the channel is connected already", code="ALREADY_CONNECTED")
        fresh = state.qr_png is not None and (
            state.qr_expires_at is None or state.qr_expires_at > now
        )
        return PairingView(
            status=state.status,
            qr_data_url=(
                "data:image/png;base64," + base64.b64encode(state.qr_png).decode()
                if fresh and state.qr_png is not None
                else None
            ),
            qr_expires_at=state.qr_expires_at if fresh else None,
            pairing_code=state.pairing_code,
        )
