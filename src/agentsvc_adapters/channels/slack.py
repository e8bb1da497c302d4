"""Slack (channel type ``slack``): an app's bot user, by its bot token and the app's
signing secret.

Wire format: the Events API posts JSON to the channel's inbound URL (pasted by
the user as the app's Request URL); the Web API is
``POST {AGENTSVC_SLACK_API_URL}/<method>`` with ``Authorization: Bearer <token>``,
answering HTTP 200 with ``{"ok": false, "error": "<code>"}`` for a refusal and
HTTP 429 with ``Retry-After`` when rate limited.

- ``read_inbound``: the ``X-Slack-Signature`` (``v0=`` HMAC-SHA256 of
  ``v0:{X-Slack-Request-Timestamp}:{body}`` with the signing secret) is checked by
  Slack's own ``slack_sdk.signature.SignatureVerifier`` against the given ``now``,
  a timestamp more than 5 minutes away refused (401). ``url_verification`` is
  answered with its ``challenge``. An ``event_callback`` carrying a ``message``
  (no subtype but ``file_share`` or ``thread_broadcast``, no ``bot_id``, not the
  bot's own) or an ``app_mention`` is a message; the rest is acknowledged and
  dropped. The event id (the de-duplication key) is ``{channel}:{ts}``, the
  message's own identity, rather than the envelope's ``event_id``: Slack's
  retries (``X-Slack-Retry-Num``) keep both, but a mention in a channel comes as
  two events with two ``event_id`` s (``message`` and ``app_mention``) when the app
  subscribes to both, and must be answered once. ``channel_type`` ``im`` is a
  direct chat, anything else (``channel``, ``group``, ``mpim``, or an
  ``app_mention``, which has none) a group; the bot is mentioned by an
  ``app_mention`` or ``<@bot_user_id>`` in the text. A reply goes in the message's
  thread (``thread_ts``, or the message's ``ts`` in a group so it starts one); in
  a direct chat a top-level message is answered in the chat itself.
- ``connect``: ``auth.test`` checks the token and gives ``team``, ``team_id``,
  ``bot_user_id`` (and ``bot_id``), kept in ``config``. Slack has no call to
  register the Request URL: the user pastes the channel's ``inbound_url``;
  ``disconnect`` has nothing to undo.
- ``render``: Markdown to mrkdwn (``*bold*``, ``_italic_``, ``~strike~``,
  `` `code` ``, fenced blocks, ``<url|text>``, ``>`` quotes, ``& < >`` escaped) in
  parts of at most 4000 characters, Slack's recommended length (it truncates
  past 40,000).
- ``send``: ``chat.postMessage`` as JSON (``channel``, ``text``, ``thread_ts``).
  429 is ``PlatformBusy`` after ``Retry-After`` seconds (``ok: false`` with
  ``ratelimited`` too); the error codes of a call that cannot succeed later
  (``invalid_auth``, ``channel_not_found``, ``not_in_channel``, ...) are
  permanent, Slack's own troubles (``internal_error``, 5xx) and the network not.
"""

from __future__ import annotations

import html
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec
from slack_sdk.signature import Clock, SignatureVerifier

from agentsvc_adapters.channels.markdown import Dialect, Mark, pack, parse
from agentsvc_adapters.outbound import OutboundGuard, failure
from agentsvc_core.entities.channel import ChannelType
from agentsvc_core.ports.channel_platforms import (
    ChannelPlatform,
    Connected,
    DeliveryFailed,
    Inbound,
    InboundAnswer,
    InboundMessage,
    InboundRefused,
    InboundRequest,
    Outgoing,
    PlatformBusy,
    Sent,
)

__all__ = ["SLACK_API_URL", "SlackPlatform", "slack_mrkdwn"]

log = logging.getLogger("agentsvc.channels")
SLACK_API_URL = "https://slack.com/api"
LIMIT = 4000
_TIMEOUT_S = 15.0
_KEPT_SUBTYPES = frozenset({None, "file_share", "thread_broadcast"})
# ok:false codes a later try may get past; every other code is permanent
_TRANSIENT = frozenset(
    {"internal_error", "fatal_error", "service_unavailable", "request_timeout", "team_added_to_org"}
)

