"""The model price table: the shipped ``data/prices.json``, and an operator's override
file (``AGENTSVC_PRICES_FILE``) whose entries are tried first.

File format (both files)::

    {"taken": "2025-12-01", "source": "...",
     "prices": [{"model": "gpt-4o-mini*", "input": 0.15, "output": 0.6,
                 "cachedInput": 0.075}, ...]}

USD per million tokens; ``model`` a glob over the model id (``agentsvc_core.pricing``);
``cachedInput`` and ``contextWindow`` (tokens, for the model listing) optional.
``taken`` is required in the shipped file and optional in an
override (default: the shipped date). Unknown fields are refused, so a misspelt
``cached_input`` is an error rather than a silently missing discount.
"""

from __future__ import annotations

import datetime as dt
import functools
from importlib import resources
from pathlib import Path
from typing import Annotated

import msgspec

from agentsvc_core.pricing import Price, PriceTable

__all__ = ["SHIPPED", "PriceFileError", "load_prices"]

SHIPPED = "agentsvc_adapters/data/prices.json"
"""How the shipped file is named in error messages (it is read as package data)."""

_Dollars = Annotated[float, msgspec.Meta(ge=0)]


class PriceFileError(ValueError):
    """A price file cannot be read or is malformed; the message names the file and
    what is wrong (with the JSON path, e.g. ``$.prices[2].input``)."""


class _Entry(msgspec.Struct, frozen=True, kw_only=True, rename="camel", forbid_unknown_fields=True):
    model: Annotated[str, msgspec.Meta(min_length=1)]
    input: _Dollars
    output: _Dollars
    cached_input: _Dollars | None = None
    context_window: Annotated[int, msgspec.Meta(ge=1)] | None = None


class _File(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    prices: list[_Entry]
    taken: dt.date | None = None
    source: str | None = None


def _decode(raw: bytes, name: str) -> _File:
    try:
        return msgspec.json.decode(raw, type=_File)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise PriceFileError(f"price file {name}: {exc}") from None


def _table(parsed: _File, taken: str) -> PriceTable:
    # The decoder has bounded every price (>= 0; JSON has no NaN, and msgspec refuses
    # numbers out of a float's range), so Price's own check cannot fail here.
    entries = [
        (
            e.model,
            Price(
                input=e.input,
                output=e.output,
                cached_input=e.cached_input,
                context_window=e.context_window,
            ),
        )
        for e in parsed.prices
    ]
    return PriceTable(entries, taken)


@functools.cache
def _shipped() -> PriceTable:
    """Read once per process: the file is part of the package and never changes."""
    raw = (resources.files("agentsvc_adapters") / "data" / "prices.json").read_bytes()
    parsed = _decode(raw, SHIPPED)
    if parsed.taken is None:
        raise PriceFileError(f"price file {SHIPPED}: `taken` (YYYY-MM-DD) is required")
    return _table(parsed, parsed.taken.isoformat())


def load_prices(override: Path | None = None) -> PriceTable:
    """The shipped table, with ``override``'s entries merged in front when given.

    Raises ``PriceFileError`` when a file cannot be read or is malformed.
    """
    shipped = _shipped()
    if override is None:
        return shipped
    try:
        raw = override.read_bytes()
    except OSError as exc:
        reason = exc.strerror or exc
        raise PriceFileError(f"price file {override}: cannot be read: {reason}") from None
    parsed = _decode(raw, str(override))
    taken = shipped.taken if parsed.taken is None else parsed.taken.isoformat()
    return shipped.merge(_table(parsed, taken))
