"""A loopback TCP proxy that cuts connections: the dropped connection of a flaky
network, between the client and the real service."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Cut:
    """Cut the next connection whose request starts with ``request_prefix`` (and
    contains ``containing``) once ``after_bytes`` of its answer went through."""

    request_prefix: bytes
    after_bytes: int
    containing: bytes = b""
    done: bool = False


@dataclass
class CuttingProxy:
    target_port: int
    cuts: list[Cut] = field(default_factory=list)
    requests: list[bytes] = field(default_factory=list)  # each request's first chunk
    port: int = 0

    async def _pipe_up(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, armed: list[Cut]
    ) -> None:
        while data := await reader.read(65536):
            self.requests.append(data)
            for cut in self.cuts:
                if (
                    not cut.done
                    and data.startswith(cut.request_prefix)
                    and cut.containing in data
                    and not armed
                ):
                    cut.done = True
                    armed.append(cut)
            writer.write(data)
            await writer.drain()
        writer.close()

    async def _pipe_down(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        armed: list[Cut],
        upstream: asyncio.StreamWriter,
    ) -> None:
        sent = 0
        while data := await reader.read(256):
            if armed:
                room = armed[0].after_bytes - sent
                if room <= len(data):
                    writer.write(data[: max(room, 0)])
                    await writer.drain()
                    writer.transport.abort()  # the connection drops, mid-answer
                    upstream.transport.abort()
                    return
                sent += len(data)
            writer.write(data)
            await writer.drain()
        writer.close()

    async def _handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        up_w: asyncio.StreamWriter | None = None
        try:
            up_r, up_w = await asyncio.open_connection("127.0.0.1", self.target_port)
            armed: list[Cut] = []
            down = asyncio.ensure_future(self._pipe_down(up_r, client_w, armed, up_w))
            try:
                await self._pipe_up(client_r, up_w, armed)
                await down
            finally:
                down.cancel()
                await asyncio.gather(down, return_exceptions=True)
        except (ConnectionError, OSError):
            pass
        finally:
            # every transport closed before the loop is: no writer outlives it open
            client_w.transport.abort()
            if up_w is not None:
                up_w.transport.abort()


@contextmanager
def cutting_proxy(target_port: int) -> Iterator[CuttingProxy]:
    proxy = CuttingProxy(target_port)
    loop = asyncio.new_event_loop()
    ready = threading.Event()
    server: list[asyncio.Server] = []

    async def main() -> None:
        srv = await asyncio.start_server(proxy._handle, "127.0.0.1", 0)
        proxy.port = srv.sockets[0].getsockname()[1]
        server.append(srv)
        ready.set()

    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(main(), loop).result(timeout=10)
    ready.wait(10)
    try:
        yield proxy
    finally:

        async def stop() -> None:
            server[0].close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server[0].wait_closed()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()
