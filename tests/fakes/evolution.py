"""A loopback fake of the WhatsApp Web sidecar: the part of Evolution API v2's HTTP
interface the ``whatsapp_web`` adapter speaks, as strict as Evolution API. Serve it
with ``tests.web.live.serve(FakeEvolution())``; point ``AGENTSVC_WHATSAPP_WEB_URL``
at it with ``AGENTSVC_WHATSAPP_WEB_API_KEY=EVOLUTION_KEY``.

Every route needs the ``apikey`` header (401 otherwise). Instances are made by
``POST /instance/create`` (403 for a name in use) and start ``close``;
``GET /instance/connect/{name}`` turns them ``connecting`` and answers a fresh QR
``code`` each call (``count`` goes up; ``{"count": 0}`` while ``qr_ready`` is
False); ``GET /instance/connectionState/{name}``; ``POST /webhook/set/{name}``;
``POST /message/sendText/{name}`` (``sent`` records it; 500 ``Connection Closed``,
as Baileys says, when the instance is not open;
``fail_next`` queues HTTP statuses to answer instead); ``answer_next`` queues raw
answers ``(status, body)`` given whatever is asked; ``DELETE
/instance/logout/{name}`` and ``DELETE /instance/delete/{name}``.

Test hooks, which post to the instance's webhook with the headers it was given:
``scan(name)`` is a phone scanning the QR (the instance turns ``open`` and a
``connection.update`` is posted); ``deliver(name, data)`` posts a
``messages.upsert``; ``close(name, status)`` posts the session closing.
``WebhookInbox`` is a receiver to point the webhook at, which records requests.
"""

from __future__ import annotations

import itertools
import json
import secrets
from typing import Any

import httpx

from agentsvc_core.ports.channel_platforms import InboundRequest

__all__ = ["EVOLUTION_KEY", "OWN_JID", "FakeEvolution", "WebhookInbox", "text_message"]

EVOLUTION_KEY = "429683C4C977415CAAFCCE10F7D57E11"
OWN_JID = "5511988887777@s.whatsapp.net"
EVENTS = frozenset(
    {
        "APPLICATION_STARTUP",
        "QRCODE_UPDATED",
        "MESSAGES_SET",
        "MESSAGES_UPSERT",
        "MESSAGES_UPDATE",
        "MESSAGES_DELETE",
        "SEND_MESSAGE",
        "CONTACTS_UPSERT",
        "CONNECTION_UPDATE",
        "GROUPS_UPSERT",
    }
)
_ids = itertools.count(1)


def _refusal(status: int, message: Any) -> tuple[int, Any]:
    names = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found"}
    error = names.get(status, "Internal Server Error")
    return status, {"status": status, "error": error, "response": {"message": message}}


