"""Request rate limits: per client address, per credential, and on failed authentication.

Three budgets, each a set of token buckets kept in this process's memory (see
docs/deploy.md, "Rate limits and request time limits"):

- per client address (``scope["client"]``: the socket peer, or the forwarded
  address when ``AGENTSVC_FORWARDED_ALLOW_IPS`` trusts the proxy; an IPv6
  address counts by its /64), for every request but the probes ``/healthz`` and
  ``/readyz``;
- failed authentications per client address: an address past its budget is
  refused before its credential is looked up, so guessing keys or forging tokens
  is throttled; a request that authenticates costs nothing from it. A failure is
  an answer of 401 (whether the authentication middleware or a route such as
  ``/metrics`` refused the credential), or of 404 from a route whose credential
  is a token in its URL (``TOKEN_IN_URL``: a runner's webhook and button);
- per credential (an API key's id, or a JWT's organization and user), checked
  once the request has authenticated.

A refusal is 429 ``RATE_LIMITED`` with ``Retry-After`` in whole seconds. The
check is a dictionary lookup and a few float operations, with no lock and no
await (the event loop runs one callback at a time), so it costs microseconds
(docs/deploy.md has the measured figure).
"""

from __future__ import annotations

import math
import socket
import time
from collections.abc import Callable, Hashable

from litestar.enums import ScopeType
from litestar.exceptions import NotAuthorizedException, TooManyRequestsException
from litestar.middleware import DefineMiddleware
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from agentsvc_core.entities import Principal
from agentsvc_core.errors import RateLimited, Unauthenticated
from agentsvc_web.settings import Settings

EXEMPT_PATHS = frozenset({"/healthz", "/readyz"})  # probes: load balancers call them often

# A route's ``opt``: its credential is a token in its URL (a runner trigger's), and
# a wrong one is answered 404 like any unknown id, so its 404s count as failed
# authentications.
TOKEN_IN_URL: dict[str, bool] = {"token_in_url": True}


