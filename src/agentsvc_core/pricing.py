"""What a model call cost in USD, from a table of list prices (docs/models.md).

The table maps model id patterns (globs, case-sensitive, tried in order, the first
match wins) to a price per million input, output and cached input tokens. It is
pure: the shipped data file and an operator's override are read by
``agentsvc_adapters.prices``, and the turn asks ``PriceTable.cost`` once per model
call, so the lookup is cached per model id.

An unknown model costs ``None``, never ``0``: a zero would read as "free" in
analytics and hide a missing price; ``None`` reads as "not known".
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fnmatch import fnmatchcase

import msgspec

from agentsvc_core.entities import Usage

__all__ = ["CACHE_MAX_MODELS", "FAMILY_PREFIXES", "Price", "PriceTable", "bare_model"]

FAMILY_PREFIXES = ("alpha:", "beta:")
"""``alpha:NAME`` / ``beta:NAME`` name the provider family (docs/models.md); the
price belongs to ``NAME``, so the prefix is stripped before matching."""

CACHE_MAX_MODELS = 1024
"""Model ids remembered per table. A process sees a handful, but the id comes from
requests, so the memo is bounded: past this many it starts afresh."""

_PER = 1_000_000  # prices are per million tokens
_DIGITS = 10  # costs are rounded to 1e-10 USD: float noise off, far below a token's price


class Price(msgspec.Struct, frozen=True, kw_only=True):
    """USD per million tokens. ``cached_input`` ``None``: the provider gives no
    discount for cache reads (or the table does not know it), so they cost ``input``.
    ``context_window``: the model's context window in tokens, None where the table
    does not know it (it costs nothing; the model listing shows it)."""

    input: float
    output: float
    cached_input: float | None = None
    context_window: int | None = None

    def __post_init__(self) -> None:
        # A negative or NaN price would make costs negative or NaN in every sum
        # downstream; refused here so no table can hold one, whatever built it.
        for name in ("input", "output", "cached_input"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name} must be a finite price >= 0, not {value!r}")
        if self.context_window is not None and self.context_window < 1:
            raise ValueError(f"context_window must be >= 1, not {self.context_window!r}")

    @property
    def cached(self) -> float:
        """What a cached input token costs per million: ``input`` without a discount."""
        return self.input if self.cached_input is None else self.cached_input


def bare_model(model: str) -> str:
    """The model id without a leading ``alpha:`` / ``beta:`` family prefix."""
    for prefix in FAMILY_PREFIXES:
        if model.startswith(prefix):
            return model[len(prefix) :]
    return model


class PriceTable:
    """Ordered ``(glob, Price)`` entries and the ISO date (``taken``) the prices were
    taken. Read-only once built; ``merge`` makes a new table."""

    __slots__ = ("_entries", "_memo", "taken")

    def __init__(self, entries: Sequence[tuple[str, Price]], taken: str) -> None:
        for pattern, _ in entries:
            if not pattern:
                raise ValueError("a price table's model pattern must not be empty")
        self._entries: tuple[tuple[str, Price], ...] = tuple(entries)
        self.taken = taken
        self._memo: dict[str, Price | None] = {}

    @property
    def entries(self) -> tuple[tuple[str, Price], ...]:
        return self._entries

    def price(self, model: str) -> Price | None:
        """The first entry whose pattern matches the model id (family prefix
        stripped), or ``None``."""
        try:
            return self._memo[model]
        except KeyError:
            pass
        bare = bare_model(model)
        found = next((p for pattern, p in self._entries if fnmatchcase(bare, pattern)), None)
        if len(self._memo) >= CACHE_MAX_MODELS:
            self._memo.clear()
        self._memo[model] = found
        return found

    def cost(self, model: str, usage: Usage) -> float | None:
        """USD for one call, rounded to 10 decimal places; ``None`` for an unknown model.

        ``usage.input_tokens`` includes the cached input tokens (both families report
        it so: ``agentsvc_adapters.llm.alpha``), which are charged at the cached price
        (the input price when the table has none). A report with more cached than
        input tokens charges the cached ones and no uncached ones rather than going
        negative: a cost is never below zero.
        """
        price = self.price(model)
        if price is None:
            return None
        input_tokens = max(usage.input_tokens, 0)
        cached = max(usage.cached_input_tokens or 0, 0)
        uncached = max(input_tokens - cached, 0)
        total = (
            uncached * price.input
            + cached * price.cached
            + max(usage.output_tokens, 0) * price.output
        )
        return round(total / _PER, _DIGITS)

    def merge(self, override: PriceTable) -> PriceTable:
        """A new table: ``override``'s entries first (they win), then these; the
        override's ``taken``."""
        return PriceTable((*override.entries, *self._entries), override.taken)

    def __repr__(self) -> str:
        return f"PriceTable({len(self._entries)} entries, taken={self.taken!r})"
