"""The event webhooks' sender: one POST of a signed event to an endpoint
(docs/webhooks.md).

Every connection goes through the outbound guard (``agentsvc_adapters.outbound``);
redirects are not followed (a 3xx is a failed attempt like any other non-2xx);
the whole exchange is bounded by the timeout and at most ``MAX_ANSWER_BYTES`` of
the answer are read (then it is dropped: only its status counts). Failures are
answers, never exceptions, and name no header (the signature stays out of logs).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping

import httpx

from agentsvc_adapters.outbound import OutboundGuard, failure, note_refusal, refusal_of
from agentsvc_core.ports.event_webhooks import EventWebhookSender, SendAnswer

__all__ = ["HttpEventWebhookSender"]

log = logging.getLogger("agentsvc.event_webhooks")

MAX_ANSWER_BYTES = 64 * 1024


class HttpEventWebhookSender(EventWebhookSender):
    def __init__(self, guard: OutboundGuard) -> None:
        self._guard = guard
        self._http = guard.http_client(timeout=15.0)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def send(
        self, url: str, headers: Mapping[str, str], body: bytes, timeout_s: float
    ) -> SendAnswer:
        started = time.monotonic()

        def answer(status_code: int | None, error: str | None) -> SendAnswer:
            elapsed = int((time.monotonic() - started) * 1000)
            return SendAnswer(status_code=status_code, error=error, duration_ms=elapsed)

        why = self._guard.refusal(url)
        if why:
            note_refusal(f"event webhook: {why}")
            return answer(None, why)
        try:
            async with (
                asyncio.timeout(timeout_s),
                self._http.stream(
                    "POST", url, content=body, headers=dict(headers), timeout=timeout_s
                ) as resp,
            ):
                read = 0
                async for chunk in resp.aiter_bytes():
                    read += len(chunk)
                    if read > MAX_ANSWER_BYTES:
                        break
                ok = 200 <= resp.status_code < 300
                return answer(resp.status_code, None if ok else f"HTTP {resp.status_code}")
        except (httpx.TimeoutException, TimeoutError):
            return answer(None, f"no answer within {timeout_s:g} s")
        except ValueError:
            return answer(None, "the request could not be built")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            refusal = refusal_of(exc)
            if refusal is not None:
                return answer(None, refusal)
            why = failure(exc, url)
            log.info("event webhook delivery failed: %s", why)
            return answer(None, why)
