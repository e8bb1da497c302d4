"""The docs' example receivers (docs/examples), loaded as modules, and a loopback
endpoint that checks the service's signed calls with the webhook receiver's
``verify``: the customer's side of webhook tools, runner steps and the docs'
walk-throughs."""

from __future__ import annotations

import functools
import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


@functools.cache
def load_example(name: str) -> ModuleType:
    """``docs/examples/<name>.py`` as a module (once per session)."""
    spec = importlib.util.spec_from_file_location(f"docs_example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


async def read_request(scope: dict[str, Any], receive: Any) -> tuple[bytes, dict[str, str]]:
    """An ASGI request's whole body and its headers (names lower-case, as sent)."""
    body = b""
    while True:
        m = await receive()
        body += m.get("body", b"")
        if not m.get("more_body"):
            break
    return body, {k.decode(): v.decode() for k, v in scope["headers"]}


class SignedReceiver:
    """An endpoint that records each call and whether its signature verified with
    ``secret`` (the organization's signing secret; set it once it is known), and
    answers 200 ``{"accepted": true}`` to a verified call, 401 to any other."""

    def __init__(self) -> None:
        self.secret = ""
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body, headers = await read_request(scope, receive)
        verified = load_example("webhook_tool_receiver").verify(self.secret, headers, body) is None
        self.calls.append(
            {
                "path": scope["path"],
                "headers": headers,
                "body": json.loads(body),
                "verified": verified,
            }
        )
        await send(
            {
                "type": "http.response.start",
                "status": 200 if verified else 401,
                "headers": [(b"content-type", b"application/json")],
            }
        )
        await send({"type": "http.response.body", "body": b'{"accepted": true}'})
