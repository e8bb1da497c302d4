"""A webhook-tool receiver: verifies agentsvc's signature, refuses stale or replayed
calls, and answers the tool call.

    AGENTSVC_SIGNING_SECRET=whsec_... python docs/examples/webhook_tool_receiver.py 9001

Standard library only. agentsvc POSTs (or PUTs/PATCHes, as the tool says) the JSON
``{"tool", "toolCallId", "arguments", "orgId", "agentId", "threadId", "userId"}``
with an ``Idempotency-Key`` (the same for a retried call) and the signature the
credential resolver gets too (docs/byok.md): X-Service-Signature = lowercase hex
HMAC-SHA256, keyed with the UTF-8 bytes of the organization's signing secret, over
"{X-Service-Timestamp}.{X-Service-Nonce}.{raw body}"; during a secret rotation the
header carries two signatures separated by a space: accept the call if any matches.
Whatever a 2xx answer's body says is what the model reads; any other status is an
error the model is told about.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MAX_AGE_S = 300  # reject timestamps older than 5 minutes
_seen_nonces: dict[str, float] = {}  # in production: a shared store with expiry


def verify(
    secret: str, headers: dict[str, str], body: bytes, now: float | None = None
) -> str | None:
    """None when the call is authentic and fresh, else the reason to refuse it.
    ``headers``: names in lowercase."""
    now = time.time() if now is None else now
    timestamp = headers.get("x-service-timestamp", "")
    nonce = headers.get("x-service-nonce", "")
    signatures = headers.get("x-service-signature", "").split()
    if not timestamp.isdigit() or abs(now - int(timestamp)) > MAX_AGE_S:
        return "stale or missing timestamp"
    expected = hmac.new(
        secret.encode("utf-8"), f"{timestamp}.{nonce}.".encode() + body, hashlib.sha256
    ).hexdigest()
    if not any(hmac.compare_digest(expected, s) for s in signatures):
        return "bad signature"
    for old, seen_at in list(_seen_nonces.items()):  # forget nonces older than the window
        if now - seen_at > MAX_AGE_S:
            del _seen_nonces[old]
    if not nonce or nonce in _seen_nonces:
        return "replayed nonce"
    _seen_nonces[nonce] = now
    return None


def lookup_order(arguments: dict[str, object]) -> dict[str, object]:
    """Your tool: here, an order's status from your own system."""
    return {"orderId": arguments["orderId"], "status": "shipped", "eta": "2026-12-01"}


TOOLS = {"lookup_order": lookup_order}


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        if verify(os.environ["AGENTSVC_SIGNING_SECRET"], headers, body) is not None:
            self._answer(401, {"error": "unauthenticated"})
            return
        call = json.loads(body)
        tool = TOOLS.get(call["tool"])
        if tool is None:
            self._answer(404, {"error": f"no tool {call['tool']}"})
            return
        self._answer(200, tool(call["arguments"]))

    do_PUT = do_PATCH = do_POST

    def _answer(self, status: int, payload: object) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
