"""Test doubles for the outbound guard: a DNS table and a loopback listener that
counts every TCP connection made to it (loopback only, nothing leaves the host)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager

from agentsvc_adapters.outbound import Resolver

ANSWER = b'{"apiKey": "sk-direct", "servers": []}'


def fake_dns(table: dict[str, list[str]]) -> Resolver:
    """A resolver that knows only ``table`` (an unknown name fails like DNS would)."""

    async def resolve(host: str, port: int) -> list[str]:
        if host not in table:
            raise OSError(f"unknown host {host}")
        return table[host]

    return resolve


class Listener:
    """A TCP server on 127.0.0.1 counting connections. Each request is answered
    200 with ``ANSWER``, or, with ``silent=True``, never (the connection is held
    open until the client gives up)."""

    def __init__(self, *, silent: bool = False) -> None:
        self.silent = silent
        self.connections = 0
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> Listener:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()
        for writer in self._writers:
            writer.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self._writers.append(writer)
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if self.silent:
                await reader.read()  # until the client closes
                return
            length = 0
            for line in head.split(b"\r\n"):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            await reader.readexactly(length)
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                b"content-length: %d\r\nconnection: close\r\n\r\n%s" % (len(ANSWER), ANSWER)
            )
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


@contextmanager
def closed_port() -> Iterator[int]:
    """A loopback port that refuses connections (bound, not listening)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]
