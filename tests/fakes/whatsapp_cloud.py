"""A loopback fake of Meta's Graph API for the WhatsApp Cloud API, as strict as Meta
on what the channel adapter sends, and Meta's side of the webhooks (the GET
verification handshake and signed POSTs). Serve the API with
``tests.web.live.serve(FakeGraph())``; point ``AGENTSVC_WHATSAPP_CLOUD_API_URL`` at it.

- ``GET /{version}/{phone_number_id}?fields=...`` answers the number's
  ``display_phone_number`` and ``verified_name`` (code 100, subcode 33 for a number
  it does not know);
- ``POST /{version}/{phone_number_id}/messages`` checks the body as Meta does
  (``messaging_product: "whatsapp"``, ``to``, ``type: "text"``, ``text.body`` of 1 to
  4096 characters: error 100 otherwise), refuses a recipient outside the 24-hour
  window (131047, ``outside_window``), and answers ``{messaging_product, contacts,
  messages: [{id: "wamid...."}]}``; ``sent`` records each accepted message;
- every call needs ``Authorization: Bearer <token>`` (401 with an ``OAuthException``,
  code 190, otherwise); ``fail_next`` queues answers ``(http status, code)`` to give
  instead (``(429, 130429)``: throughput, ``(500, 131000)``...), and ``answer_next``
  raw answers ``(status, body, headers)`` given whatever is asked.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import itertools
import json
import re
from typing import Any
from urllib.parse import parse_qs

import httpx
import uvicorn

from agentsvc_core.ports.channel_platforms import InboundRequest

__all__ = [
    "APP_SECRET",
    "PHONE_NUMBER_ID",
    "TOKEN",
    "VERIFY_TOKEN",
    "FakeGraph",
    "MetaWebhooks",
    "status_notification",
    "text_notification",
]

TOKEN = "EAAJfakeSystemUserToken0123456789"
APP_SECRET = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
VERIFY_TOKEN = "tea-verify-token-4f9a"
PHONE_NUMBER_ID = "106540352242922"
WABA_ID = "102290129340398"
DISPLAY = "+1 555-010-4421"
_VERSION = re.compile(r"^/v\d+\.\d+/([0-9]+)(/messages)?$")
_ids = itertools.count(1)


def _error(status: int, code: int, message: str, subcode: int | None = None) -> tuple[int, Any]:
    kind = (
        "OAuthException"
        if code in (190, 4, 80007, 130429, 131056, 131047)
        else ("GraphMethodException")
    )
    error: dict[str, Any] = {
        "message": message,
        "type": kind,
        "code": code,
        "fbtrace_id": "AbCdEfGhIjK",
    }
    if subcode is not None:
        error["error_subcode"] = subcode
    if code >= 130000:
        error["error_data"] = {"messaging_product": "whatsapp", "details": message}
    return status, {"error": error}


class FakeGraph:
    def __init__(self, token: str = TOKEN, phone_number_id: str = PHONE_NUMBER_ID) -> None:
        self.token = token
        self.numbers = {phone_number_id: (DISPLAY, "Tea Garden")}
        self.sent: list[dict[str, Any]] = []
        self.fail_next: list[tuple[int, int]] = []
        # raw answers to give next, whatever was asked: (status, JSON body, headers)
        self.answer_next: list[tuple[int, Any, dict[str, str]]] = []
        self.outside_window: set[str] = set()
        self.requests: list[tuple[str, str]] = []  # (method, path)

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
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        self.requests.append((scope["method"], scope["path"]))
        extra: dict[str, str] = {}
        if self.answer_next:
            status, answer, extra = self.answer_next.pop(0)
        else:
            status, answer = self._answer(scope["method"], scope["path"], headers, query, body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [
                    (b"content-type", b"application/json"),
                    *((k.encode(), v.encode()) for k, v in extra.items()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    def _answer(
        self,
        method: str,
        path: str,
        headers: dict[str, str],
        query: dict[str, str],
        body: bytes,
    ) -> tuple[int, Any]:
        if headers.get("authorization") != f"Bearer {self.token}":
            return _error(401, 190, "Invalid OAuth access token - Cannot parse access token")
        route = _VERSION.match(path)
        if route is None:
            return _error(400, 2500, "Unknown path components")
        number = route.group(1)
        if number not in self.numbers:
            return _error(
                400,
                100,
                f"Unsupported get request. Object with ID '{number}' does not exist, cannot "
                "be loaded due to missing permissions, or does not support this operation.",
                33,
            )
        if self.fail_next:
            status, code = self.fail_next.pop(0)
            return _error(status, code, f"(#{code}) injected by the test")
        if route.group(2) is None and method == "GET":
            return self._number(number, query)
        if route.group(2) is not None and method == "POST":
            return self._message(number, body)
        return _error(400, 100, "Unsupported request - method type")

    def _number(self, number: str, query: dict[str, str]) -> tuple[int, Any]:
        display, name = self.numbers[number]
        fields = query.get("fields", "").split(",")
        answer: dict[str, Any] = {"id": number}
        if "display_phone_number" in fields:
            answer["display_phone_number"] = display
        if "verified_name" in fields:
            answer["verified_name"] = name
        return 200, answer

    def _message(self, number: str, raw: bytes) -> tuple[int, Any]:
        try:
            body = json.loads(raw)
        except ValueError:
            return _error(400, 100, "(#100) Invalid parameter")
        problem = _invalid(body)
        if problem:
            return _error(400, 100, f"(#100) {problem}")
        if body["to"] in self.outside_window:
            return _error(
                400,
                131047,
                "(#131047) Re-engagement message: more than 24 hours have passed since the "
                "recipient last replied to the sender number.",
            )
        wamid = f"wamid.HBgLMTU1NTAxMDQ0MjEVAgARGBI{next(_ids):08d}"
        self.sent.append({"phone_number_id": number, **body, "id": wamid})
        return 200, {
            "messaging_product": "whatsapp",
            "contacts": [{"input": body["to"], "wa_id": body["to"].lstrip("+")}],
            "messages": [{"id": wamid}],
        }


def _invalid(body: Any) -> str | None:
    """Meta's refusal of a text message body, or None."""
    if not isinstance(body, dict):
        return "Invalid parameter"
    if body.get("messaging_product") != "whatsapp":
        return "The parameter messaging_product is required."
    if not isinstance(body.get("to"), str) or not body["to"]:
        return "The parameter to is required."
    if body.get("recipient_type", "individual") != "individual":
        return "Param recipient_type must be one of {INDIVIDUAL, GROUP}"
    if body.get("type", "text") != "text":
        return "This test fake sends only text messages."
    text = body.get("text")
    if not isinstance(text, dict) or not isinstance(text.get("body"), str) or not text["body"]:
        return "The parameter text['body'] is required."
    if len(text["body"]) > 4096:
        return "Param text['body'] must be at most 4096 characters long."
    if not isinstance(text.get("preview_url", False), bool):
        return "Param text['preview_url'] must be a boolean."
    return None


