"""A loopback fake of the Telegram Bot API, as strict as Telegram where the channel
adapter can get it wrong, and the sender of Updates to a webhook as Telegram posts
them. Serve ``FakeTelegram`` with ``tests.web.live.serve``; its base URL is the
adapter's ``api_url``.

Routes: ``/bot<token>/<method>`` for ``getMe``, ``setWebhook``, ``deleteWebhook``,
``getWebhookInfo``, ``sendMessage``; parameters as JSON, form or query, as
Telegram takes them. An unknown token is 401 ``Unauthorized``, an unknown method
404 ``Not Found``. ``setWebhook`` wants ``url`` (HTTPS on 443, 80, 88 or 8443; the
one relaxation: ``http://`` to a loopback host is accepted, for tests) and checks
``secret_token`` (1-256 of ``A-Z a-z 0-9 _ -``) and ``allowed_updates``.
``sendMessage`` wants a known ``chat_id`` (400 ``chat not found``; 403 for a chat
that blocked the bot), a non-empty ``text`` of at most 4096 UTF-16 code units
after its entities are read, valid HTML under ``parse_mode: HTML`` (the tags
Telegram knows, properly nested, ``& < >`` escaped: else 400 ``can't parse
entities``) and, for ``reply_parameters``, a message that exists unless
``allow_sending_without_reply``. ``throttle(retry_after)`` makes the next
``sendMessage`` answer 429 with ``parameters.retry_after``; ``fail_next(status)``
a bare error. ``sent`` records every message sent.
"""

from __future__ import annotations

import html
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

TOKEN = "123456789:AAE-fake_bot_token_0123456789abcdefghi"
BOT: dict[str, Any] = {"id": 123456789, "username": "tea_helper_bot", "first_name": "Tea helper"}
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
_UPDATE_KINDS = frozenset(
    {
        "message",
        "edited_message",
        "channel_post",
        "edited_channel_post",
        "callback_query",
        "inline_query",
        "my_chat_member",
        "chat_member",
        "message_reaction",
    }
)
_FORMAT = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "tg-spoiler"}
_TAG = re.compile(r"<(/?)([a-zA-Z][a-zA-Z0-9-]*)((?:\s+[a-zA-Z-]+=\"[^\"<>]*\")*)\s*>")
_ENTITY = re.compile(r"&(lt|gt|amp|quot|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});")
_ATTR = re.compile(r"([a-zA-Z-]+)=\"([^\"]*)\"")


class EntityError(ValueError):
    """Telegram's ``can't parse entities: ...``."""


def _check_open(name: str, attrs: dict[str, str], stack: list[str], at: int) -> None:
    if (stack and stack[-1] == "code") or (stack and stack[-1] == "pre" and name != "code"):
        raise EntityError(f"Can't parse entities: entity {name!r} can't be nested at {at}")
    if name in ("code", "pre") and "a" in stack:
        raise EntityError(f"Can't parse entities: entity {name!r} can't be in a link at {at}")
    if name == "a" and ("a" in stack or "href" not in attrs):
        raise EntityError(f"Can't parse entities: bad link at byte offset {at}")
    if name == "blockquote" and "blockquote" in stack:
        raise EntityError(f"Can't parse entities: nested blockquote at byte offset {at}")
    if name == "code" and stack and stack[-1] == "pre":
        return
    if name not in _FORMAT | {"a", "code", "pre", "blockquote"}:
        raise EntityError(
            f'Can\'t parse entities: unsupported start tag "{name}" at byte offset {at}'
        )


