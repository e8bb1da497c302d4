"""What stays of a deleted thread's records once its text is gone (docs/privacy.md).

A trace keeps its spans (names, timings, models, tokens, costs, outcomes) without
their payloads (prompts, replies, tool arguments and results) and error texts; a
runner run keeps its status, tokens and costs without its outputs (and its
events without the outputs and errors the run drops); a channel's
inbound message keeps its place (the platform's event id, so a redelivery is
still recognised) without its text. The memory adapter applies these; the
PostgreSQL adapter does the same in SQL.
"""

from __future__ import annotations

from uuid import UUID

import msgspec

from agentsvc_core.entities.channel import ChannelEvent
from agentsvc_core.entities.runner import RunEvent, RunnerRun
from agentsvc_core.entities.trace import StoredSpan, TraceEvaluation, TraceRecord

__all__ = [
    "ERASED",
    "event_without_text",
    "run_event_without_text",
    "run_without_text",
    "span_without_text",
    "touches",
    "trace_without_text",
]

ERASED = ""  # what a required text field holds once erased


def span_without_text(span: StoredSpan) -> StoredSpan:
    return msgspec.structs.replace(
        span, input=None, output=None, error=None, truncated=False, original_bytes=None
    )


def _evaluation(e: TraceEvaluation) -> TraceEvaluation:
    return msgspec.structs.replace(e, detail=None)


def trace_without_text(record: TraceRecord) -> TraceRecord:
    return msgspec.structs.replace(
        record,
        spans=[span_without_text(s) for s in record.spans],
        evaluations=[_evaluation(e) for e in record.evaluations],
    )


def touches(run: RunnerRun, thread_id: UUID) -> bool:
    """Whether the run talked in the thread (its own thread, or an agent step's)."""
    return run.thread_id == thread_id or any(s.thread_id == thread_id for s in run.steps)


def run_without_text(run: RunnerRun, thread_id: UUID) -> RunnerRun:
    """``run`` without its output, nor the outputs and errors of the steps that
    talked in ``thread_id`` (all of them when the run's own thread is that one)."""
    whole = run.thread_id == thread_id
    steps = tuple(
        msgspec.structs.replace(s, output=None, error=None)
        if whole or s.thread_id == thread_id
        else s
        for s in run.steps
    )
    return msgspec.structs.replace(run, output=None, steps=steps, version=run.version + 1)


def run_event_without_text(event: RunEvent, run: RunnerRun, thread_id: UUID) -> RunEvent:
    """``event`` of ``run`` without what ``run_without_text`` drops from the run:
    the run's output, and the output and error of a step that talked in
    ``thread_id`` (every step when the run's own thread is that one)."""
    step = event.data.get("thread_id") == str(thread_id) or run.thread_id == thread_id
    if event.type == "run.finished" or (event.type == "step.finished" and step):
        return msgspec.structs.replace(event, data=event.data | {"output": None})
    if event.type == "step.failed" and step:
        return msgspec.structs.replace(event, data=event.data | {"output": None, "error": None})
    return event


def event_without_text(event: ChannelEvent) -> ChannelEvent:
    return msgspec.structs.replace(event, text=ERASED, reply_text=None, thread_id=None)
