"""CPU per streamed model reply through the alpha/beta adapters (aiohttp + msgspec).

Run: ``.venv/bin/python bench/provider_parse.py [--n 200] [--tokens 50] [--no-uvloop]``

For each fake provider (``tests.fakes.providers``, served from a thread of this
process) it streams a reply of ``--tokens`` text deltas ``--n`` times, one after the
other, and prints CPU milliseconds per stream:

- ``client``: ``time.thread_time()`` of the event-loop thread: the adapter, its HTTP
  client (aiohttp) and the loop, without the fake server (which runs in another thread).
- ``process``: ``time.process_time()``: the same plus the fake server's own CPU (it
  shares the process), so an upper bound.
- ``raw httpx``: the same requests drained with httpx's ``aiter_raw()`` and no parsing:
  what the transport alone cost when the adapters were on httpx (kept for comparison).
- ``no socket``: the adapter over an ``httpx.MockTransport`` replaying the recorded
  body in the chunks it arrived in: parsing and mapping without socket I/O (the
  adapters still accept an injected httpx client for such tests).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.fakes

from tests.fakes.providers import FakeProvider, Reply, fake_alpha, fake_beta

from agentsvc_adapters.llm.alpha import AlphaModel
from agentsvc_adapters.llm.alpha import request_body as alpha_body
from agentsvc_adapters.llm.beta import BetaModel
from agentsvc_adapters.llm.beta import request_body as beta_body
from agentsvc_core.entities import Message
from agentsvc_core.ports import ChatModel, ModelRequest, TextDelta

KEY = "sk-bench-0123456789"


def request() -> ModelRequest:
    user = Message(
        id=uuid.uuid4(),
        org_id="bench",
        thread_id=uuid.uuid4(),
        role="user",
        content="Tell me something.",
        created_at=datetime.now(UTC),
    )
    return ModelRequest(model="bench-model", system="Be brief.", messages=[user])


async def drain(model: ChatModel, req: ModelRequest, tokens: int) -> None:
    n = 0
    async for event in model.stream(req):
        n += isinstance(event, TextDelta)
    assert n == tokens, n


async def measure(n: int, once: Callable[[], Awaitable[None]]) -> tuple[float, float, float]:
    """(client CPU ms, process CPU ms, wall ms) per call, after a warm-up."""
    for _ in range(20):
        await once()
    t0, p0, w0 = time.thread_time(), time.process_time(), time.perf_counter()
    for _ in range(n):
        await once()
    t1, p1, w1 = time.thread_time(), time.process_time(), time.perf_counter()
    return (t1 - t0) * 1000 / n, (p1 - p0) * 1000 / n, (w1 - w0) * 1000 / n


async def bench(kind: str, fake: FakeProvider, n: int, tokens: int) -> None:
    req = request()
    if kind == "alpha":
        url, model_base = fake.base_url + "/v1/messages", fake.base_url
        headers = {"x-api-key": KEY, "anthropic-version": "2023-06-01"}
        body = alpha_body(req)
    else:
        url, model_base = fake.base_url + "/v1/chat/completions", fake.base_url + "/v1"
        headers = {"authorization": f"Bearer {KEY}"}
        body = beta_body(req)

    def make(http: httpx.AsyncClient | None = None) -> AlphaModel | BetaModel:
        cls = AlphaModel if kind == "alpha" else BetaModel
        return cls(model_base, KEY, http=http)

    model = make()
    client, process, wall = await measure(n, lambda: drain(model, req, tokens))
    await model.aclose()

    chunks: list[bytes] = []
    async with httpx.AsyncClient() as http:

        async def raw() -> None:
            chunks.clear()
            async with http.stream("POST", url, json=body, headers=headers) as response:
                chunks.extend([chunk async for chunk in response.aiter_raw()])

        raw_client, _, _ = await measure(n, raw)

    recorded = list(chunks)

    async def replay() -> AsyncIterator[bytes]:
        for chunk in recorded:
            yield chunk

    def handler(_: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=replay())

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        mocked = make(http)
        no_socket, _, _ = await measure(n, lambda: drain(mocked, req, tokens))

    print(
        f"{kind:5}  client {client:5.2f} ms  process {process:5.2f} ms  wall {wall:5.2f} ms  "
        f"| raw httpx {raw_client:5.2f} ms  | no socket {no_socket:5.2f} ms  "
        f"({len(recorded)} chunks/stream)"
    )


async def main(n: int, tokens: int) -> None:
    reply = Reply(tokens=[f" tok{i}" for i in range(tokens)])
    with fake_alpha() as alpha, fake_beta() as beta:
        alpha.default = beta.default = reply
        print(f"{n} sequential streams of {tokens} text deltas; CPU per stream:")
        await bench("alpha", alpha, n, tokens)
        await bench("beta", beta, n, tokens)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200)
    parser.add_argument("--tokens", type=int, default=50)
    parser.add_argument("--no-uvloop", action="store_true")
    args = parser.parse_args()
    runner = asyncio.run
    if not args.no_uvloop:
        try:
            import uvloop

            runner = uvloop.run
        except ImportError:
            pass
    print(f"event loop: {'asyncio' if runner is asyncio.run else 'uvloop'}")
    runner(main(args.n, args.tokens))
