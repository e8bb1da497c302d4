"""What a stdio MCP server prints, into the service log without its secrets.

A child's stderr, and the stdout lines that are not JSON-RPC, are its own output:
a server that prints its environment would otherwise copy the endpoint's secrets
(its ``env`` values, which often are API keys) into the service log. So:

- it is logged only at DEBUG, on the ``agentsvc.mcp.child`` logger;
- every configured secret (the endpoint's env and header values, and their long
  words, as in error details) is replaced by ``***`` *before* a line is cut;
- a line is cut at ``MAX_LINE_BYTES``, and at most ``MAX_LINES`` lines per session
  are logged (then one note that the rest is not).

stderr reaches us through a pipe the child writes to (``stderr_pipe``), read by
the event loop, never by a thread. stdout belongs to the SDK's transport; a line
that is not JSON-RPC comes back from it as a parse error, which ``_Dispatcher``
hands to ``ChildOutput.stdout_error``. The SDK also logs such a line at ERROR with
the line in the traceback; ``_SdkParseFailures`` drops that record.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import AsyncIterator, Iterable
from typing import TextIO

import pydantic

from agentsvc_core.ports.mcp import McpEndpoint

__all__ = ["MAX_LINES", "MAX_LINE_BYTES", "ChildOutput", "secret_values", "stderr_pipe"]

log = logging.getLogger("agentsvc.mcp.child")
MAX_LINE_BYTES = 2048
MAX_LINES = 200
_DRAIN_S = 1.0


def secret_values(endpoint: McpEndpoint) -> list[str]:
    """The endpoint's header and env values (at least 4 characters) and their words
    of at least 6, longest first: what no log line or error detail may contain."""
    secrets: set[str] = set()
    for value in (*endpoint.headers.values(), *endpoint.env.values()):
        secrets.update(w for w in value.split() if len(w) >= 6)
        if len(value) >= 4:
            secrets.add(value)
    return sorted(secrets, key=len, reverse=True)


class ChildOutput:
    """One session's child output: redacted, bounded, logged at DEBUG."""

    def __init__(self, name: str, secrets: Iterable[str]) -> None:
        self.name = name
        self._secrets = [s.encode() for s in secrets]
        # the bytes kept of a line before redaction: a secret that starts before
        # the cut is whole in them, so it is redacted before the cut, never halved
        self._keep = MAX_LINE_BYTES + max((len(s) for s in self._secrets), default=0)
        self._lines = 0
        self._pending = b""
        self._skipping = False  # the rest of a line already logged in part

    def feed(self, data: bytes) -> None:
        """stderr bytes as they come: whole lines are logged, overlong ones cut."""
        self._pending += data
        while (end := self._pending.find(b"\n")) >= 0:
            line, self._pending = self._pending[:end], self._pending[end + 1 :]
            if not self._skipping:
                self._log("stderr", line)
            self._skipping = False
        if len(self._pending) > self._keep:
            if not self._skipping:
                self._log("stderr", self._pending)
            self._pending, self._skipping = b"", True

    def flush(self) -> None:
        """The last line, if it had no newline."""
        if self._pending and not self._skipping:
            self._log("stderr", self._pending)
        self._pending, self._skipping = b"", False

    async def stdout_error(self, exc: Exception) -> None:
        """A stdout line the SDK could not parse as JSON-RPC (its parse error; the
        dispatcher's ``on_stream_exception``)."""
        line: object = exc
        if isinstance(exc, pydantic.ValidationError) and exc.errors():
            line = exc.errors(include_url=False)[0].get("input", exc)
        text = line if isinstance(line, str) else json.dumps(line, default=str)
        self._log("stdout", text.encode(errors="replace"))

    def _log(self, stream: str, line: bytes) -> None:
        if not log.isEnabledFor(logging.DEBUG) or self._lines > MAX_LINES:
            return
        self._lines += 1
        if self._lines > MAX_LINES:
            log.debug("%s: further output is not logged", self.name)
            return
        kept = line[: self._keep]
        for secret in self._secrets:
            kept = kept.replace(secret, b"***")
        text = kept[:MAX_LINE_BYTES].decode(errors="replace").rstrip("\r")
        cut = " [cut]" if len(kept) > MAX_LINE_BYTES or len(line) > self._keep else ""
        log.debug("%s %s: %s%s", self.name, stream, text, cut)


class _Reader(asyncio.Protocol):
    def __init__(self, output: ChildOutput) -> None:
        self.output = output
        self.closed = asyncio.Event()

    def data_received(self, data: bytes) -> None:
        self.output.feed(data)

    def eof_received(self) -> None:
        self.output.flush()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed.set()


@contextlib.asynccontextmanager
async def stderr_pipe(output: ChildOutput) -> AsyncIterator[TextIO]:
    """A file for the child's stderr (``stdio_client``'s ``errlog``) whose other end
    feeds ``output``. Enter it before the transport: on the way out the child is
    gone first, then our end is closed and what is left is read (briefly)."""
    read_fd, write_fd = os.pipe()
    errlog, ours = os.fdopen(write_fd, "w"), os.fdopen(read_fd, "rb", buffering=0)
    try:
        transport, reader = await asyncio.get_running_loop().connect_read_pipe(
            lambda: _Reader(output), ours
        )
    except BaseException:
        errlog.close()
        ours.close()
        raise
    try:
        yield errlog
    finally:
        errlog.close()  # the last writer in this process: EOF once the child is gone
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_DRAIN_S):
                await reader.closed.wait()
        transport.close()


class _SdkParseFailures(logging.Filter):
    """Drops the SDK's ERROR record for a stdout line that is not JSON-RPC (the line
    is in its traceback); ``ChildOutput.stdout_error`` logs it instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.msg != "Failed to parse JSONRPC message from server"


logging.getLogger("mcp.client.stdio").addFilter(_SdkParseFailures())
