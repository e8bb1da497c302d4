"""Load-generating client processes: asyncio + httpx, one ``AsyncClient`` per job.

``ClientPool(n)`` starts ``n`` processes (``spawn``) once for the whole run; each runs one
job at a time, sent over a pipe, in a fresh event loop (uvloop when installed), and sends
back plain tuples. A job's workers start together at a wall-clock instant (``start_at``)
after each has opened its keep-alive connection, so connection set-up is not measured.

Jobs:

- ``TurnJob``: each worker posts messages to its threads (moving to the next thread every
  ``per_thread`` turns) and reads the SSE stream to ``done``, recording the request start,
  the first ``token`` event and ``done``. ``wire="openai"`` posts straight to the fake
  provider instead (the control row) and reads its chunks to ``[DONE]``. With
  ``ramp_per_s`` worker ``i`` starts ``i / ramp_per_s`` seconds late (slow streams), and
  shared gauges count the streams open and live at every instant.
- ``CrudJob``: each worker repeats one CRUD request.
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import httpx
import msgspec

from bench.procs import cpu_ns_precise, raise_nofile

# Per-turn record: (worker, the worker's turn number from 0, ttft s | None, e2e s, tokens,
# error | None, server CPU ns | None, start offset s from start_at)
TurnRecord = tuple[int, int, float | None, float, int, str | None, int | None, float]
CrudRecord = tuple[float, int]  # (latency s, status)

GAUGE_OPEN, GAUGE_LIVE, GAUGE_ERRORS = 0, 1, 2


@dataclass
class WorkerPlan:
    index: int
    threads: list[str]
    turns: int


@dataclass
class TurnJob:
    base_url: str
    headers: dict[str, str]
    workers: list[WorkerPlan]
    start_at: float  # time.time() when measured turns begin
    stop_at: float  # time.time() after which no new turn starts
    wire: str = "service"  # or "openai": straight to the fake provider
    content: str = "Hello, how are you today?"
    per_thread: int = 10
    ramp_per_s: float | None = None
    cpu_pids: list[int] = field(default_factory=list)  # per-turn server CPU (history)
    read_timeout_s: float = 300.0


@dataclass
class CrudJob:
    base_url: str
    headers: dict[str, str]
    op: str  # create_agent | get_agent | create_thread | list_threads
    agent_id: str
    workers: int
    requests_per_worker: int
    start_at: float
    stop_at: float


@dataclass
class JobResult:
    records: list[Any]
    began: float  # time.time()
    ended: float
    cpu_s: float  # this client process's CPU for the job
    failure: str | None = None


# --- the client side of one turn -------------------------------------------------

_OPENAI_BODY = msgspec.json.encode(
    {
        "model": "gpt-bench",
        "messages": [{"role": "user", "content": "Hello, how are you today?"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
)


def _event_name(block: bytes) -> bytes:
    i = block.find(b"event: ")
    if i < 0:
        return b""
    j = block.find(b"\n", i)
    return block[i + 7 : j if j >= 0 else len(block)]


def _openai_kind(block: bytes) -> bytes:
    if block.startswith(b"data: [DONE]"):
        return b"done"
    i = block.find(b'"delta":{"content":"')
    if i >= 0 and block[i + 20 : i + 21] != b'"':
        return b"token"
    if block.startswith(b'data: {"error"'):
        return b"error"
    return b""


class _Stream:
    """What the client saw of one streamed answer."""

    __slots__ = ("end", "error", "first", "tokens")

    def __init__(self) -> None:
        self.first: float | None = None
        self.end: float | None = None
        self.tokens = 0
        self.error: str | None = None


async def _read_events(
    response: httpx.Response, classify: Callable[[bytes], bytes], seen: _Stream, gauges: Any
) -> None:
    buf = b""
    async for chunk in response.aiter_raw():
        buf += chunk
        while (i := buf.find(b"\n\n")) >= 0:
            block, buf = buf[:i], buf[i + 2 :]
            kind = classify(block)
            if kind == b"token":
                seen.tokens += 1
                if seen.first is None:
                    seen.first = time.perf_counter()
                    if gauges is not None:
                        gauges[GAUGE_LIVE] += 1
            elif kind == b"done":
                seen.end = time.perf_counter()
            elif kind == b"error":
                data = block.split(b"data: ", 1)[-1][:160]
                seen.error = "error event: " + data.decode(errors="replace")


async def one_turn(
    client: httpx.AsyncClient, path: str, body: bytes, openai: bool, gauges: Any
) -> tuple[float | None, float, int, str | None]:
    """(ttft, e2e, tokens, error) of one streamed turn, times in seconds. ``gauges`` (the
    process's shared counters, or None) count the streams open and live right now."""
    t0 = time.perf_counter()
    seen = _Stream()
    opened = False
    try:
        async with client.stream(
            "POST", path, content=body, headers={"content-type": "application/json"}
        ) as response:
            if response.status_code != 200:
                raw = await response.aread()
                seen.error = f"HTTP {response.status_code}: {raw[:120].decode(errors='replace')}"
            else:
                opened = True
                if gauges is not None:
                    gauges[GAUGE_OPEN] += 1
                await _read_events(response, _openai_kind if openai else _event_name, seen, gauges)
                if seen.end is None and seen.error is None:
                    seen.error = "the stream ended without done"
    except httpx.HTTPError as exc:
        seen.error = f"{type(exc).__name__}: {str(exc)[:120]}"
    finally:
        if gauges is not None:
            gauges[GAUGE_OPEN] -= int(opened)
            gauges[GAUGE_LIVE] -= int(seen.first is not None)
            gauges[GAUGE_ERRORS] += int(seen.error is not None)
    e2e = (seen.end if seen.end is not None else time.perf_counter()) - t0
    ttft = None if seen.first is None else seen.first - t0
    return ttft, e2e, seen.tokens, seen.error


_SSL: ssl.SSLContext | None = None


def _client(base_url: str, headers: dict[str, str], n: int, read_s: float) -> httpx.AsyncClient:
    """An AsyncClient for ``n`` concurrent requests. Turn workers get one each (n=1):
    httpcore's pool scans its connections and waiting requests on every change, so one
    pool shared by hundreds of concurrent streams costs the client more CPU per turn
    than the bare app costs the server. The SSL context (unused on http://) is made once."""
    global _SSL  # noqa: PLW0603 - a per-process cache
    if _SSL is None:
        _SSL = ssl.create_default_context()
    return httpx.AsyncClient(
        base_url=base_url,
        headers=headers,
        verify=_SSL,
        limits=httpx.Limits(
            max_connections=n + 1, max_keepalive_connections=n + 1, keepalive_expiry=120
        ),
        timeout=httpx.Timeout(connect=60.0, read=read_s, write=60.0, pool=120.0),
    )


async def _warm(client: httpx.AsyncClient, n: int) -> None:
    """Open ``n`` keep-alive connections (concurrent requests each take their own)."""
    with contextlib.suppress(httpx.HTTPError):
        await asyncio.gather(*(client.get("/healthz") for _ in range(n)))


async def _sleep_until(wall: float) -> None:
    delay = wall - time.time()
    if delay > 0:
        await asyncio.sleep(delay)


async def run_turns(job: TurnJob, gauges: Any) -> list[TurnRecord]:
    openai = job.wire == "openai"
    records: list[TurnRecord] = []
    n = len(job.workers)
    body = _OPENAI_BODY if openai else msgspec.json.encode({"content": job.content})
    clients = [_client(job.base_url, job.headers, 1, job.read_timeout_s) for _ in range(n)]
    try:
        if job.ramp_per_s is None:
            await asyncio.gather(*(_warm(c, 1) for c in clients))
        await _sleep_until(job.start_at)
        base = time.perf_counter()

        async def worker(plan: WorkerPlan, client: httpx.AsyncClient) -> None:
            if job.ramp_per_s is not None:
                await asyncio.sleep(
                    max(0.0, base + plan.index / job.ramp_per_s - time.perf_counter())
                )
            for seq in range(plan.turns):
                if time.time() > job.stop_at:
                    return
                thread_index = min(seq // job.per_thread, max(0, len(plan.threads) - 1))
                path = (
                    "/v1/chat/completions"
                    if openai
                    else f"/api/threads/{plan.threads[thread_index]}/messages"
                )
                cpu0 = sum(cpu_ns_precise(p) for p in job.cpu_pids) if job.cpu_pids else 0
                offset = time.perf_counter() - base
                ttft, e2e, tokens, error = await one_turn(client, path, body, openai, gauges)
                cpu = sum(cpu_ns_precise(p) for p in job.cpu_pids) - cpu0 if job.cpu_pids else None
                records.append((plan.index, seq, ttft, e2e, tokens, error, cpu, offset))

        await asyncio.gather(*(worker(p, c) for p, c in zip(job.workers, clients, strict=True)))
    finally:
        await asyncio.gather(*(c.aclose() for c in clients), return_exceptions=True)
    return records


# --- CRUD -----------------------------------------------------------------------------


def _crud_request(
    client: httpx.AsyncClient, op: str, agent_id: str, worker: int, i: int
) -> Callable[[], Awaitable[httpx.Response]]:
    if op == "create_agent":
        body = {"name": f"bench agent {worker}-{i}", "defaultModel": "gpt-bench"}
        return lambda: client.post("/api/agents", json=body)
    if op == "get_agent":
        return lambda: client.get(f"/api/agents/{agent_id}")
    if op == "create_thread":
        return lambda: client.post("/api/threads", json={"agentId": agent_id})
    if op == "list_threads":
        return lambda: client.get("/api/threads", params={"agentId": agent_id, "limit": 50})
    raise ValueError(op)


async def run_crud(job: CrudJob) -> list[CrudRecord]:
    records: list[CrudRecord] = []
    async with _client(job.base_url, job.headers, job.workers, 60.0) as client:
        await _warm(client, job.workers)
        await _sleep_until(job.start_at)

        async def worker(w: int) -> None:
            for i in range(job.requests_per_worker):
                if time.time() > job.stop_at:
                    return
                request = _crud_request(client, job.op, job.agent_id, w, i)
                t0 = time.perf_counter()
                try:
                    status = (await request()).status_code
                except httpx.HTTPError:
                    status = 0
                records.append((time.perf_counter() - t0, status))

        await asyncio.gather(*(worker(w) for w in range(job.workers)))
    return records


# --- the processes --------------------------------------------------------------------


def _runner() -> Callable[[Any], Any]:
    try:
        import uvloop  # noqa: PLC0415
    except ImportError:
        return asyncio.run
    return uvloop.run


def _client_main(conn: Connection, gauges: Any) -> None:
    raise_nofile()
    run = _runner()
    while True:
        try:
            job = conn.recv()
        except (EOFError, KeyboardInterrupt):
            return
        if job is None:
            return
        began, cpu0 = time.time(), time.process_time()
        try:
            if isinstance(job, TurnJob):
                records: list[Any] = run(run_turns(job, gauges))
            else:
                records = run(run_crud(job))
            failure = None
        except Exception as exc:  # noqa: BLE001 - reported to the parent
            records, failure = [], f"{type(exc).__name__}: {exc}"
        conn.send(
            JobResult(
                records, max(began, job.start_at), time.time(), time.process_time() - cpu0, failure
            )
        )


class ClientPool:
    """``n`` client processes; ``run(jobs)`` gives job ``i`` to process ``i``."""

    def __init__(self, n: int) -> None:
        ctx = mp.get_context("spawn")
        self.n = n
        self.gauges: list[Any] = []
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        self._busy: list[Connection] = []
        for i in range(n):
            parent, child = ctx.Pipe()
            gauges = ctx.Array("q", 3, lock=False)
            proc = ctx.Process(
                target=_client_main, args=(child, gauges), name=f"bench-client-{i}", daemon=True
            )
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
            self.gauges.append(gauges)

    def pids(self) -> list[int]:
        return [p.pid for p in self._procs]

    def gauge(self, index: int) -> int:
        return sum(g[index] for g in self.gauges)

    def reset_gauges(self) -> None:
        for g in self.gauges:
            for i in range(3):
                g[i] = 0

    def send(self, jobs: list[TurnJob | CrudJob | None]) -> None:
        """Give job ``i`` to process ``i`` (None: that process sits this one out)."""
        self._busy = []
        for conn, job in zip(self._conns, jobs, strict=False):
            if job is not None:
                conn.send(job)
                self._busy.append(conn)

    def ready(self) -> bool:
        return all(conn.poll(0) for conn in self._busy)

    def collect(self, timeout: float) -> list[JobResult]:
        results = []
        deadline = time.monotonic() + timeout
        for conn in self._busy:
            if not conn.poll(max(0.0, deadline - time.monotonic())):
                raise TimeoutError(f"a client process did not finish within {timeout:.0f}s")
            result = conn.recv()
            if result.failure:
                raise RuntimeError(f"client job failed: {result.failure}")
            results.append(result)
        self._busy = []
        return results

    def run(self, jobs: list[TurnJob | CrudJob | None], timeout: float) -> list[JobResult]:
        self.send(jobs)
        return self.collect(timeout)

    def close(self) -> None:
        for conn in self._conns:
            with contextlib.suppress(OSError, BrokenPipeError):
                conn.send(None)
        for proc in self._procs:
            proc.join(3)
            if proc.is_alive():
                proc.terminate()
                proc.join(3)
