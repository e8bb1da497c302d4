"""Hardening headers on every answer, set in the one place every answer passes.

A Litestar ``before_send`` hook sees each ASGI message the app sends, on every
route and on the framework's own answers (an unknown route's 404, a 405, an
error raised before routing), so a new route cannot forget them. It only touches
``http.response.start``, so a streamed answer (Server-Sent Events) is not
buffered.

- ``X-Content-Type-Options: nosniff`` everywhere: a browser must not guess a
  script or a page out of a JSON or text answer.
- ``Cache-Control: no-store`` on every ``/api/`` answer: they are one
  organization's data, and some carry secrets (a new API key, the webhook
  signing secret). Per-route choices could be forgotten by a new route that
  shows a secret; one rule for the whole prefix cannot. The OpenAPI document and
  ``/healthz`` are public and may be cached, and so may the one exception under
  the prefix, ``/api/public/avatars/``: public pictures whose URL names their
  digest, which keep the ``Cache-Control`` their route gives.
- ``Content-Security-Policy`` (and no ``Referer``) on the playground's files
  (``agentsvc_web.playground_ui``): its page runs no inline script or style and
  talks to this origin only. Not on ``/schema``, whose viewers use inline script.
"""

from __future__ import annotations

from litestar.datastructures import MutableScopeHeaders
from litestar.types import Message, Scope

from agentsvc_web.playground_ui import PLAYGROUND_CSP, PLAYGROUND_PATH

__all__ = ["hardening_headers"]

PUBLIC_PICTURES = "/api/public/avatars/"


async def hardening_headers(message: Message, scope: Scope) -> None:
    if message["type"] != "http.response.start":
        return
    headers = MutableScopeHeaders.from_message(message)
    headers["X-Content-Type-Options"] = "nosniff"
    if scope["path"].startswith("/api/") and not scope["path"].startswith(PUBLIC_PICTURES):
        headers["Cache-Control"] = "no-store"
    path = scope["path"]
    if path == PLAYGROUND_PATH or path.startswith(PLAYGROUND_PATH + "/"):
        headers["Content-Security-Policy"] = PLAYGROUND_CSP
        headers["Referrer-Policy"] = "no-referrer"