def text_notification(
    text: str,
    *,
    sender: str = "16315551181",
    name: str = "Kerry Fisher",
    wamid: str = "wamid.ID",
    phone_number_id: str = PHONE_NUMBER_ID,
    timestamp: str = "1700000000",
) -> dict[str, Any]:
    """A ``messages`` notification for one text message, shaped as Meta's
    reference shows it."""
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": WABA_ID,
                "changes": [
                    {
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550104421",
                                "phone_number_id": phone_number_id,
                            },
                            "contacts": [{"profile": {"name": name}, "wa_id": sender}],
                            "messages": [
                                {
                                    "from": sender,
                                    "id": wamid,
                                    "timestamp": timestamp,
                                    "text": {"body": text},
                                    "type": "text",
                                }
                            ],
                        },
                        "field": "messages",
                    }
                ],
            }
        ],
    }


def status_notification(wamid: str = "wamid.ID", status: str = "delivered") -> dict[str, Any]:
    """A ``statuses`` notification (a delivery receipt of a sent message)."""
    return {
        "object": "whatsapp_business_account",
        "entry": [
            {
                "id": WABA_ID,
                "changes": [
                    {
                        "value": {
                            "messaging_product": "whatsapp",
                            "metadata": {
                                "display_phone_number": "15550104421",
                                "phone_number_id": PHONE_NUMBER_ID,
                            },
                            "statuses": [
                                {
                                    "id": wamid,
                                    "status": status,
                                    "timestamp": "1700000100",
                                    "recipient_id": "16315551181",
                                    "conversation": {
                                        "id": "CONVERSATION_ID",
                                        "origin": {"type": "service"},
                                    },
                                    "pricing": {
                                        "billable": True,
                                        "pricing_model": "PMP",
                                        "category": "service",
                                    },
                                }
                            ],
                        },
                        "field": "messages",
                    }
                ],
            }
        ],
    }


