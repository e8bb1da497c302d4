"""The process's metrics, on one ``prometheus_client`` registry per app.

The registry is ``Services.metrics`` (built in ``bootstrap``; never the library's
global default registry: tests build many apps in one process, and two apps must
not share or collide on series). What is on it:

- ``HttpMetrics`` (this module), written by the request layer
  (``agentsvc_web.observe``) once per request and by ``SseResponse`` once per
  stream: requests by route template, method and status; their duration by route
  template and method; Server-Sent Event streams open. A collector of its own
  counts (cheaper per request than the library's locked ``Counter``/``Histogram``).
- Scrape-time collectors (``ReadingsCollector``), which read numbers their owners
  keep anyway only when ``/metrics`` is scraped: the database pool's use
  (psycopg_pool's stats) and outbound calls that failed at the outbound guard.
  Nothing is added to a request for them.
- The turn-level metrics (replies by outcome, time to first token, tokens, tool
  and provider failures) belong to the telemetry of replies, which registers them
  on the same registry.

Labels are bounded on purpose: a route is its template (``/api/threads/{thread_id}``,
never the path with its ids), an unknown route is ``unmatched``, a method outside
the HTTP methods the API uses is ``other``. No organization, user, thread, key or
secret is ever a label.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import accumulate

from prometheus_client import CollectorRegistry, disable_created_metrics
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

__all__ = [
    "UNMATCHED",
    "HttpMetrics",
    "Reading",
    "ReadingsCollector",
    "new_registry",
]

# No ``*_created`` series (for the telemetry's metrics made with the library's
# Counter and Histogram): in the text format each would be one more gauge per
# labelled child, which nobody here reads. (A setting of the library, process-wide.)
disable_created_metrics()  # type: ignore[no-untyped-call]

UNMATCHED = "unmatched"  # the route label of a request no route answered
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
# seconds; a streamed reply lasts as long as the model writes, hence the long tail
_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
_LE = (*(repr(b) for b in _BUCKETS), "+Inf")


def new_registry() -> CollectorRegistry:
    """An app's own registry (``auto_describe``: collectors are checked for
    duplicate names when registered)."""
    return CollectorRegistry(auto_describe=True)


class HttpMetrics(Collector):
    """Requests, their duration and the open streams, kept in plain dictionaries
    and integers and turned into metric families when the registry is scraped.

    ``prometheus_client``'s own ``Counter.inc`` and ``Histogram.observe`` take a
    lock each and cost about 1.2 and 1.5 microseconds; counting here costs a few
    dictionary operations (``bench/observe_cost.py``). Everything runs on the
    event loop's thread (the scrape too), so nothing needs a lock."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._requests: dict[tuple[str, str, int], int] = {}
        # (route, method) -> [count per bucket (not cumulative; the last is +Inf), sum]
        self._durations: dict[tuple[str, str], list[float]] = {}
        self.streams_open = 0  # SseResponse adds one while it writes
        registry.register(self)

    def observe(self, route: str, method: str, status: int, seconds: float) -> None:
        if method not in _METHODS:
            method = "other"
        key = (route, method, status)
        requests = self._requests
        requests[key] = requests.get(key, 0) + 1
        timing = self._durations.get((route, method))
        if timing is None:
            timing = self._durations[route, method] = [0.0] * (len(_BUCKETS) + 2)
        timing[bisect_left(_BUCKETS, seconds)] += 1
        timing[-1] += seconds

    def collect(self) -> Iterator[Metric]:
        requests = CounterMetricFamily(
            "agentsvc_http_requests",
            "HTTP requests answered, by route template, method and status",
            labels=("route", "method", "status"),
        )
        for (route, method, status), count in sorted(self._requests.items()):
            requests.add_metric((route, method, str(status)), count)
        yield requests
        duration = HistogramMetricFamily(
            "agentsvc_http_request_duration_seconds",
            "Time from a request's arrival to the end of its answer (a streamed reply's "
            "answer ends with the reply), by route template and method",
            labels=("route", "method"),
        )
        for (route, method), timing in sorted(self._durations.items()):
            cumulative = list(accumulate(timing[:-1]))
            buckets = [(_LE[i], cumulative[i]) for i in range(len(_LE))]
            duration.add_metric((route, method), buckets, sum_value=timing[-1])
        yield duration
        yield GaugeMetricFamily(
            "agentsvc_sse_streams_open",
            "Server-Sent Event streams being written now",
            value=self.streams_open,
        )

    def describe(self) -> Iterator[Metric]:
        return self.collect()


Reading = tuple[str, str, str, Callable[[], float]]
"""(metric name, help, ``gauge`` or ``counter``, the function that reads it)."""


class ReadingsCollector(Collector):
    """Metrics read at scrape time from functions (numbers their owners keep).

    ``readings`` are plain metrics; ``labelled`` is one counter whose
    ``read`` returns label value -> count, for a family with one label."""

    def __init__(
        self,
        readings: Sequence[Reading] = (),
        labelled: tuple[str, str, str, Callable[[], Mapping[str, float]]] | None = None,
    ) -> None:
        self._readings = readings
        self._labelled = labelled

    def collect(self) -> Iterator[Metric]:
        for name, doc, kind, read in self._readings:
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, doc, value=read())
        if self._labelled is not None:
            name, doc, label, counts = self._labelled
            labelled = CounterMetricFamily(name, doc, labels=(label,))
            for value, count in sorted(counts().items()):
                labelled.add_metric((value,), count)
            yield labelled

    def describe(self) -> Iterator[Metric]:
        """The families without reading anything (the registry checks names)."""
        for name, doc, kind, _ in self._readings:
            family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
            yield family(name, doc, labels=())
        if self._labelled is not None:
            name, doc, label, _ = self._labelled
            yield CounterMetricFamily(name, doc, labels=(label,))