def _webhook_problem(webhook: Any) -> str | None:
    if not isinstance(webhook, dict) or not isinstance(webhook.get("url"), str):
        return "webhook.url is required"
    events = webhook.get("events", [])
    if not isinstance(events, list) or not set(events) <= EVENTS:
        return "webhook.events must be event names such as MESSAGES_UPSERT"
    headers = webhook.get("headers", {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        return "webhook.headers must be an object of strings"
    return None


class FakeEvolution:
    def __init__(self, api_key: str = EVOLUTION_KEY) -> None:
        self.api_key = api_key
        self.instances: dict[str, dict[str, Any]] = {}
        self.sent: list[dict[str, Any]] = []
        self.fail_next: list[int] = []
        # raw answers to give next, whatever was asked: (status, JSON body)
        self.answer_next: list[tuple[int, Any]] = []
        self.qr_ready = True  # False: the session is starting, no QR code yet
        self.requests: list[tuple[str, str]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            event = await receive()
            raw += event.get("body", b"")
            if not event.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        self.requests.append((scope["method"], scope["path"]))
        if self.answer_next:
            status, answer = self.answer_next.pop(0)
        elif headers.get("apikey") != self.api_key:
            status, answer = _refusal(401, "Unauthorized")
        elif scope["path"].startswith("/_test/"):
            status, answer = await self._test_hook(scope["path"], raw)
        else:
            try:
                body = json.loads(raw) if raw else None
            except ValueError:
                body = None
                status, answer = _refusal(400, ["the body is not JSON"])
            else:
                status, answer = self._route(scope["method"], scope["path"], body)
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": json.dumps(answer).encode()})

    def _route(self, method: str, path: str, body: Any) -> tuple[int, Any]:
        parts = path.strip("/").split("/")
        if (method, path) == ("POST", "/instance/create"):
            return self._create(body)
        if len(parts) != 3:
            return _refusal(404, ["Cannot " + method + " " + path])
        group, action, name = parts
        if name not in self.instances:
            return _refusal(404, [f'The "{name}" instance does not exist'])
        instance = self.instances[name]
        match method, group, action:
            case "GET", "instance", "connectionState":
                return 200, {"instance": {"instanceName": name, "state": instance["state"]}}
            case "GET", "instance", "connect":
                return self._connect(name, instance)
            case "POST", "webhook", "set":
                webhook = body.get("webhook") if isinstance(body, dict) else None
                problem = _webhook_problem(webhook)
                if problem or not isinstance(webhook, dict):
                    return _refusal(400, [problem])
                instance["webhook"] = webhook
                return 201, {"webhook": {"instanceName": name, **webhook}}
            case "POST", "message", "sendText":
                return self._send(name, instance, body)
            case "DELETE", "instance", "logout":
                if instance["state"] != "open":
                    return _refusal(400, [f'The "{name}" instance is not connected'])
                instance["state"] = "close"
                return 200, {"status": "SUCCESS", "error": False, "response": {"message": "ok"}}
            case "DELETE", "instance", "delete":
                del self.instances[name]
                return 200, {"status": "SUCCESS", "error": False, "response": {"message": "ok"}}
        return _refusal(404, ["Cannot " + method + " " + path])

    def _create(self, body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("instanceName"), str):
            return _refusal(400, ["instanceName is required"])
        name = body["instanceName"]
        if body.get("integration") not in ("WHATSAPP-BAILEYS", "WHATSAPP-BUSINESS", "EVOLUTION"):
            return _refusal(400, ["Invalid integration"])
        if name in self.instances:
            return _refusal(403, [f'This name "{name}" is already in use.'])
        webhook = body.get("webhook")
        if webhook is not None and (problem := _webhook_problem(webhook)):
            return _refusal(400, [problem])
        self.instances[name] = {"state": "close", "webhook": webhook, "count": 0, "code": None}
        answer: dict[str, Any] = {
            "instance": {
                "instanceName": name,
                "instanceId": f"af6c5b7c-ee27-4f94-9ea8-{next(_ids):012d}",
                "integration": body["integration"],
                "status": "connecting",
            },
            "hash": secrets.token_hex(16).upper(),
            "webhook": webhook or {},
        }
        if body.get("qrcode") is True:
            answer["qrcode"] = self._connect(name, self.instances[name])[1]
        return 201, answer

    def _connect(self, name: str, instance: dict[str, Any]) -> tuple[int, Any]:
        if instance["state"] == "open":
            return 200, {"instance": {"instanceName": name, "state": "open"}}
        instance["state"] = "connecting"
        if not self.qr_ready:
            return 200, {"count": 0}
        instance["count"] += 1
        instance["code"] = (
            f"2@{secrets.token_urlsafe(48)},{secrets.token_urlsafe(32)},"
            f"{secrets.token_urlsafe(32)},{secrets.token_urlsafe(32)}"
        )
        return 200, {"pairingCode": None, "code": instance["code"], "count": instance["count"]}

    def _send(self, name: str, instance: dict[str, Any], body: Any) -> tuple[int, Any]:
        if not isinstance(body, dict) or not isinstance(body.get("number"), str):
            return _refusal(400, ["number is required"])
        if not isinstance(body.get("text"), str) or not body["text"]:
            return _refusal(400, ["text is required"])
        if self.fail_next:
            return _refusal(self.fail_next.pop(0), ["injected by the test"])
        if instance["state"] != "open":
            return _refusal(500, "Connection Closed")
        number = body["number"]
        jid = number if "@" in number else f"{number}@s.whatsapp.net"
        key_id = f"3EB0{next(_ids):016X}"
        self.sent.append({"instance": name, "number": number, "text": body["text"], "id": key_id})
        return 201, {
            "key": {"remoteJid": jid, "fromMe": True, "id": key_id},
            "message": {"extendedTextMessage": {"text": body["text"]}},
            "messageTimestamp": "1700000200",
            "status": "PENDING",
        }

    # test hooks: what the phone and WhatsApp do

    async def _test_hook(self, path: str, raw: bytes) -> tuple[int, Any]:
        """For a local try over HTTP (not Evolution API's): ``POST /_test/scan/{name}``
        and ``POST /_test/deliver/{name}`` ``{"text", "from"?}``."""
        _, _, action, name = path.split("/", 3)
        if name not in self.instances or self.instances[name]["webhook"] is None:
            return _refusal(404, [f'The "{name}" instance does not exist'])
        if action == "scan" and self.instances[name]["state"] == "connecting":
            resp = await self.scan(name)
        elif action == "deliver":
            body = json.loads(raw or b"{}")
            chat = str(body.get("from", "5511912345678")).split("@")[0] + "@s.whatsapp.net"
            data = text_message(str(body.get("text", "hi")), chat=chat, key_id=f"3EB0L{next(_ids)}")
            resp = await self.deliver(name, data)
        else:
            return _refusal(400, ["scan needs a QR code shown first (GET /instance/connect)"])
        return 200, {"webhook_status": resp.status_code}

    async def _post(self, name: str, event: str, data: Any) -> httpx.Response:
        webhook = self.instances[name]["webhook"]
        url = webhook["url"]
        assert url.startswith(("http://127.0.0.1", "http://localhost"))  # loopback only
        payload = {
            "event": event,
            "instance": name,
            "data": data,
            "destination": url,
            "date_time": "2026-11-27T23:30:00.000Z",
            "sender": OWN_JID,
            "server_url": "http://127.0.0.1",
            "apikey": "B6D711FCDE4D4FD5936544120E713976",
        }
        async with httpx.AsyncClient() as http:
            return await http.post(url, json=payload, headers=webhook.get("headers", {}))

    async def scan(self, name: str) -> httpx.Response:
        instance = self.instances[name]
        assert instance["state"] == "connecting", "no QR code to scan"
        assert instance["code"], "no QR code to scan"
        instance["state"] = "open"
        return await self._post(
            name,
            "connection.update",
            {
                "instance": name,
                "wuid": OWN_JID,
                "profileName": "Tea Garden",
                "profilePictureUrl": None,
                "state": "open",
                "statusReason": 200,
            },
        )

    async def close(self, name: str, status_reason: int = 401) -> httpx.Response:
        self.instances[name]["state"] = "close"
        data = {"instance": name, "state": "close", "statusReason": status_reason}
        return await self._post(name, "connection.update", data)

    async def deliver(self, name: str, data: dict[str, Any]) -> httpx.Response:
        return await self._post(name, "messages.upsert", data)


def text_message(
    text: str,
    *,
    chat: str = "5511912345678@s.whatsapp.net",
    participant: str | None = None,
    key_id: str = "3EB0C431C26A1916E0A2",
    push_name: str = "Ana Souza",
    from_me: bool = False,
    mentioned: list[str] | None = None,
) -> dict[str, Any]:
    """The ``data`` of a ``messages.upsert`` for one text message, as Evolution API
    v2 posts it (``extendedTextMessage`` when it mentions someone)."""
    key: dict[str, Any] = {"remoteJid": chat, "fromMe": from_me, "id": key_id}
    if participant is not None:
        key["participant"] = participant
    if mentioned is None:
        message: dict[str, Any] = {"conversation": text}
        kind = "conversation"
    else:
        message = {
            "extendedTextMessage": {"text": text, "contextInfo": {"mentionedJid": mentioned}}
        }
        kind = "extendedTextMessage"
    return {
        "key": key,
        "pushName": push_name,
        "status": "DELIVERY_ACK",
        "message": message,
        "messageType": kind,
        "messageTimestamp": 1700000100,
        "instanceId": "af6c5b7c-ee27-4f94-9ea8-000000000001",
        "source": "android",
    }


class WebhookInbox:
    """An ASGI receiver for the sidecar's webhook: answers 200 and keeps each
    request as the ``InboundRequest`` the service's endpoint would build."""

    def __init__(self) -> None:
        self.requests: list[InboundRequest] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        raw = b""
        while True:
            event = await receive()
            raw += event.get("body", b"")
            if not event.get("more_body"):
                break
        self.requests.append(
            InboundRequest(
                method=scope["method"],
                headers={k.decode().lower(): v.decode() for k, v in scope["headers"]},
                query={},
                body=raw,
            )
        )
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})


if __name__ == "__main__":
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m tests.fakes.evolution")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--api-key", default=EVOLUTION_KEY)
    args = parser.parse_args()
    uvicorn.run(FakeEvolution(args.api_key), host="127.0.0.1", port=args.port, log_level="info")
