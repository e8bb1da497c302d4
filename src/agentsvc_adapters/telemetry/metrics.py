"""Turn-level Prometheus metrics, counted from the core's finished spans.

A sink like the OpenTelemetry export: the same spans, another output. Labels are
bounded values only: the provider family (``alpha``, ``beta``, ``local``), an
outcome, an error code, a token kind. Never an organization, user, thread or
agent id, a tool name or a secret.

- ``agentsvc_replies_total{outcome, family}``: outcome completed, stopped, failed,
  interrupted or requires_action (from ``invoke_agent``);
- ``agentsvc_provider_time_to_first_token_seconds{family}`` (histogram): a model
  call's request to its first streamed event (``chat``);
- ``agentsvc_provider_errors_total{family, code}``: failed model calls by their
  ``PROVIDER_*`` code (``chat``);
- ``agentsvc_tokens_total{family, kind}``: kind input, output or cached_input
  (``chat``, and the summary call of ``compaction``);
- ``agentsvc_tool_calls_total{outcome}``: ok, error, timeout, auth_required or
  unavailable (``execute_tool``);
- ``agentsvc_resolver_calls_total{outcome}``: key, platform or failed
  (``resolve_credentials``);
- ``agentsvc_compactions_total{kind, outcome}``: kind summary (``compaction``:
  done, skipped, failed) or native (a ``chat`` that ended by compacting: done).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from agentsvc_core.ports.telemetry import FinishedSpan, SpanSink

__all__ = ["SpanMetrics"]

TTFT_BUCKETS = (0.05, 0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0, 60.0)
_FAMILY = "agentsvc.provider.family"


class SpanMetrics(SpanSink):
    def __init__(self, registry: CollectorRegistry) -> None:
        self.replies = Counter(
            "agentsvc_replies",
            "Replies by outcome and provider family",
            ["outcome", "family"],
            registry=registry,
        )
        self.ttft = Histogram(
            "agentsvc_provider_time_to_first_token_seconds",
            "Time from a model call's request to its first streamed event",
            ["family"],
            buckets=TTFT_BUCKETS,
            registry=registry,
        )
        self.provider_errors = Counter(
            "agentsvc_provider_errors",
            "Failed model calls by provider family and error code",
            ["family", "code"],
            registry=registry,
        )
        self.tokens = Counter(
            "agentsvc_tokens",
            "Tokens of model calls by provider family and kind",
            ["family", "kind"],
            registry=registry,
        )
        self.tool_calls = Counter(
            "agentsvc_tool_calls",
            "Server-side tool calls by outcome",
            ["outcome"],
            registry=registry,
        )
        self.resolver_calls = Counter(
            "agentsvc_resolver_calls",
            "Credential-resolver calls by outcome",
            ["outcome"],
            registry=registry,
        )
        self.compactions = Counter(
            "agentsvc_compactions",
            "Context compactions by kind and outcome",
            ["kind", "outcome"],
            registry=registry,
        )
        # labels() takes a lock and builds a key each time: the children are kept here
        self._children: dict[Hashable, Any] = {}
        self._by_name: dict[str, Callable[[FinishedSpan], None]] = {
            "invoke_agent": self._reply,
            "chat": self._chat,
            "execute_tool": self._tool,
        }

    def _child(self, metric: Counter | Histogram, *labels: str) -> Any:
        key = (id(metric), *labels)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = metric.labels(*labels)
        return child

    def on_end(self, span: FinishedSpan) -> None:
        operation = span.attributes.get("gen_ai.operation.name")
        if isinstance(operation, str) and (count := self._by_name.get(operation)) is not None:
            count(span)
        elif span.name == "resolve_credentials":
            outcome = span.attributes.get("agentsvc.resolver.outcome", "platform")
            self._child(
                self.resolver_calls, "failed" if span.status == "error" else str(outcome)
            ).inc()
        elif span.name == "compaction":
            outcome = span.attributes.get("agentsvc.compaction.outcome", "skipped")
            done = "failed" if span.status == "error" else str(outcome)
            self._child(self.compactions, "summary", done).inc()
            self._tokens(span)

    def _family(self, span: FinishedSpan) -> str:
        return str(span.attributes.get(_FAMILY, "unknown"))

    def _tokens(self, span: FinishedSpan) -> None:
        a, family = span.attributes, self._family(span)
        for kind, key in (
            ("input", "gen_ai.usage.input_tokens"),
            ("output", "gen_ai.usage.output_tokens"),
            ("cached_input", "gen_ai.usage.cache_read.input_tokens"),
        ):
            value = a.get(key)
            if isinstance(value, int) and value > 0:
                self._child(self.tokens, family, kind).inc(value)

    def _reply(self, span: FinishedSpan) -> None:
        outcome = str(span.attributes.get("agentsvc.run.status", "completed"))
        self._child(self.replies, outcome, self._family(span)).inc()

    def _chat(self, span: FinishedSpan) -> None:
        family = self._family(span)
        ttft = span.attributes.get("gen_ai.response.time_to_first_chunk")
        if isinstance(ttft, float):
            self._child(self.ttft, family).observe(ttft)
        if span.status == "error" and span.error_type is not None and span.error_type.isupper():
            # a provider's code (PROVIDER_*), not a cancellation at shutdown
            self._child(self.provider_errors, family, span.error_type).inc()
        if span.attributes.get("agentsvc.compaction") == "native":
            self._child(self.compactions, "native", "done").inc()
        self._tokens(span)

    def _tool(self, span: FinishedSpan) -> None:
        outcome = str(span.attributes.get("agentsvc.tool.outcome", "ok"))
        self._child(self.tool_calls, outcome).inc()