_OPEN = {"b": "*", "i": "_", "s": "~", "code": "`", "q": "> ", "pre": "```\n"}
_CLOSE = {"b": "*", "i": "_", "s": "~", "code": "`", "q": "", "pre": "\n```", "a": ">"}
_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _url(url: str) -> str:
    """A URL as it can stand in ``<url|text>``: ``& < >`` escaped, ``|`` encoded."""
    return "".join(_ESCAPES.get(c, c) for c in url).replace("|", "%7C")


def _open(mark: Mark) -> str:
    kind, arg = mark
    if kind == "a":
        return f"<{_url(arg)}|"
    return _OPEN[kind]


def _close(mark: Mark) -> str:
    return _CLOSE[mark[0]]


def _escape(char: str, marks: tuple[Mark, ...]) -> str:
    if char == "\n" and ("q", "") in marks:
        return "\n> "
    return _ESCAPES.get(char, char)


def slack_mrkdwn(limit: int = LIMIT) -> Dialect:
    return Dialect(limit=limit, open=_open, close=_close, escape=_escape)


_MRKDWN = slack_mrkdwn()


class _FixedClock(Clock):
    def __init__(self, now: datetime) -> None:
        self._now = now.timestamp()

    def now(self) -> float:
        return self._now


def _verified(request: InboundRequest, secret: str | None, now: datetime) -> bool:
    if secret is None or not secret.strip():
        return False
    verifier = SignatureVerifier(secret, clock=_FixedClock(now))
    try:
        return verifier.is_valid(
            body=request.body,
            timestamp=request.headers.get("x-slack-request-timestamp"),
            signature=request.headers.get("x-slack-signature"),
        )
    except ValueError:  # a timestamp that is not a number
        return False


def _time(ts: object) -> datetime | None:
    try:
        return datetime.fromtimestamp(float(str(ts)), UTC)
    except (ValueError, OverflowError, OSError):
        return None


def _message(
    event: Mapping[str, Any], config: Mapping[str, str | int | bool]
) -> InboundMessage | None:
    kind = event.get("type")
    bot_user = config.get("bot_user_id")
    user, channel, ts = event.get("user"), event.get("channel"), event.get("ts")
    text = event.get("text")
    if kind not in ("message", "app_mention") or event.get("bot_id"):
        return None
    if event.get("subtype") not in _KEPT_SUBTYPES:
        return None
    if not (isinstance(user, str) and isinstance(channel, str) and isinstance(ts, str)):
        return None
    if not isinstance(text, str) or not text.strip() or user == bot_user:
        return None
    direct = event.get("channel_type") == "im" and kind == "message"
    thread = event.get("thread_ts")
    profile = event.get("user_profile") or {}
    return InboundMessage(
        event_id=f"{channel}:{ts}",
        chat_id=channel,
        sender_id=user,
        sender_name=profile.get("real_name") or profile.get("display_name") or None,
        sender_username=profile.get("name") or None,
        text=html.unescape(text),
        is_group=not direct,
        mentioned=not direct
        and (kind == "app_mention" or (bot_user is not None and f"<@{bot_user}>" in text)),
        reply_to=thread if isinstance(thread, str) else (None if direct else ts),
        sent_at=_time(ts),
    )


class _Answer(msgspec.Struct):
    ok: bool = False
    error: str = ""
    ts: str | None = None
    team: str | None = None
    team_id: str | None = None
    user_id: str | None = None
    bot_id: str | None = None


_answer = msgspec.json.Decoder(_Answer)


