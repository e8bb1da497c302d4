"""The credential-resolver webhook client (docs/byok.md).

Signed with ``X-Service-*`` (``agentsvc_adapters.signing``). Redirects are
not followed, answers over 64 KiB are refused, the whole call is bounded by the
configured timeout, and every failure means "use the platform key", answered with
its outcome (``ResolverOutcome``: refused, timeout, unreachable, status,
too_large, malformed) so the turn's trace says why. The key that comes back is
never logged. Every connection goes through the outbound guard
(``agentsvc_adapters.outbound``): the URL is checked when it is used and the
address it resolves to when connecting.
"""

from __future__ import annotations

import asyncio
import logging

import httpx
import msgspec

from agentsvc_adapters.outbound import OutboundGuard, failure, note_refusal, refusal_of
from agentsvc_adapters.signing import signed_headers
from agentsvc_core.ports.resolver import CredentialResolver, Resolution, ResolverRequest

log = logging.getLogger("agentsvc.resolver")
_MAX_BYTES = 64 * 1024
_encoder = msgspec.json.Encoder()
_REFUSED = Resolution(None, "refused")


class _Answer(msgspec.Struct, rename="camel"):
    api_key: str | None = None
    source: str | None = None


_decoder = msgspec.json.Decoder(_Answer)


class HttpCredentialResolver(CredentialResolver):
    def __init__(self, guard: OutboundGuard) -> None:
        self._guard = guard
        # the per-call deadline replaces this timeout (see resolve)
        self._http = guard.http_client(timeout=5.0)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def resolve(
        self, url: str, request: ResolverRequest, secrets: list[str], timeout_ms: int
    ) -> Resolution:
        why = self._guard.refusal(url)
        if why:
            note_refusal(f"credential resolver: {why}")
            return _REFUSED
        body = _encoder.encode(request)
        headers = {"Content-Type": "application/json", **signed_headers(secrets, body)}
        deadline = timeout_ms / 1000
        try:
            # asyncio.timeout bounds the whole exchange: connect, headers and body
            async with (
                asyncio.timeout(deadline),
                self._http.stream(
                    "POST", url, content=body, headers=headers, timeout=deadline
                ) as resp,
            ):
                if resp.status_code != 200:
                    log.info("credential resolver answered %s: platform key", resp.status_code)
                    return Resolution(None, "status", resp.status_code)
                raw = b""
                async for chunk in resp.aiter_bytes():
                    raw += chunk
                    if len(raw) > _MAX_BYTES:
                        log.info("credential resolver answer too large: platform key")
                        return Resolution(None, "too_large")
        # httpx's own timeouts (the per-request one equals the deadline) and the
        # deadline's are one outcome: the answer did not come in time
        except (httpx.TimeoutException, TimeoutError):
            log.info("credential resolver timed out: platform key")
            return Resolution(None, "timeout")
        except (httpx.HTTPError, httpx.InvalidURL) as exc:
            log.info("credential resolver: %s: platform key", failure(exc, url))
            # the guard refuses at connect time too (a name resolving to a private address)
            return _REFUSED if refusal_of(exc) is not None else Resolution(None, "unreachable")
        try:
            answer = _decoder.decode(raw)
        except (msgspec.DecodeError, msgspec.ValidationError):
            log.info("credential resolver answer is malformed: platform key")
            return Resolution(None, "malformed")
        if answer.api_key:
            return Resolution(answer.api_key, "key")
        return Resolution(None, "platform")