class MetaWebhooks:
    """Meta's side of a webhook: the verification handshake and signed
    notifications, either as ``InboundRequest`` values (for an adapter) or sent
    over HTTP to a loopback URL (for the service)."""

    def __init__(self, app_secret: str = APP_SECRET, verify_token: str = VERIFY_TOKEN) -> None:
        self.app_secret = app_secret
        self.verify_token = verify_token

    def signature(self, body: bytes) -> str:
        digest = hmac.new(self.app_secret.encode(), body, hashlib.sha256).hexdigest()
        return f"sha256={digest}"

    def verification(self, challenge: str = "1158201444") -> dict[str, str]:
        return {
            "hub.mode": "subscribe",
            "hub.challenge": challenge,
            "hub.verify_token": self.verify_token,
        }

    def request(self, payload: dict[str, Any]) -> InboundRequest:
        body = json.dumps(payload).encode()
        return InboundRequest(
            method="POST",
            headers={
                "content-type": "application/json",
                "x-hub-signature-256": self.signature(body),
            },
            query={},
            body=body,
        )

    async def verify(self, url: str, challenge: str = "1158201444") -> bool:
        """Meta's check when the URL is saved in its console: the endpoint must
        answer the challenge, as is, with a 200."""
        assert url.startswith(("http://127.0.0.1", "http://localhost"))  # loopback only
        async with httpx.AsyncClient() as http:
            resp = await http.get(url, params=self.verification(challenge))
        return resp.status_code == 200 and resp.text == challenge

    async def deliver(self, url: str, payload: dict[str, Any]) -> httpx.Response:
        assert url.startswith(("http://127.0.0.1", "http://localhost"))  # loopback only
        request = self.request(payload)
        async with httpx.AsyncClient() as http:
            return await http.post(url, content=request.body, headers=dict(request.headers))


def main(argv: list[str] | None = None) -> None:
    """A local try: ``serve`` the fake Graph API on a loopback port, or be Meta
    posting to a channel: ``verify URL`` (the handshake) and ``send URL TEXT`` (a
    signed text message). The token, app secret and verify token are this module's
    unless given."""
    parser = argparse.ArgumentParser(prog="python -m tests.fakes.whatsapp_cloud")
    parser.add_argument("command", choices=("serve", "verify", "send"))
    parser.add_argument("url", nargs="?", default="")
    parser.add_argument("text", nargs="?", default="Hello from the fake WhatsApp")
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--app-secret", default=APP_SECRET)
    parser.add_argument("--verify-token", default=VERIFY_TOKEN)
    parser.add_argument("--from", dest="sender", default="16315551181")
    args = parser.parse_args(argv)
    meta = MetaWebhooks(args.app_secret, args.verify_token)
    if args.command == "serve":
        uvicorn.run(FakeGraph(), host="127.0.0.1", port=args.port, log_level="info")
    elif args.command == "verify":
        print("verified" if asyncio.run(meta.verify(args.url)) else "refused")
    else:
        wamid = f"wamid.local{next(_ids):08d}"
        payload = text_notification(args.text, sender=args.sender, wamid=wamid)
        print(asyncio.run(meta.deliver(args.url, payload)).status_code)


if __name__ == "__main__":
    main()
