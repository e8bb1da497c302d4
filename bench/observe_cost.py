"""CPU per request of the request layer (agentsvc_web/observe.py, docs/architecture.md):
``python bench/observe_cost.py``.

Times, on uvloop, one request through ``Observed`` (request id, X-Request-Id on the
answer, the context variable, the HTTP metrics) around an ASGI app that answers
with a start and a body, minus the same app called bare; with and without a client
``X-Request-Id``, with the ``Cors`` layer for an allowed origin, and the extra cost
of each further body message (a streamed reply's batch of tokens) through the
layer's ``send``. Best of five runs of ``N`` calls each, in this process's CPU time
(so another job on the machine does not count; the loop never waits).
"""

from __future__ import annotations

import time
from typing import Any

import uvloop

from agentsvc_web.cors import Cors
from agentsvc_web.metrics import HttpMetrics, new_registry
from agentsvc_web.observe import Observed

N = 100_000
START = {"type": "http.response.start", "status": 200, "headers": []}
BODY = {"type": "http.response.body", "body": b"data", "more_body": False}
MORE = {"type": "http.response.body", "body": b"data", "more_body": True}


async def receive() -> Any:
    return {"type": "http.request", "body": b"", "more_body": False}


async def send(_: Any) -> None:
    return None


async def app(scope: Any, receive: Any, send: Any) -> None:
    scope["path_template"] = "/api/threads/{thread_id}/messages"
    await send({**START, "headers": []})
    await send(BODY)


async def streaming(scope: Any, receive: Any, send: Any) -> None:
    scope["path_template"] = "/api/threads/{thread_id}/messages"
    await send({**START, "headers": []})
    for _ in range(10):
        await send(MORE)
    await send(BODY)


def scope(*headers: tuple[bytes, bytes]) -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/api/threads/x/messages",
        "headers": [(b"host", b"127.0.0.1"), (b"authorization", b"Bearer x"), *headers],
    }


async def per_call_us(handler: Any, headers: tuple[tuple[bytes, bytes], ...] = ()) -> float:
    best = float("inf")
    for _ in range(5):
        scopes = [scope(*headers) for _ in range(N)]
        start = time.process_time()
        for s in scopes:
            await handler(s, receive, send)
        best = min(best, time.process_time() - start)
    return best / N * 1e6


async def main() -> None:
    metrics = HttpMetrics(new_registry())
    bare = await per_call_us(app)
    print(f"bare app: {bare:.2f} us per request")
    observed = Observed(app, metrics)
    print(f"Observed, new request id: +{await per_call_us(observed) - bare:.2f} us per request")
    client_id = ((b"x-request-id", b"client-request-0001"),)
    cost = await per_call_us(observed, client_id) - bare
    print(f"Observed, the client's request id: +{cost:.2f} us per request")
    origin = ((b"origin", b"https://app.example.com"),)
    cors = Observed(Cors(app, ("https://app.example.com",)), metrics)
    print(f"Observed + Cors, allowed origin: +{await per_call_us(cors, origin) - bare:.2f} us")
    ten = await per_call_us(streaming)
    ten_observed = await per_call_us(Observed(streaming, metrics))
    extra = (ten_observed - ten) - (await per_call_us(observed) - bare)
    print(f"each further body message through the layer: +{extra / 10:.3f} us")


if __name__ == "__main__":
    uvloop.run(main())
