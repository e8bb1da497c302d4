"""A credential-resolver receiver: verifies agentsvc's signature, refuses stale or
replayed calls, and answers with the user's key (or null for the platform key).

    AGENTSVC_SIGNING_SECRET=whsec_... python docs/examples/resolver_receiver.py 9000

Standard library only. The signature (docs/byok.md):
X-Service-Signature = lowercase hex HMAC-SHA256, keyed with the UTF-8 bytes of the
organization's signing secret, over "{X-Service-Timestamp}.{X-Service-Nonce}.{raw body}".
During a secret rotation the header carries two signatures separated by a space;
accept the call if any of them matches.
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
    """None when the call is authentic and fresh, else the reason to refuse it."""
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


def key_for(user_id: str, provider: str) -> str | None:
    """Look the user's own key up in your system; None means: use the platform key."""
    return {"alice": "sk-alice-own-key"}.get(user_id)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = {k.lower(): v for k, v in self.headers.items()}
        reason = verify(os.environ["AGENTSVC_SIGNING_SECRET"], headers, body)
        if reason is not None:
            self.send_response(401)
            self.end_headers()
            return
        call = json.loads(body)  # {"userId", "orgId", "provider", "model"}
        key = key_for(call["userId"], call["provider"])
        answer = json.dumps({"apiKey": key, "source": "byok" if key else "platform"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