def visible_text(text: str) -> str:
    """The text Telegram shows for an HTML message; ``EntityError`` as Telegram
    refuses one (an unknown tag, a tag left open or closed twice, entities nested
    as Telegram forbids, an unescaped ``<`` ``>`` or ``&``)."""
    out: list[str] = []
    stack: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "<":
            tag = _TAG.match(text, i)
            if tag is None:
                raise EntityError(f"Can't parse entities: unexpected < at byte offset {i}")
            closing, name, attrs = (
                tag.group(1),
                tag.group(2).lower(),
                dict(_ATTR.findall(tag.group(3))),
            )
            if closing:
                if not stack or stack[-1] != name:
                    raise EntityError(f'Can\'t find end tag corresponding to start tag "{name}"')
                stack.pop()
            else:
                _check_open(name, attrs, stack, i)
                stack.append(name)
            i = tag.end()
        elif char == "&":
            entity = _ENTITY.match(text, i)
            if entity is None:
                raise EntityError(f"Can't parse entities: unescaped & at byte offset {i}")
            out.append(html.unescape(entity.group(0)))
            i = entity.end()
        elif char == ">":
            raise EntityError(f"Can't parse entities: unescaped > at byte offset {i}")
        else:
            out.append(char)
            i += 1
    if stack:
        raise EntityError(f'Can\'t find end tag corresponding to start tag "{stack[-1]}"')
    return "".join(out)


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


@dataclass
class Chat:
    id: int
    type: str = "private"
    title: str | None = None
    blocked: bool = False
    message_ids: set[int] = field(default_factory=set)


