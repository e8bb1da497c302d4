"""``BodyDeadline``: reading the body is bounded, what comes after it is not."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from agentsvc_web.read_timeout import BodyDeadline, RequestReadTimeout

SCOPE = {"type": "http", "path": "/api/agents"}


async def read_body(scope: Any, receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass


def run(middleware: BodyDeadline, *messages: dict[str, Any], outer_s: float = 3) -> float:
    """Run one request, in a new event loop, whose ``receive`` yields ``messages``
    then never returns: the seconds until the request ended (bounded by ``outer_s``)."""

    async def main() -> float:
        queue = list(messages)

        async def receive() -> dict[str, Any]:
            if queue:
                return queue.pop(0)
            await asyncio.Event().wait()
            raise AssertionError

        start = time.monotonic()
        await asyncio.wait_for(middleware(SCOPE, receive, None), outer_s)  # type: ignore[arg-type]
        return time.monotonic() - start

    return asyncio.run(main())


def test_a_body_that_stops_arriving_times_out_in_every_event_loop() -> None:
    middleware = BodyDeadline(read_body, timeout_s=0.2)
    part = {"type": "http.request", "body": b"{", "more_body": True}
    with pytest.raises(RequestReadTimeout):
        run(middleware, part)
    # a loop that ends while a sweep is due on it (tests run many loops) ...
    with pytest.raises(TimeoutError):
        run(middleware, part, outer_s=0.05)
    # ... does not keep the next one from its own sweep
    with pytest.raises(RequestReadTimeout):
        run(middleware, part)


def test_a_complete_body_is_not_bounded_afterwards() -> None:
    async def then_wait(scope: Any, receive: Any, send: Any) -> None:
        await read_body(scope, receive, send)
        with pytest.raises(TimeoutError):  # the app's own wait, for as long as it likes
            await asyncio.wait_for(receive(), 0.5)

    took = run(BodyDeadline(then_wait, timeout_s=0.2), {"type": "http.request", "body": b"{}"})
    assert took >= 0.5
