"""What the runner engine (engine.py) is made of besides the engine itself: its
control-flow exceptions, a step's outcome, the context expressions see, and the
pure changes it writes to a run (each a function of the run as last read, for
compare-and-set)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities.runner import (
    NEXT,
    STOP,
    RunnerRun,
    StepRun,
)
from agentsvc_core.ports.runners import RunnerStore

__all__ = [
    "MAX_OUTPUT_CHARS",
    "Busy",
    "Later",
    "Outcome",
    "Taken",
    "context_of",
    "json_or_none",
    "next_index",
    "reply_output",
    "still",
    "update_run",
    "with_step",
    "with_turn",
]


MAX_OUTPUT_CHARS = 100_000  # a step's text output kept in the run (the thread has it all)


class Later(Exception):
    """Try the run again after ``delay_s`` (its thread is busy; an earlier run of
    its trigger is still running)."""

    def __init__(self, delay_s: float) -> None:
        super().__init__(delay_s)
        self.delay_s = delay_s


class Busy(Exception):
    """The step's thread is busy with a turn that is not the step's (a user's, on a
    scheduled task's thread; a killed process's, not yet marked interrupted)."""


class Taken(Exception):
    """Another process started the step (two jobs of one run): this one stops."""


class Outcome(msgspec.Struct, kw_only=True):
    ok: bool
    output: Any = None
    error: str | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    model: str | None = None
    next: str = NEXT  # a condition's choice
    paused: str | None = None  # a budget's reason


def context_of(run: RunnerRun) -> dict[str, Any]:
    """What expressions see: the input and the steps run so far."""
    return {
        "input": run.input,
        "steps": {
            s.step_id: {"status": s.status, "output": s.output}
            for s in run.steps
            if s.status != "pending"
        },
    }


def json_or_none(text: str) -> Any:
    stripped = text.strip()
    if not stripped or stripped[0] not in "{[":
        return None
    try:
        return msgspec.json.decode(stripped)
    except msgspec.DecodeError:
        return None


def still(run: RunnerRun, expected: str, **fields: Any) -> RunnerRun | None:
    """The run changed by ``fields`` if its status is still ``expected`` (else None:
    leave it)."""
    if run.status != expected:
        return None
    return msgspec.structs.replace(run, **fields)


def with_step(run: RunnerRun, index: int, state: StepRun, *, expect: StepRun) -> RunnerRun | None:
    """The step's start checkpoint, unless the run stopped running or another
    process started the step meanwhile (its attempt moved on)."""
    if run.status != "running" or run.steps[index] != expect:
        return None
    steps = list(run.steps)
    steps[index] = state
    return msgspec.structs.replace(
        run, steps=tuple(steps), updated_at=state.started_at or run.updated_at
    )


def with_turn(run: RunnerRun, index: int, state: StepRun, turn_id: UUID) -> RunnerRun | None:
    """The step's turn noted, if the step is still this attempt's."""
    current = run.steps[index]
    if (current.attempt, current.started_at) != (state.attempt, state.started_at):
        return None
    steps = list(run.steps)
    steps[index] = msgspec.structs.replace(current, turn_id=turn_id)
    return msgspec.structs.replace(run, steps=tuple(steps))


def next_index(run: RunnerRun, index: int, choice: str) -> int:
    """The index of the step after step ``index`` (``len(pipeline)``: the end)."""
    if choice == NEXT:
        return index + 1
    if choice == STOP:
        return len(run.pipeline)
    return next((i for i, s in enumerate(run.pipeline) if s.id == choice), len(run.pipeline))


async def update_run(
    store: RunnerStore, run: RunnerRun, change: Callable[[RunnerRun], RunnerRun | None]
) -> RunnerRun:
    """Apply ``change`` to the run and store it (compare-and-set on its version),
    reading it again as long as another write comes first; ``change`` answering
    None leaves the run as it is (and may raise, to refuse)."""
    while True:
        changed = change(run)
        if changed is None:
            return run
        saved = await store.save_run(changed)
        if saved is not None:
            return saved
        run = await store.get_run(run.org_id, run.id)


def reply_output(text: str, thread_id: UUID, message_id: UUID | None) -> dict[str, Any]:
    """An agent step's output: its reply (cut at ``MAX_OUTPUT_CHARS``), the reply as
    JSON when it is JSON, and where it is."""
    text = text[:MAX_OUTPUT_CHARS]
    return {
        "text": text,
        "json": json_or_none(text),
        "thread_id": str(thread_id),
        "message_id": None if message_id is None else str(message_id),
    }