class FakeTelegram:
    """The Bot API of one bot (``token``, ``bot``). ``chats``: the chats the bot is
    in (``add_chat``, or any chat an Update was made for); ``webhook``: what
    ``setWebhook`` set; ``calls``: every (method, parameters)."""

    def __init__(self, token: str = TOKEN, bot: dict[str, Any] | None = None) -> None:
        self.token = token
        self.bot = dict(bot or BOT)
        self.chats: dict[int, Chat] = {}
        self.webhook: dict[str, Any] = {}
        self.sent: list[dict[str, Any]] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self._throttle: list[int] = []
        self._failures: list[int] = []
        self._next_message_id = 1000
        self._next_update_id = 700000000

    def add_chat(self, chat_id: int, kind: str = "private", title: str | None = None) -> Chat:
        return self.chats.setdefault(chat_id, Chat(chat_id, kind, title))

    def throttle(self, retry_after: int) -> None:
        """The next ``sendMessage`` answers 429 with ``retry_after``."""
        self._throttle.append(retry_after)

    def fail_next(self, status: int) -> None:
        """The next ``sendMessage`` answers ``status`` (a 5xx: Telegram's trouble)."""
        self._failures.append(status)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        params = _params(scope["query_string"].decode(), headers.get("content-type", ""), body)
        status, answer = self.answer(scope["method"], scope["path"], params)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    def answer(
        self, verb: str, path: str, params: dict[str, Any] | None
    ) -> tuple[int, dict[str, Any]]:
        match = re.fullmatch(r"/bot([^/]+)/([A-Za-z]+)", path)
        if match is None:
            return _error(404, "Not Found")
        if match.group(1) != self.token:
            return _error(401, "Unauthorized")
        if params is None:
            return _error(400, "Bad Request: can't parse JSON object")
        method = match.group(2)
        self.calls.append((method, params))
        handler = {
            "getme": self._get_me,
            "setwebhook": self._set_webhook,
            "deletewebhook": self._delete_webhook,
            "getwebhookinfo": self._webhook_info,
            "sendmessage": self._send_message,
        }.get(method.lower())
        if handler is None:
            return _error(404, "Not Found")
        return handler(params)

    def _get_me(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 200, {
            "ok": True,
            "result": {
                "id": self.bot["id"],
                "is_bot": True,
                "first_name": self.bot["first_name"],
                "username": self.bot["username"],
                "can_join_groups": True,
                "can_read_all_group_messages": False,
                "supports_inline_queries": False,
            },
        }

    def _set_webhook(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        url = params.get("url")
        if not isinstance(url, str):
            return _error(400, 'Bad Request: parameter "url" is required')
        if url == "":
            self.webhook = {}
            return 200, {"ok": True, "result": True, "description": "Webhook was deleted"}
        problem = _webhook_problem(url)
        if problem:
            return _error(400, f"Bad Request: bad webhook: {problem}")
        secret = params.get("secret_token")
        if secret is not None and not (isinstance(secret, str) and _SECRET.fullmatch(secret)):
            return _error(400, "Bad Request: secret token contains unallowed characters")
        allowed = _json_param(params.get("allowed_updates", []))
        if not isinstance(allowed, list) or not all(a in _UPDATE_KINDS for a in allowed):
            return _error(400, "Bad Request: can't parse allowed updates")
        self.webhook = {"url": url, "secret_token": secret, "allowed_updates": allowed}
        return 200, {"ok": True, "result": True, "description": "Webhook was set"}

    def _delete_webhook(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        was = bool(self.webhook)
        self.webhook = {}
        why = "Webhook was deleted" if was else "Webhook is already deleted"
        return 200, {"ok": True, "result": True, "description": why}

    def _webhook_info(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        info = {
            "url": self.webhook.get("url", ""),
            "has_custom_certificate": False,
            "pending_update_count": 0,
        }
        if self.webhook.get("allowed_updates"):
            info["allowed_updates"] = self.webhook["allowed_updates"]
        return 200, {"ok": True, "result": info}

    def _send_message(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if self._throttle:
            retry = self._throttle.pop(0)
            return 429, {
                "ok": False,
                "error_code": 429,
                "description": f"Too Many Requests: retry after {retry}",
                "parameters": {"retry_after": retry},
            }
        if self._failures:
            status = self._failures.pop(0)
            return _error(status, "Internal Server Error" if status >= 500 else "Bad Request")
        chat = self._chat(params.get("chat_id"))
        if isinstance(chat, tuple):
            return chat
        text = params.get("text")
        if not isinstance(text, str) or not text.strip():
            return _error(400, "Bad Request: message text is empty")
        shown = text
        mode = params.get("parse_mode")
        if mode not in (None, "", "HTML"):
            return _error(400, f"Bad Request: unsupported parse_mode {mode!r} in this fake")
        if mode == "HTML":
            try:
                shown = visible_text(text)
            except EntityError as exc:
                return _error(400, f"Bad Request: can't parse entities: {exc}")
        if not shown.strip():
            return _error(400, "Bad Request: message text is empty")
        if utf16_len(shown) > 4096:
            return _error(400, "Bad Request: message is too long")
        reply = _json_param(params.get("reply_parameters"))
        if reply is not None:
            refused = _reply_problem(reply, chat)
            if refused:
                return _error(400, refused)
        return 200, {"ok": True, "result": self._record(chat, params, text, reply)}

    def _chat(self, raw: Any) -> Chat | tuple[int, dict[str, Any]]:
        try:
            chat_id = int(raw)
        except (TypeError, ValueError):
            return _error(400, "Bad Request: chat not found")
        chat = self.chats.get(chat_id)
        if chat is None:
            return _error(400, "Bad Request: chat not found")
        if chat.blocked:
            return _error(403, "Forbidden: bot was blocked by the user")
        return chat

    def _record(self, chat: Chat, params: dict[str, Any], text: str, reply: Any) -> dict[str, Any]:
        self._next_message_id += 1
        message_id = self._next_message_id
        chat.message_ids.add(message_id)
        self.sent.append(
            {
                "message_id": message_id,
                "chat_id": chat.id,
                "text": text,
                "parse_mode": params.get("parse_mode"),
                "reply_parameters": reply,
            }
        )
        return {
            "message_id": message_id,
            "from": {
                "id": self.bot["id"],
                "is_bot": True,
                "first_name": self.bot["first_name"],
                "username": self.bot["username"],
            },
            "chat": {"id": chat.id, "type": chat.type},
            "date": 1700000000,
            "text": text,
        }

    # --- Updates, as Telegram posts them --------------------------------------------

    def update(
        self,
        text: str,
        *,
        chat_id: int = 5550001,
        chat_type: str = "private",
        user_id: int = 5550001,
        first_name: str = "Ada",
        username: str | None = "ada_l",
        entities: list[dict[str, Any]] | None = None,
        reply_to_bot: bool = False,
        update_id: int | None = None,
        kind: str = "message",
    ) -> dict[str, Any]:
        """A real-shaped Update with a text message (the chat becomes known to the
        fake, so a reply can be sent to it); ``update_id`` the next one unless given
        (give the same one to deliver an update twice)."""
        self._next_update_id += 1
        update_id = self._next_update_id if update_id is None else update_id
        chat_obj: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat_obj |= {"first_name": first_name, **({"username": username} if username else {})}
        else:
            chat_obj["title"] = "Tea lovers"
            if chat_type == "supergroup":
                chat_obj["is_forum"] = False
        chat = self.add_chat(chat_id, chat_type)
        message_id = 40 + len(chat.message_ids)
        chat.message_ids.add(message_id)
        sender: dict[str, Any] = {
            "id": user_id,
            "is_bot": False,
            "first_name": first_name,
            "language_code": "en",
        }
        if username:
            sender["username"] = username
        message: dict[str, Any] = {
            "message_id": message_id,
            "from": sender,
            "chat": chat_obj,
            "date": 1732744800,
            "text": text,
        }
        if entities:
            message["entities"] = entities
        if reply_to_bot:
            message["reply_to_message"] = {
                "message_id": 12,
                "from": {
                    "id": self.bot["id"],
                    "is_bot": True,
                    "first_name": self.bot["first_name"],
                    "username": self.bot["username"],
                },
                "chat": chat_obj,
                "date": 1732744700,
                "text": "An earlier answer",
            }
        return {"update_id": update_id, kind: message}

    def webhook_request(self, update: dict[str, Any]) -> tuple[dict[str, str], bytes]:
        """The headers and body Telegram posts an Update with, to ``setWebhook``'s URL."""
        headers = {"content-type": "application/json"}
        if self.webhook.get("secret_token"):
            headers["x-telegram-bot-api-secret-token"] = self.webhook["secret_token"]
        return headers, json.dumps(update).encode()

    async def deliver(self, update: dict[str, Any], url: str | None = None) -> httpx.Response:
        """POST ``update`` to the webhook (``setWebhook``'s URL unless ``url``), loopback
        only, as Telegram does."""
        target = url or self.webhook["url"]
        if urlsplit(target).hostname not in LOOPBACK:
            raise ValueError("the fake delivers to loopback addresses only")
        headers, body = self.webhook_request(update)
        async with httpx.AsyncClient(trust_env=False) as client:
            return await client.post(target, content=body, headers=headers)


def _error(status: int, description: str) -> tuple[int, dict[str, Any]]:
    return status, {"ok": False, "error_code": status, "description": description}


def _params(query: str, content_type: str, body: bytes) -> dict[str, Any] | None:
    params: dict[str, Any] = {k: v[0] for k, v in parse_qs(query).items()}
    if not body:
        return params
    if content_type.startswith("application/json"):
        try:
            decoded = json.loads(body)
        except ValueError:
            return None
        return {**params, **decoded} if isinstance(decoded, dict) else None
    if content_type.startswith("application/x-www-form-urlencoded"):
        return {**params, **{k: v[0] for k, v in parse_qs(body.decode()).items()}}
    return None


def _json_param(value: Any) -> Any:
    """A parameter that is a JSON object or array, given as one or as its text."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def _webhook_problem(url: str) -> str | None:
    parts = urlsplit(url)
    if parts.scheme == "http" and parts.hostname in LOOPBACK:
        return None  # the fake's one relaxation
    if parts.scheme != "https":
        return "An HTTPS URL must be provided for webhook"
    if parts.port not in (None, 80, 88, 443, 8443):
        return "Webhook can be set up only on ports 80, 88, 443 or 8443"
    return None


def _reply_problem(reply: Any, chat: Chat) -> str | None:
    if not isinstance(reply, dict) or not isinstance(reply.get("message_id"), int):
        return "Bad Request: can't parse reply parameters JSON object"
    if reply["message_id"] not in chat.message_ids and not reply.get("allow_sending_without_reply"):
        return "Bad Request: message to be replied not found"
    return None
