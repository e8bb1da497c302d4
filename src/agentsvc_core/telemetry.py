"""The core's tracer: spans as plain objects, handed to the sinks when they end.

The port (``agentsvc_core.ports.telemetry``) says what a span is; this is its one
implementation, framework-free so that the use cases can record spans whatever
sinks are configured. With no sink a span costs its ids, two clock reads and a
context-variable set and reset (about a microsecond and a half on the
benchmark machine; a turn records three to five).
"""

from __future__ import annotations

import random
import re
import time
from collections.abc import Sequence

from agentsvc_core.ports.telemetry import (
    ACTIVE,
    COLLECTED,
    CURRENT,
    AttributeValue,
    FinishedSpan,
    SpanContext,
    SpanKind,
    SpanSink,
    SpanStatus,
    Tracer,
)

__all__ = ["SpanTracer", "parse_traceparent"]

_TRACEPARENT = re.compile(r"([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def parse_traceparent(value: str | None) -> SpanContext | None:
    """The W3C ``traceparent`` header's span context; None when absent or invalid
    (version ``ff``, all-zero ids, wrong lengths or characters)."""
    if not value or len(value) > 512:
        return None
    m = _TRACEPARENT.match(value.strip())
    if m is None:
        return None
    version, trace_id, span_id, flags = m.groups()
    if version == "ff" or trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    if version == "00" and len(value.strip()) != 55:
        return None
    return SpanContext(trace_id, span_id, sampled=bool(int(flags, 16) & 1), remote=True)


_randbytes = random.randbytes


def _new_trace_id() -> str:
    # not a secret: W3C asks for random ids, which the OpenTelemetry SDK draws alike
    # (Mersenne Twister); randbytes().hex() is a third of the cost of formatting an int
    trace_id = _randbytes(16).hex()
    return trace_id if trace_id != _ZERO_TRACE else _new_trace_id()


def _new_span_id() -> str:
    span_id = _randbytes(8).hex()
    return span_id if span_id != _ZERO_SPAN else _new_span_id()


class _Span:
    __slots__ = (
        "_active",
        "_attributes",
        "_context",
        "_ended",
        "_error",
        "_input",
        "_kind",
        "_name",
        "_output",
        "_parent",
        "_sinks",
        "_start",
        "_token",
    )

    def __init__(
        self,
        sinks: Sequence[SpanSink],
        name: str,
        kind: SpanKind,
        attributes: dict[str, AttributeValue],
        parent: SpanContext | None,
        sampled: bool,
    ) -> None:
        self._sinks = sinks
        self._name = name
        self._kind = kind
        self._attributes = attributes
        self._parent = parent
        trace_id = parent.trace_id if parent is not None else _new_trace_id()
        self._context = SpanContext(trace_id, _new_span_id(), sampled)
        self._start = time.time_ns()
        self._error: str | None = None
        self._ended = False
        self._token: object | None = None
        self._active: object | None = None
        self._input: object = None
        self._output: object = None

    @property
    def context(self) -> SpanContext:
        return self._context

    @property
    def trace_id(self) -> str:
        return self._context.trace_id

    def set(self, key: str, value: AttributeValue) -> None:
        if not self._ended:  # an ended span's attributes are the sinks' now
            self._attributes[key] = value

    def fail(self, error_type: str) -> None:
        if not self._ended:
            self._error = error_type

    def payload(self, input: object = None, output: object = None) -> None:
        if input is not None:
            self._input = input
        if output is not None:
            self._output = output

    def end(self) -> None:
        if self._ended:
            return
        self._ended = True
        collected = COLLECTED.get()
        if not self._sinks and collected is None:
            return
        status: SpanStatus = "unset"
        if self._error is not None:
            status = "error"
            self._attributes["error.type"] = self._error
        parent = self._parent
        finished = FinishedSpan(
            trace_id=self._context.trace_id,
            span_id=self._context.span_id,
            parent_span_id=None if parent is None else parent.span_id,
            parent_remote=parent is not None and parent.remote,
            sampled=self._context.sampled,
            name=self._name,
            kind=self._kind,
            start_ns=self._start,
            end_ns=time.time_ns(),
            attributes=self._attributes,
            status=status,
            error_type=self._error,
            input=self._input,
            output=self._output,
        )
        for sink in self._sinks:
            sink.on_end(finished)
        if collected is not None:
            collected.append(finished)

    def __enter__(self) -> _Span:
        self._token = CURRENT.set(self._context)
        self._active = ACTIVE.set(self)
        return self

    def __exit__(self, kind: object, exc: object, tb: object) -> None:
        if self._token is not None:
            CURRENT.reset(self._token)  # type: ignore[arg-type]
            ACTIVE.reset(self._active)  # type: ignore[arg-type]
            self._token = self._active = None
        if exc is not None and self._error is None and isinstance(kind, type):
            self._error = kind.__name__
        self.end()


class SpanTracer(Tracer):
    """Records spans and hands each ended one to ``sinks`` (none: only the ids and
    the parent links exist, which the ``meta`` event's ``traceId`` needs)."""

    def __init__(
        self,
        sinks: Sequence[SpanSink] = (),
        *,
        propagating: bool = False,
        sample_ratio: float = 1.0,
        parent_based: bool = True,
    ) -> None:
        """``sample_ratio``: the share of new traces marked sampled (the export sends
        only those; every sink still sees every span, so the metrics count all);
        ``parent_based``: a span with a parent from another process (``traceparent``)
        follows its sampled flag instead of drawing (OTEL_TRACES_SAMPLER, read by the
        composition root)."""
        self._sinks = tuple(sinks)
        self._propagating = propagating
        self._ratio = sample_ratio
        self._parent_based = parent_based

    @property
    def propagating(self) -> bool:
        return self._propagating

    def start(
        self,
        name: str,
        kind: SpanKind = "internal",
        attributes: dict[str, AttributeValue] | None = None,
        parent: SpanContext | None = None,
    ) -> _Span:
        if parent is None:
            parent = CURRENT.get()
        if parent is not None and (self._parent_based or not parent.remote):
            sampled = parent.sampled
        else:
            ratio = self._ratio
            sampled = ratio >= 1.0 or (ratio > 0.0 and random.random() < ratio)  # noqa: S311
        return _Span(
            self._sinks,
            name,
            kind,
            attributes if attributes is not None else {},
            parent,
            sampled,
        )
