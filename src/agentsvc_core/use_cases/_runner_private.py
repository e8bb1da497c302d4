"""What the runner engine (use_cases/runner_engine.py) is made of besides the
engine itself: its control-flow exceptions, a step's outcome, the budget check,
the context expressions see, and the pure changes it writes to a run (each a
function of the run as last read, for compare-and-set)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any
from uuid import UUID

import msgspec

from agentsvc_core.entities import Usage
from agentsvc_core.entities.runner import (
    NEXT,
    STOP,
    Budget,
    RunnerRun,
    StepRun,
)
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.pricing import PriceTable

__all__ = [
    "MAX_OUTPUT_CHARS",
    "BudgetCheck",
    "Busy",
    "Later",
    "Outcome",
    "Taken",
    "context_of",
    "json_or_none",
    "next_index",
    "reached",
    "reply_output",
    "share_pct",
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


# what a limit's ``why`` says, by limit: (spent, limit) filled in
_REACHED = {
    "max_tokens_per_run": "the run has used {} tokens of its {}",
    "max_cost_usd_per_run": "the run has cost {:.6f} USD of its {:.6f}",
    "daily_tokens": "the runner has used {} tokens today of {}",
    "daily_cost_usd": "the runner has cost {:.6f} USD today of {:.6f}",
}


def reached(spent: float, limit: float) -> bool:
    """Whether ``spent`` has reached ``limit`` (a limit is reached at equality).
    Costs are sums of floats: they are compared to 10 decimal places, the
    precision of a call's cost (``PriceTable.cost``), so 0.7 + 0.1 USD reaches 0.8
    (token counts are whole: rounding leaves them as they are)."""
    return round(spent, 10) >= round(limit, 10)


def share_pct(spent: float, limit: float) -> int:
    """The whole percentage of ``limit`` that ``spent`` is, rounded down (33 of
    20 is 165; 79.9% is 79), a float sum's noise below a millionth of a percent
    left out; ``limit`` is above zero."""
    return math.floor(round(spent * 100 / limit, 6))


class BudgetCheck:
    """A runner's budget against one run: per-run limits (raised by resumes) and
    the runner's spending today (read once, when the step starts; it includes
    this run's spending so far)."""

    def __init__(
        self, budget: Budget, run: RunnerRun, today: tuple[int, float], prices: PriceTable
    ) -> None:
        self._b = budget
        self._run = run
        self._today = today
        self._prices = prices

    def spending(self, tokens: int, cost: float) -> list[tuple[str, float, float]]:
        """(limit's name, spent, limit) of each limit the budget sets, in the order
        they are checked, having spent ``tokens`` and ``cost`` beyond what the
        run's row and today's sum say; a per-run limit includes what resumes
        raised it by."""
        b, run = self._b, self._run
        extra_tokens, extra_usd = run.budget_extra_tokens, run.budget_extra_usd
        rows: list[tuple[str, float, float | None]] = [
            (
                "max_tokens_per_run",
                run.tokens + tokens,
                None if b.max_tokens_per_run is None else b.max_tokens_per_run + extra_tokens,
            ),
            (
                "max_cost_usd_per_run",
                run.cost_usd + cost,
                None if b.max_cost_usd_per_run is None else b.max_cost_usd_per_run + extra_usd,
            ),
            ("daily_tokens", self._today[0] + tokens, b.daily_tokens),
            ("daily_cost_usd", self._today[1] + cost, b.daily_cost_usd),
        ]
        return [(name, spent, limit) for name, spent, limit in rows if limit is not None]

    def why(self, tokens: int = 0, cost: float = 0.0) -> str | None:
        """Why no further step may start and no further model call be made, having
        spent ``tokens`` and ``cost`` beyond what the run's row says: the first
        limit reached (spent >= limit)."""
        for name, spent, limit in self.spending(tokens, cost):
            if reached(spent, limit):
                return _REACHED[name].format(spent, limit)
        return None

    def warning(self, tokens: int = 0, cost: float = 0.0) -> str | None:
        """A note once the run or the day has used ``soft_limit_pct`` or more of a
        limit, having spent ``tokens`` and ``cost`` beyond what the run's row says:
        the share actually used of the limit most used (``"165% of
        max_tokens_per_run used"``)."""
        most: tuple[int, str] | None = None  # the first of the limits most used
        for name, spent, limit in self.spending(tokens, cost):
            if limit > 0 and (most is None or share_pct(spent, limit) > most[0]):
                most = (share_pct(spent, limit), name)
        if most is None or most[0] < self._b.soft_limit_pct:
            return None
        return f"{most[0]}% of {most[1]} used"

    async def gate(self, usage: Usage, model_id: str) -> str | None:
        cost = self._prices.cost(model_id, usage) or 0.0
        return self.why(usage.input_tokens + usage.output_tokens, cost)


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
