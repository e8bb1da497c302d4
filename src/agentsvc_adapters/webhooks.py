"""The webhook-tool caller: one signed HTTP call to an organization's endpoint.

Signed with ``X-Service-*`` exactly as the credential resolver
(``agentsvc_adapters.signing``), with the tool's own headers and
``Idempotency-Key`` set to the tool call's id (a receiver can drop a retried
call). Every connection goes through the outbound guard
(``agentsvc_adapters.outbound``); redirects are not followed (a 3xx is an
answer like any other non-2xx); the whole exchange is bounded by the tool's
timeout and the answer by its size cap, read as it streams in. Failures are
answers (``WebhookAnswer.outcome``), never exceptions, and say nothing of the
tool's headers.
"""

from __future__ import annotations

import asyncio
import logging
import time

import httpx

from agentsvc_adapters.outbound import OutboundGuard, failure, note_refusal, refusal_of
from agentsvc_adapters.signing import signed_headers
from agentsvc_core.ports.webhooks import WebhookAnswer, WebhookCall, WebhookCaller

__all__ = ["HttpWebhookCaller"]

log = logging.getLogger("agentsvc.webhooks")


class HttpWebhookCaller(WebhookCaller):
    def __init__(self, guard: OutboundGuard) -> None:
        self._guard = guard
        # one pooled client for every webhook tool; each call sets its own deadline
        self._http = guard.http_client(timeout=10.0)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def call(self, request: WebhookCall) -> WebhookAnswer:
        started = time.monotonic()

        def answer(**kw: object) -> WebhookAnswer:
            elapsed = int((time.monotonic() - started) * 1000)
            return WebhookAnswer(duration_ms=elapsed, **kw)  # type: ignore[arg-type]

        why = self._guard.refusal(request.url)
        if why:
            note_refusal(f"webhook tool: {why}")
            return answer(outcome="refused", reason=why)
        headers = {
            **request.headers,
            "Content-Type": "application/json",
            **signed_headers(request.secrets, request.body),
        }
        if request.idempotency_key:
            headers["Idempotency-Key"] = request.idempotency_key
        deadline = request.timeout_ms / 1000
        try:
            async with (
                asyncio.timeout(deadline),
                self._http.stream(
                    request.method,
                    request.url,
                    content=request.body,
                    headers=headers,
                    timeout=deadline,
                ) as resp,
            ):
                raw = bytearray()
                async for chunk in resp.aiter_bytes():
                    raw += chunk
                    if len(raw) > request.max_bytes:
                        return answer(
                            outcome="too_large",
                            status_code=resp.status_code,
                            reason=f"larger than {request.max_bytes} bytes",
                        )
                ok = 200 <= resp.status_code < 300
                return answer(
                    outcome="ok" if ok else "status",
                    status_code=resp.status_code,
                    body=raw.decode("utf-8", errors="replace"),
                    content_type=resp.headers.get("content-type", ""),
                )
        except (httpx.TimeoutException, TimeoutError):
            return answer(outcome="timeout", reason=f"no answer within {request.timeout_ms} ms")
        except ValueError:
            # a request httpx cannot build (a header it cannot encode): no call made
            return answer(outcome="unreachable", reason="the request could not be built")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            refusal = refusal_of(exc)
            if refusal is not None:
                return answer(outcome="refused", reason=refusal)
            why = failure(exc, request.url)
            log.info("webhook tool call failed: %s", why)
            return answer(outcome="unreachable", reason=why)
