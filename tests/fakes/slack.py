"""A loopback fake of Slack's Web API (the calls the channel adapter makes) and of
the Events API's sender, as strict as Slack where the adapter can get it wrong.
Serve ``FakeSlack`` with ``tests.web.live.serve``; ``<base URL>/api`` is the
adapter's ``api_url``.

Web API: ``POST /api/auth.test`` and ``/api/chat.postMessage``, the token as
``Authorization: Bearer`` (a JSON body must carry it so, as Slack requires) or a
``token`` form field; arguments as JSON (``application/json``) or a form. Answers
are HTTP 200 with ``ok: false`` and Slack's error code: ``not_authed`` (no
token), ``invalid_auth`` (another token), ``channel_not_found``,
``not_in_channel``, ``no_text``, ``msg_too_long`` (over 40,000 characters),
``invalid_arguments`` (a body that is not JSON), ``unknown_method``.
``throttle(retry_after)`` makes the next ``chat.postMessage`` answer HTTP 429 with
``Retry-After``; ``fail_next(error)`` answers ``ok: false`` with that code once.
``posted`` records every message posted.

Events: ``EventSender(signing_secret)`` builds real-shaped ``event_callback`` and
``url_verification`` payloads, signs them (``X-Slack-Signature: v0=`` HMAC-SHA256
of ``v0:{timestamp}:{body}``, ``X-Slack-Request-Timestamp``) and delivers them to
a loopback URL, retries carrying ``X-Slack-Retry-Num`` and ``X-Slack-Retry-Reason``
with the same body, each signed anew, as Slack retries.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

BOT_TOKEN = "xoxb-1111111111-2222222222-fakeSlackBotToken0123"
SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM = {"team": "Tea Makers", "team_id": "T0TEAM0001", "url": "https://teamakers.slack.com/"}
BOT_USER = "U0BOTUSER1"
BOT_ID = "B0BOT00001"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_TEXT = 40_000


@dataclass
class FakeSlack:
    """The Web API of one workspace with the bot installed. ``channels``: the
    channels that exist, by id, with whether the bot is a member."""

    token: str = BOT_TOKEN
    channels: dict[str, bool] = field(
        default_factory=lambda: {"C0GENERAL1": True, "D0DIRECT01": True, "C0NOTJOIN1": False}
    )
    posted: list[dict[str, Any]] = field(default_factory=list)
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    _throttle: list[int] = field(default_factory=list)
    _failures: list[str] = field(default_factory=list)
    _clock: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def throttle(self, retry_after: int) -> None:
        self._throttle.append(retry_after)

    def fail_next(self, error: str) -> None:
        self._failures.append(error)

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
        status, extra, answer = self.answer(scope["method"], scope["path"], headers, body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json; charset=utf-8"), *extra],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    def answer(
        self, verb: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], dict[str, Any]]:
        method = path.removeprefix("/api/")
        if verb != "POST" or method not in ("auth.test", "chat.postMessage"):
            return 200, [], {"ok": False, "error": "unknown_method"}
        args = _args(headers.get("content-type", ""), body)
        if args is None:
            return 200, [], {"ok": False, "error": "invalid_arguments"}
        json_body = headers.get("content-type", "").startswith("application/json")
        token = _bearer(headers.get("authorization", ""))
        if token is None and not json_body:
            token = args.get("token")
        if not token:
            return 200, [], {"ok": False, "error": "not_authed"}
        if token != self.token:
            return 200, [], {"ok": False, "error": "invalid_auth"}
        self.calls.append((method, args))
        if method == "auth.test":
            return (
                200,
                [],
                {
                    "ok": True,
                    **TEAM,
                    "user": "tea_helper",
                    "user_id": BOT_USER,
                    "bot_id": BOT_ID,
                    "is_enterprise_install": False,
                },
            )
        return self._post(args)

    def _post(self, args: dict[str, Any]) -> tuple[int, list[tuple[bytes, bytes]], dict[str, Any]]:
        if self._throttle:
            retry = self._throttle.pop(0)
            return (
                429,
                [(b"retry-after", str(retry).encode())],
                {"ok": False, "error": "ratelimited"},
            )
        if self._failures:
            return 200, [], {"ok": False, "error": self._failures.pop(0)}
        channel = args.get("channel")
        if channel not in self.channels:
            return 200, [], {"ok": False, "error": "channel_not_found"}
        if not self.channels[channel]:
            return 200, [], {"ok": False, "error": "not_in_channel"}
        text = args.get("text")
        if not isinstance(text, str) or not text.strip():
            return 200, [], {"ok": False, "error": "no_text"}
        if len(text) > MAX_TEXT:
            return 200, [], {"ok": False, "error": "msg_too_long"}
        ts = f"17327448{next(self._clock):02d}.{next(self._clock):06d}"
        message: dict[str, Any] = {
            "type": "message",
            "subtype": "bot_message",
            "text": text,
            "ts": ts,
            "user": BOT_USER,
            "bot_id": BOT_ID,
        }
        if args.get("thread_ts"):
            message["thread_ts"] = args["thread_ts"]
        self.posted.append({"channel": channel, **message})
        return 200, [], {"ok": True, "channel": channel, "ts": ts, "message": message}


def _bearer(header: str) -> str | None:
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _args(content_type: str, body: bytes) -> dict[str, Any] | None:
    if content_type.startswith("application/json"):
        try:
            decoded = json.loads(body or b"{}")
        except ValueError:
            return None
        return decoded if isinstance(decoded, dict) else None
    if content_type.startswith("application/x-www-form-urlencoded") or not body:
        return {k: v[0] for k, v in parse_qs(body.decode()).items()}
    return None


# --- the Events API's sender ---------------------------------------------------------


def signature(secret: str, timestamp: str, body: bytes) -> str:
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class EventSender:
    """Signs and delivers Events API requests as Slack does."""

    def __init__(
        self, signing_secret: str = SIGNING_SECRET, team_id: str = TEAM["team_id"]
    ) -> None:
        self.secret = signing_secret
        self.team_id = team_id
        self._ids = itertools.count(1)

    def callback(self, event: dict[str, Any]) -> dict[str, Any]:
        """An ``event_callback`` envelope around ``event`` (a new ``event_id``)."""
        return {
            "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
            "team_id": self.team_id,
            "api_app_id": "A0APP00001",
            "event": event,
            "type": "event_callback",
            "event_id": f"Ev0{next(self._ids):08d}",
            "event_time": 1732744800,
            "authorizations": [
                {
                    "enterprise_id": None,
                    "team_id": self.team_id,
                    "user_id": BOT_USER,
                    "is_bot": True,
                    "is_enterprise_install": False,
                }
            ],
            "is_ext_shared_channel": False,
            "event_context": "4-eyJldCI6Im1lc3NhZ2UiLCJ0aWQiOiJUMFRFQU0wMDAxIn0",
        }

    @staticmethod
    def url_verification(challenge: str) -> dict[str, Any]:
        return {
            "token": "Jhj5dZrVaK7ZwHHjRyZWjbDl",
            "challenge": challenge,
            "type": "url_verification",
        }

    def signed(
        self,
        payload: dict[str, Any],
        *,
        timestamp: int | None = None,
        retry: int = 0,
        body: bytes | None = None,
    ) -> tuple[dict[str, str], bytes]:
        """The headers and body of one delivery of ``payload``."""
        raw = body if body is not None else json.dumps(payload).encode()
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        headers = {
            "content-type": "application/json",
            "x-slack-request-timestamp": stamp,
            "x-slack-signature": signature(self.secret, stamp, raw),
            "user-agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
        }
        if retry:
            headers["x-slack-retry-num"] = str(retry)
            headers["x-slack-retry-reason"] = "http_timeout"
        return headers, raw

    async def deliver(
        self, url: str, payload: dict[str, Any], *, retries: int = 0
    ) -> list[httpx.Response]:
        """POST ``payload`` to a loopback ``url``, then ``retries`` retries of the same
        body (as Slack does when no 200 came within 3 s), each signed anew."""
        if urlsplit(url).hostname not in LOOPBACK:
            raise ValueError("the fake delivers to loopback addresses only")
        body = json.dumps(payload).encode()
        answers = []
        async with httpx.AsyncClient(trust_env=False) as client:
            for attempt in range(retries + 1):
                headers, raw = self.signed(payload, retry=attempt, body=body)
                answers.append(await client.post(url, content=raw, headers=headers))
        return answers


def message_event(
    text: str,
    *,
    channel: str | None = "C0GENERAL1",
    channel_type: str = "channel",
    user: str | None = "U0ADA00001",
    ts: str | None = "1732744800.000100",
    thread_ts: str | None = None,
    **extra: Any,
) -> dict[str, Any]:
    """A ``message`` event as the Events API sends one (``message.channels``,
    ``message.im``...)."""
    event: dict[str, Any] = {
        "client_msg_id": "5c3c3a4e-1f1d-4f3e-9a1a-6c2f0b7d1e11",
        "type": "message",
        "text": text,
        "user": user,
        "ts": ts,
        "blocks": [{"type": "rich_text", "block_id": "x1Y", "elements": []}],
        "team": TEAM["team_id"],
        "channel": channel,
        "event_ts": ts,
        "channel_type": channel_type,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return {**event, **extra}


def app_mention_event(
    text: str,
    *,
    channel: str = "C0GENERAL1",
    user: str = "U0ADA00001",
    ts: str = "1732744800.000100",
    thread_ts: str | None = None,
) -> dict[str, Any]:
    """An ``app_mention`` event (no ``channel_type``, as Slack sends it)."""
    event: dict[str, Any] = {
        "client_msg_id": "5c3c3a4e-1f1d-4f3e-9a1a-6c2f0b7d1e11",
        "type": "app_mention",
        "text": text,
        "user": user,
        "ts": ts,
        "team": TEAM["team_id"],
        "channel": channel,
        "event_ts": ts,
    }
    if thread_ts:
        event["thread_ts"] = thread_ts
    return event
