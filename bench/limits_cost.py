"""CPU per request of the request limits (docs/deploy.md, "Rate limits and request
time limits"): ``python bench/limits_cost.py``.

Times, on uvloop, one request through each of the limit middlewares around an ASGI
app that reads its body once and answers, minus the same app called bare: the
address budget and the failed-authentication check (``AddressLimits``), the
credential budget (``CredentialLimits``), the body read deadline
(``BodyDeadline``); and ``TokenBuckets.take`` alone among 100,000 tracked keys.
"""

from __future__ import annotations

import time
import timeit
import uuid
from typing import Any

import uvloop

from agentsvc_core.entities import Principal
from agentsvc_web.limits import AddressLimits, CredentialLimits, RateLimits, TokenBuckets
from agentsvc_web.read_timeout import BodyDeadline

N = 200_000
BODY = {"type": "http.request", "body": b'{"content": "hi"}', "more_body": False}


async def receive() -> Any:
    return BODY


async def send(_: Any) -> None:
    return None


async def app(scope: Any, receive: Any, send: Any) -> None:
    await receive()
    await send({"type": "http.response.start", "status": 200, "headers": []})


def scope() -> dict[str, Any]:
    who = Principal(org_id="o", method="api_key", key_id=uuid.uuid4())
    return {
        "type": "http",
        "path": "/api/threads/x/messages",
        "client": ("10.0.0.1", 1),
        "user": who,
    }


async def per_call_us(handler: Any, s: dict[str, Any]) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(N):
            await handler(s, receive, send)
        best = min(best, time.perf_counter() - start)
    return best / N * 1e6


async def main() -> None:
    limits = RateLimits(10**9, 10**9, 10**9)
    s = scope()
    bare = await per_call_us(app, s)
    rows = {
        "AddressLimits (address budget, failure check)": AddressLimits(app, limits),
        "CredentialLimits (credential budget)": CredentialLimits(app, limits),
        "BodyDeadline (one bounded receive)": BodyDeadline(app, 30),
        "all three": AddressLimits(CredentialLimits(BodyDeadline(app, 30), limits), limits),
    }
    print(f"bare app: {bare:.2f} us per request")
    for name, handler in rows.items():
        print(f"{name}: +{await per_call_us(handler, s) - bare:.2f} us per request")


if __name__ == "__main__":
    buckets = TokenBuckets(10**9)
    keys = [uuid.uuid4() for _ in range(100_000)]
    for k in keys:
        buckets.take(k)
    hot = keys[-1]
    take = min(timeit.repeat(lambda: buckets.take(hot), number=N, repeat=5)) / N * 1e6
    print(f"TokenBuckets.take among 100,000 keys: {take:.2f} us")
    uvloop.run(main())