class SlackPlatform(ChannelPlatform):
    type: ChannelType = "slack"
    credential_fields = ("bot_token", "signing_secret")
    config_fields = ()

    def __init__(self, guard: OutboundGuard, api_url: str = SLACK_API_URL) -> None:
        self._base = api_url.rstrip("/")
        self._http = guard.http_client(timeout=_TIMEOUT_S)

    async def aclose(self) -> None:
        await self._http.aclose()

    def read_inbound(
        self,
        request: InboundRequest,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        now: datetime,
    ) -> Inbound | InboundAnswer | InboundRefused:
        if not _verified(request, credentials.get("signing_secret"), now):
            return InboundRefused(status=401, detail="wrong, missing or stale Slack signature")
        try:
            payload = msgspec.json.decode(request.body)
        except msgspec.DecodeError:
            return InboundRefused(status=400, detail="the body is not JSON")
        if not isinstance(payload, dict):
            return InboundRefused(status=400, detail="not a Slack event")
        if payload.get("type") == "url_verification":
            challenge = payload.get("challenge")
            if not isinstance(challenge, str):
                return InboundRefused(status=400, detail="url_verification without a challenge")
            body = msgspec.json.encode({"challenge": challenge})
            return InboundAnswer(status=200, body=body, content_type="application/json")
        event = payload.get("event")
        if payload.get("type") != "event_callback" or not isinstance(event, dict):
            return Inbound()
        found = _message(event, config)
        return Inbound(messages=(found,) if found else ())

    async def _call(self, token: str, method: str, **body: Any) -> _Answer:
        """One Web API call. Raises ``PlatformBusy`` on 429 and ``DeliveryFailed`` when
        Slack could not be reached or answered something else than its JSON."""
        url = f"{self._base}/{method}"
        headers = {"Authorization": f"Bearer {token}"}
        try:
            resp = await self._http.post(url, json=body, headers=headers)
        except httpx.HTTPError as exc:
            raise DeliveryFailed(failure(exc, url), permanent=False) from None
        if resp.status_code == 429:
            raise PlatformBusy("Slack answered 429", retry_after_s=_retry_after(resp))
        try:
            answer = _answer.decode(resp.content)
        except msgspec.DecodeError:
            answer = None
        if resp.status_code != 200 or answer is None:
            why = f"Slack answered {resp.status_code}"
            raise DeliveryFailed(why, permanent=400 <= resp.status_code < 500) from None
        if not answer.ok and answer.error == "ratelimited":
            raise PlatformBusy("Slack answered ratelimited", retry_after_s=_retry_after(resp))
        return answer

    async def connect(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        inbound_url: str,
    ) -> Connected:
        token = credentials.get("bot_token")
        if not token:
            return Connected(status="error", reason="the bot token is missing")
        if not (credentials.get("signing_secret") or "").strip():
            return Connected(status="error", reason="the signing secret is missing")
        try:
            me = await self._call(token, "auth.test")
        except (DeliveryFailed, PlatformBusy) as exc:
            return Connected(status="error", reason=str(exc))
        if not me.ok:
            return Connected(status="error", reason=f"Slack refused the bot token: {me.error}")
        kept = {
            k: v
            for k, v in (
                ("team", me.team),
                ("team_id", me.team_id),
                ("bot_user_id", me.user_id),
                ("bot_id", me.bot_id),
            )
            if v
        }
        return Connected(status="connected", config=kept)

    async def disconnect(
        self, credentials: Mapping[str, str], config: Mapping[str, str | int | bool]
    ) -> None:
        """Nothing to undo: the Request URL is the app's, set in Slack's console."""

    def render(self, markdown: str) -> tuple[str, ...]:
        return pack(parse(markdown), _MRKDWN)

    async def send(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        message: Outgoing,
    ) -> Sent:
        token = credentials.get("bot_token")
        if not token:
            raise DeliveryFailed("the channel has no bot token", permanent=True)
        body: dict[str, Any] = {"channel": message.chat_id, "text": message.text, "mrkdwn": True}
        if message.reply_to is not None:
            body["thread_ts"] = message.reply_to
        answer = await self._call(token, "chat.postMessage", **body)
        if not answer.ok:
            raise DeliveryFailed(
                f"Slack refused the message: {answer.error or 'no error code'}",
                permanent=answer.error not in _TRANSIENT,
            )
        return Sent(message_id=answer.ts)


def _retry_after(resp: httpx.Response) -> float:
    try:
        value = float(resp.headers["retry-after"])
    except (KeyError, ValueError):
        return 1.0
    return value if value > 0 else 1.0
