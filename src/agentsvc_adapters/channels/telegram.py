"""Telegram (channel type ``telegram``): a bot of the Bot API, by its token.

Wire format (https://core.telegram.org/bots/api): every call is
``POST {AGENTSVC_TELEGRAM_API_URL}/bot<token>/<method>`` with a JSON body and
answers ``{"ok": true, "result": ...}`` or ``{"ok": false, "error_code",
"description", "parameters"?}``. The token is in the path, so no URL is ever
logged or put in an error (``failure`` names only the host).

- ``connect``: ``getMe`` checks the token (a refusal is ``Connected(status="error")``)
  and gives the bot's id and username, kept in ``config`` (``bot_id``,
  ``bot_username``: group mentions are read against them); ``setWebhook``
  registers the channel's inbound URL with ``allowed_updates=["message"]`` and a
  secret token. The secret token is derived, not stored: HMAC-SHA256 of a fixed
  label keyed by the bot token, base64url (43 characters of ``A-Z a-z 0-9 _ -``,
  as Telegram allows). Whoever holds the token can call ``setWebhook`` anyway, so
  deriving from it gives nothing away, and a new token gives a new secret.
- ``read_inbound``: the ``X-Telegram-Bot-Api-Secret-Token`` header is compared in
  constant time (401 otherwise). An Update's ``update_id`` is the event id. Only
  ``message`` is acted on: ``edited_message`` (answering an edit would answer the
  same question twice), ``channel_post`` and every other kind are acknowledged
  and dropped, as are messages without text or caption and messages of bots. A
  chat of type ``group`` or ``supergroup`` is a group; the bot is mentioned by a
  ``mention`` entity ``@bot_username``, a ``text_mention`` of its id, a
  ``/command@bot_username`` or a reply to one of its messages. A group message's
  reply quotes it (``reply_to`` is its ``message_id``); a private one does not.
- ``render``: Markdown to Telegram HTML (``parse_mode: HTML``: ``<b> <i> <s>
  <code> <pre> <a href> <blockquote>``, ``& < >`` escaped), in parts of at most
  4096 UTF-16 code units *of HTML*: Telegram's limit is on the text after its
  entities are read, so counting the tags too is on the safe side.
- ``send``: ``sendMessage``. 429 (``parameters.retry_after``) is ``PlatformBusy``;
  a 400 "can't parse entities" (never expected: ``render`` writes only valid
  HTML) is answered by sending the same part once more as plain text, the tags
  removed, so the reader gets the words rather than nothing; other 400s, 401, 403
  and 404 are permanent (a bad token, a chat that does not exist, a bot blocked
  or removed); 5xx and the network are not.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import html
import logging
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec

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

__all__ = ["TELEGRAM_API_URL", "TelegramPlatform", "telegram_html", "webhook_secret"]

log = logging.getLogger("agentsvc.channels")
TELEGRAM_API_URL = "https://api.telegram.org"
LIMIT = 4096
_TIMEOUT_S = 15.0
_SECRET_LABEL = b"agentsvc telegram webhook secret v1"
_GROUPS = frozenset({"group", "supergroup"})
_TAGS = re.compile(r"<[^>]*>")
_PERMANENT = frozenset({400, 401, 403, 404})
_UTF16 = "utf-16-le"


def webhook_secret(bot_token: str) -> str:
    """The ``secret_token`` of the bot's webhook, derived from its token."""
    digest = hmac.new(bot_token.encode(), _SECRET_LABEL, hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def utf16_len(text: str) -> int:
    return len(text.encode(_UTF16)) >> 1


_OPEN = {"b": "<b>", "i": "<i>", "s": "<s>", "code": "<code>", "q": "<blockquote>"}
_CLOSE = {"b": "</b>", "i": "</i>", "s": "</s>", "code": "</code>", "q": "</blockquote>"}


def _open(mark: Mark) -> str:
    kind, arg = mark
    if kind == "a":
        return f'<a href="{html.escape(arg)}">'
    if kind == "pre":
        lang = f' class="language-{html.escape(arg)}"' if arg else ""
        return f"<pre><code{lang}>"
    return _OPEN[kind]


def _close(mark: Mark) -> str:
    kind = mark[0]
    if kind == "a":
        return "</a>"
    if kind == "pre":
        return "</code></pre>"
    return _CLOSE[kind]


def _escape(char: str, marks: tuple[Mark, ...]) -> str:
    return html.escape(char, False)  # quotes stay as they are in text


def telegram_html(limit: int = LIMIT) -> Dialect:
    return Dialect(limit=limit, open=_open, close=_close, escape=_escape, measure=utf16_len)


_HTML = telegram_html()


def plain(part: str) -> str:
    """A rendered part as plain text: tags removed, entities read."""
    return html.unescape(_TAGS.sub("", part))


class _Answer(msgspec.Struct):
    ok: bool = False
    result: Any = None
    error_code: int = 0
    description: str = ""
    parameters: dict[str, Any] = {}


_answer = msgspec.json.Decoder(_Answer)


def _text_of(message: Mapping[str, Any]) -> tuple[str, list[Any]]:
    text = message.get("text")
    if isinstance(text, str):
        return text, list(message.get("entities") or [])
    caption = message.get("caption")
    if isinstance(caption, str):
        return caption, list(message.get("caption_entities") or [])
    return "", []


def _entity_text(text: str, entity: Mapping[str, Any]) -> str:
    """The part of ``text`` an entity covers (its offsets are UTF-16 code units)."""
    units = text.encode(_UTF16)
    try:
        start = int(entity["offset"]) * 2
        end = start + int(entity["length"]) * 2
    except (KeyError, TypeError, ValueError):
        return ""
    return units[start:end].decode(_UTF16, errors="replace")


def _mentions(message: Mapping[str, Any], config: Mapping[str, str | int | bool]) -> bool:
    """Whether the message names the bot (or answers one of its messages)."""
    username = str(config.get("bot_username", "")).lower()
    bot_id = config.get("bot_id")
    replied = message.get("reply_to_message") or {}
    if bot_id is not None and (replied.get("from") or {}).get("id") == bot_id:
        return True
    text, entities = _text_of(message)
    for entity in entities:
        kind = entity.get("type")
        if kind == "text_mention" and (entity.get("user") or {}).get("id") == bot_id:
            return True
        covered = _entity_text(text, entity).lower()
        if username and kind == "mention" and covered == f"@{username}":
            return True
        if username and kind == "bot_command" and covered.endswith(f"@{username}"):
            return True
    return False


def _message(
    update_id: int, message: Mapping[str, Any], config: Mapping[str, str | int | bool]
) -> InboundMessage | None:
    chat = message.get("chat") or {}
    sender = message.get("from") or {}
    text, _ = _text_of(message)
    if not text or "id" not in chat or "id" not in sender or sender.get("is_bot"):
        return None
    group = chat.get("type") in _GROUPS
    if not group and chat.get("type") != "private":
        return None
    name = " ".join(str(sender[k]) for k in ("first_name", "last_name") if sender.get(k))
    date = message.get("date")
    return InboundMessage(
        event_id=str(update_id),
        chat_id=str(chat["id"]),
        sender_id=str(sender["id"]),
        sender_name=name or None,
        sender_username=sender.get("username"),
        text=text,
        is_group=group,
        mentioned=group and _mentions(message, config),
        reply_to=str(message["message_id"]) if group and "message_id" in message else None,
        sent_at=datetime.fromtimestamp(date, UTC) if isinstance(date, int) else None,
    )


class TelegramPlatform(ChannelPlatform):
    type: ChannelType = "telegram"
    credential_fields = ("bot_token",)
    config_fields = ()

    def __init__(self, guard: OutboundGuard, api_url: str = TELEGRAM_API_URL) -> None:
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
        token = credentials.get("bot_token")
        given = request.headers.get("x-telegram-bot-api-secret-token")
        if (
            not token
            or given is None
            or not hmac.compare_digest(given.encode(), webhook_secret(token).encode())
        ):
            return InboundRefused(status=401, detail="wrong or missing secret token")
        if request.method != "POST":
            return InboundRefused(status=400, detail="Telegram sends updates by POST")
        try:
            update = msgspec.json.decode(request.body)
        except msgspec.DecodeError:
            return InboundRefused(status=400, detail="the body is not JSON")
        if not isinstance(update, dict) or not isinstance(update.get("update_id"), int):
            return InboundRefused(status=400, detail="not a Telegram Update")
        message = update.get("message")
        if not isinstance(message, dict):
            return Inbound()
        found = _message(update["update_id"], message, config)
        return Inbound(messages=(found,) if found else ())

    async def _call(self, token: str, method: str, **body: Any) -> tuple[int, _Answer]:
        """One Bot API call: its HTTP status and answer. Raises ``DeliveryFailed``
        (not permanent) when the API could not be reached or did not answer JSON."""
        url = f"{self._base}/bot{token}/{method}"
        try:
            resp = await self._http.post(url, json=body)
        except httpx.HTTPError as exc:
            raise DeliveryFailed(failure(exc, url), permanent=False) from None
        try:
            return resp.status_code, _answer.decode(resp.content)
        except msgspec.DecodeError:
            why = f"Telegram answered {resp.status_code} without a JSON body"
            raise DeliveryFailed(why, permanent=False) from None

    async def connect(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        inbound_url: str,
    ) -> Connected:
        token = credentials.get("bot_token")
        if not token:
            return Connected(status="error", reason="the bot token is missing")
        try:
            _, me = await self._call(token, "getMe")
            if not me.ok or not isinstance(me.result, dict) or "id" not in me.result:
                why = me.description or "no answer"
                return Connected(status="error", reason=f"Telegram refused the bot token: {why}")
            _, hook = await self._call(
                token,
                "setWebhook",
                url=inbound_url,
                secret_token=webhook_secret(token),
                allowed_updates=["message"],
            )
        except DeliveryFailed as exc:
            return Connected(status="error", reason=str(exc))
        if not hook.ok:
            why = hook.description or "no answer"
            return Connected(status="error", reason=f"Telegram refused the webhook: {why}")
        kept: dict[str, str | int | bool] = {"bot_id": int(me.result["id"])}
        if me.result.get("username"):
            kept["bot_username"] = str(me.result["username"])
        return Connected(status="connected", config=kept)

    async def disconnect(
        self, credentials: Mapping[str, str], config: Mapping[str, str | int | bool]
    ) -> None:
        token = credentials.get("bot_token")
        if not token:
            return
        try:
            await self._call(token, "deleteWebhook")
        except DeliveryFailed as exc:
            log.info("telegram: deleteWebhook failed: %s", exc)

    def render(self, markdown: str) -> tuple[str, ...]:
        return pack(parse(markdown), _HTML)

    async def send(
        self,
        credentials: Mapping[str, str],
        config: Mapping[str, str | int | bool],
        message: Outgoing,
    ) -> Sent:
        token = credentials.get("bot_token")
        if not token:
            raise DeliveryFailed("the channel has no bot token", permanent=True)
        body: dict[str, Any] = {"chat_id": message.chat_id, "text": message.text}
        if message.reply_to is not None and message.reply_to.isdigit():
            body["reply_parameters"] = {
                "message_id": int(message.reply_to),
                "allow_sending_without_reply": True,
            }
        status, answer = await self._call(token, "sendMessage", **body, parse_mode="HTML")
        if "can't parse entities" in answer.description:
            log.warning("telegram: HTML refused (%s); sent as plain text", answer.description)
            body["text"] = plain(message.text)
            status, answer = await self._call(token, "sendMessage", **body)
        return _sent(status, answer)


def _sent(status: int, answer: _Answer) -> Sent:
    if answer.ok:
        result = answer.result if isinstance(answer.result, dict) else {}
        found = result.get("message_id")
        return Sent(message_id=str(found) if found is not None else None)
    why = f"Telegram answered {status}: {answer.description or 'no description'}"
    if status == 429:
        retry = answer.parameters.get("retry_after")
        delay = float(retry) if isinstance(retry, int | float) and retry > 0 else 1.0
        raise PlatformBusy(why, retry_after_s=delay)
    raise DeliveryFailed(why, permanent=status in _PERMANENT)