class TokenBuckets:
    """One token bucket per key: a bucket holds up to ``per_min`` tokens and
    refills continuously at ``per_min / 60`` per second, so a client may send
    ``per_min`` requests at once, then one every ``60 / per_min`` seconds.

    Memory is bounded: at most ``max_keys`` buckets are kept. The dictionary is in
    least-recently-used order (a key is moved to the end on every use), so the
    buckets at its front are the idlest: a bucket idle for a full minute is full
    again, the same as no bucket, and is dropped when a new key arrives; past
    ``max_keys`` the least recently used one is dropped even if not full (that
    key starts again with a full bucket). Every operation is O(1) amortised.
    """

    def __init__(
        self,
        per_min: int,
        *,
        max_keys: int = 50_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if per_min < 1 or max_keys < 1:
            raise ValueError("per_min and max_keys must be positive")
        self._capacity = float(per_min)
        self._rate = per_min / 60.0  # tokens per second
        self._max_keys = max_keys
        self._clock = clock
        self._buckets: dict[Hashable, tuple[float, float]] = {}  # key -> (tokens, when)

    def __len__(self) -> int:
        return len(self._buckets)

    def _level(self, key: Hashable, now: float) -> float:
        """The key's tokens now; its bucket is taken out of the dictionary (the
        caller puts it back at the end, the most recently used place)."""
        bucket = self._buckets.pop(key, None)
        if bucket is None:
            self._make_room(now)
            return self._capacity
        tokens, then = bucket
        return min(self._capacity, tokens + (now - then) * self._rate)

    def _make_room(self, now: float) -> None:
        buckets = self._buckets
        full_since = now - self._capacity / self._rate  # idle this long: full again
        for _ in range(2):  # two per new key: idle buckets go faster than keys come
            oldest = next(iter(buckets), None)
            if oldest is None or buckets[oldest][1] > full_since:
                break
            del buckets[oldest]
        if len(buckets) >= self._max_keys:
            del buckets[next(iter(buckets))]

    def take(self, key: Hashable) -> float:
        """Take a token from ``key``'s bucket: 0.0 when there was one, else the
        seconds until there will be (and nothing is taken)."""
        now = self._clock()
        tokens = self._level(key, now)
        self._buckets[key] = (tokens - 1.0 if tokens >= 1.0 else tokens, now)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self._rate

    def spend(self, key: Hashable, what: str) -> None:
        """Take a token for ``key``, or refuse: ``RateLimited`` (429 with
        ``Retry-After``), its detail naming ``what`` ("from this address")."""
        wait = self.take(key)
        if wait:
            raise RateLimited(f"too many requests {what}; try again later", int(wait) + 1)

    def wait(self, key: Hashable) -> float:
        """Like ``take``, but takes nothing: 0.0 when a token is there."""
        bucket = self._buckets.get(key)
        if bucket is None:
            return 0.0
        tokens, then = bucket
        tokens = min(self._capacity, tokens + (self._clock() - then) * self._rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self._rate


class RateLimits:
    """The three budgets; a limit of 0 turns its budget off (``None``)."""

    def __init__(
        self,
        per_credential: int,
        per_address: int,
        auth_failures: int,
        *,
        max_keys: int = 50_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        def buckets(per_min: int) -> TokenBuckets | None:
            return TokenBuckets(per_min, max_keys=max_keys, clock=clock) if per_min else None

        self.per_credential = buckets(per_credential)
        self.per_address = buckets(per_address)
        self.auth_failures = buckets(auth_failures)

    @classmethod
    def from_settings(cls, settings: Settings) -> RateLimits:
        return cls(
            settings.rate_limit_per_min,
            settings.rate_limit_per_address_per_min,
            settings.auth_failures_per_min,
            max_keys=settings.rate_limit_max_keys,
        )


def _refuse(wait: float, detail: str) -> TooManyRequestsException:
    """429 ``RATE_LIMITED`` (through the one error table) with ``Retry-After``."""
    return TooManyRequestsException(
        detail=detail, headers={"Retry-After": str(max(1, math.ceil(wait)))}
    )


def client_address(scope: Scope) -> str | bytes:
    """The client's address; an IPv6 one by its /64 network, the block one
    subscriber (one attacker) is usually given whole."""
    client = scope.get("client")
    address: str = client[0] if client else ""
    if ":" not in address or "." in address:  # IPv4, or IPv4 mapped into IPv6
        return address
    try:
        return socket.inet_pton(socket.AF_INET6, address)[:8]
    except OSError:
        return address


class AddressLimits:
    """Runs before authentication: the address's request budget and its budget of
    failed authentications. A failure is counted when authentication raises (the
    error is answered further out, by the app's handler), or when the answer sent
    through here is one (``_failed``: a route's own 401, a token route's 404)."""

    def __init__(self, app: ASGIApp, limits: RateLimits) -> None:
        self.app = app
        self._requests = limits.per_address
        self._failures = limits.auth_failures

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or scope["path"] in EXEMPT_PATHS:
            await self.app(scope, receive, send)
            return
        address = client_address(scope)
        failures = self._failures
        if failures is not None and (wait := failures.wait(address)):
            raise _refuse(wait, "too many failed authentications from this address")
        if self._requests is not None and (wait := self._requests.take(address)):
            raise _refuse(wait, "too many requests from this address")
        if failures is None:
            await self.app(scope, receive, send)
            return
        failing = _failed(scope)

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start" and message["status"] in failing:
                failures.take(address)
            await send(message)

        try:  # free in Python 3.11 when nothing is raised
            await self.app(scope, receive, watched)
        except (Unauthenticated, NotAuthorizedException):
            failures.take(address)
            raise


def _failed(scope: Scope) -> frozenset[int]:
    """The statuses that are failed authentications on this request's route."""
    handler = scope.get("route_handler")
    opt = getattr(handler, "opt", None) or {}
    return _TOKEN_FAILURES if opt.get("token_in_url") else _FAILURES


_FAILURES = frozenset({401})
_TOKEN_FAILURES = frozenset({401, 404})


class CredentialLimits:
    """Runs after authentication: the budget of the credential that authenticated
    (routes without authentication, such as the OAuth callback, have none)."""

    def __init__(self, app: ASGIApp, limits: RateLimits) -> None:
        self.app = app
        self._buckets = limits.per_credential

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        user = scope.get("user")
        if self._buckets is not None and isinstance(user, Principal):
            key = user.key_id or (user.org_id, user.user_id)
            if wait := self._buckets.take(key):
                raise _refuse(wait, "too many requests with this credential")
        await self.app(scope, receive, send)


def rate_limits(limits: RateLimits) -> tuple[DefineMiddleware, DefineMiddleware]:
    """The two middlewares: put the first before authentication, the second after."""
    return DefineMiddleware(AddressLimits, limits=limits), DefineMiddleware(
        CredentialLimits, limits=limits
    )


__all__ = [
    "TOKEN_IN_URL",
    "AddressLimits",
    "CredentialLimits",
    "RateLimits",
    "TokenBuckets",
    "client_address",
    "rate_limits",
]
