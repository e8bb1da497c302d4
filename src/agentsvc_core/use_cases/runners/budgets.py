"""A runner's budget against one run (docs/runners.md): which limit a
run has reached (spent >= limit), and the share of a limit used once past the
budget's soft limit. The daily limits count the runner's spending since midnight
UTC (``day_start``)."""

from __future__ import annotations

import math
from datetime import UTC, datetime

from agentsvc_core.entities import Usage
from agentsvc_core.entities.runner import Budget, Runner, RunnerRun
from agentsvc_core.ports import Clock
from agentsvc_core.ports.runners import RunnerStore
from agentsvc_core.pricing import PriceTable

__all__ = ["BudgetCheck", "Budgets", "day_start", "reached", "share_pct"]


def day_start(now: datetime) -> datetime:
    """Midnight UTC of ``now``'s day: the daily budget's window starts there."""
    return now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)


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

    @property
    def pauses(self) -> bool:
        """Whether a limit reached pauses the run (else it fails it)."""
        return self._b.on_exceed == "pause"


class Budgets:
    """Each step's budget check: the runner's limits, and what it spent today."""

    def __init__(self, store: RunnerStore, clock: Clock, prices: PriceTable) -> None:
        self._store = store
        self._clock = clock
        self._prices = prices

    async def check(self, run: RunnerRun, runner: Runner | None) -> BudgetCheck | None:
        """The run's budget check as a step starts (None: no limit applies, or the
        run is an agent's scheduled task, which has no budget)."""
        if runner is None:
            return None
        b = runner.budget
        today = (0, 0.0)
        if b.daily_cost_usd is not None or b.daily_tokens is not None:
            today = await self._store.spent_since(
                run.org_id, runner.id, day_start(self._clock.now())
            )
        limits = (b.max_cost_usd_per_run, b.max_tokens_per_run, b.daily_cost_usd, b.daily_tokens)
        if all(v is None for v in limits):
            return None
        return BudgetCheck(b, run, today, self._prices)
