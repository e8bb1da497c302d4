"""The span port: what the core records of a turn, and who receives it.

One model of a span, several outputs: the core's ``Tracer`` (implemented in
``agentsvc_core.telemetry``, pure Python) starts and ends spans; each ended span
is handed, as a ``FinishedSpan``, to every ``SpanSink`` the composition root
configured: the OpenTelemetry exporter (``adapters/telemetry/otel.py``, only when
an exporter is configured) and the turn-level Prometheus metrics
(``adapters/telemetry/metrics.py``); and to the list in ``COLLECTED`` when the task
that ends it has one: the reply collects its spans so, and stores them as its trace
with its final write (``use_cases/traces/build.py``).

Ids follow W3C Trace Context: a trace id is 32 lowercase hex characters, a span
id 16. Attributes follow the OpenTelemetry GenAI and HTTP semantic conventions
(docs/architecture.md lists them). They never carry a key, token or secret, nor
message or tool content: content (tool arguments and results, a model call's text)
goes in a span's ``input`` and ``output``, which only the stored trace keeps, after
redaction.

``CURRENT`` holds the span that is current in this task (an asyncio task copies
it when it is created): new spans take it as their parent, and the outbound
propagation (``traceparent`` on calls to MCP servers, webhooks and the credential
resolver) reads it.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextvars import ContextVar
from typing import Literal, Protocol

import msgspec

__all__ = [
    "ACTIVE",
    "COLLECTED",
    "CURRENT",
    "AttributeValue",
    "FinishedSpan",
    "Span",
    "SpanContext",
    "SpanKind",
    "SpanSink",
    "SpanStatus",
    "Tracer",
]

SpanKind = Literal["internal", "server", "client"]
SpanStatus = Literal["unset", "ok", "error"]
AttributeValue = str | bool | int | float | tuple[str, ...]


class SpanContext(msgspec.Struct, frozen=True, gc=False):
    """What identifies a span across processes (W3C ``traceparent``)."""

    trace_id: str  # 32 lowercase hex
    span_id: str  # 16 lowercase hex
    sampled: bool = True  # the trace-flags' sampled bit
    remote: bool = False  # it came from another process (an incoming ``traceparent``)

    def traceparent(self) -> str:
        return f"00-{self.trace_id}-{self.span_id}-{'01' if self.sampled else '00'}"


class FinishedSpan(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An ended span, as every sink receives it."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    parent_remote: bool  # the parent is another process's span
    sampled: bool
    name: str
    kind: SpanKind
    start_ns: int  # Unix epoch, nanoseconds
    end_ns: int
    attributes: Mapping[str, AttributeValue]
    status: SpanStatus  # "error": ``error_type`` says why
    error_type: str | None = None  # also the ``error.type`` attribute
    input: object = None  # content: for the stored trace only, never exported
    output: object = None

    @property
    def duration_s(self) -> float:
        return (self.end_ns - self.start_ns) / 1e9


class Span(Protocol):
    """A span being recorded. ``with span:`` makes it current and ends it on exit
    (an exception ending the block marks it failed with the exception's class
    name, unless ``fail`` said why already)."""

    @property
    def context(self) -> SpanContext: ...

    @property
    def trace_id(self) -> str: ...

    def set(self, key: str, value: AttributeValue) -> None:
        """Set an attribute (never a secret, never message or tool content). Once
        the span has ended, this and ``fail`` do nothing."""
        ...

    def fail(self, error_type: str) -> None:
        """Mark the span failed; ``error_type`` is a bounded code, not a message."""
        ...

    def payload(self, input: object = None, output: object = None) -> None:
        """Content the stored trace keeps (redacted, capped); given values replace
        earlier ones. JSON-encodable (msgspec)."""
        ...

    def end(self) -> None:
        """End it (once; later calls do nothing) and hand it to the sinks."""
        ...

    def __enter__(self) -> Span: ...

    def __exit__(self, kind: object, exc: object, tb: object) -> None: ...


class Tracer(Protocol):
    """Starts spans. A span's parent is ``parent`` when given, else the current
    span (``CURRENT``); without either it starts a new trace."""

    @property
    def propagating(self) -> bool:
        """Whether ``traceparent`` goes out on outbound calls (tracing export is on)."""
        ...

    def start(
        self,
        name: str,
        kind: SpanKind = "internal",
        attributes: dict[str, AttributeValue] | None = None,
        parent: SpanContext | None = None,
    ) -> Span: ...


class SpanSink(Protocol):
    """Receives every ended span. Called on the event loop, in the task that ended
    the span: it must not block nor do I/O (batch, hand to a thread, count)."""

    def on_end(self, span: FinishedSpan) -> None: ...


CURRENT: ContextVar[SpanContext | None] = ContextVar("agentsvc_current_span", default=None)
COLLECTED: ContextVar[list[FinishedSpan] | None] = ContextVar("agentsvc_collected", default=None)
# the span entered last in this task (``with span:``): what an adapter notes on,
# such as a provider client's retries of the model call it makes
ACTIVE: ContextVar[Span | None] = ContextVar("agentsvc_active_span", default=None)
