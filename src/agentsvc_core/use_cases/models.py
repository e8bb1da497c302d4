"""The models this deployment can route (``GET /api/models``; docs/models.md#listing).

Derived from the two tables a turn uses, never from a list of its own: the
router's rules (``ModelRouter.routes`` / ``match``, which ``route`` walks too) and
the price table (``PriceTable.entries`` / ``price``, which ``cost`` reads). A listed
model is a price entry whose pattern the router serves, or a router rule itself
(the ids no price entry names); its ``example`` is an id it covers, which a turn
routes and prices as the listing says.
"""

from __future__ import annotations

import re
from fnmatch import fnmatchcase

import msgspec

from agentsvc_core.entities import Principal
from agentsvc_core.errors import NotFound
from agentsvc_core.ports import ModelRoute, ModelRouter, RouteMatch
from agentsvc_core.ports.llm import NATIVE_COMPACTION_FAMILIES, SUMMARY_COMPACTION_FAMILIES
from agentsvc_core.pricing import Price, PriceTable
from agentsvc_core.use_cases.model_params import FamilyLimits, limits_of

__all__ = ["ModelInfo", "ModelPrice", "Models", "example_of"]

# what stands for a route's free part in its example (``claude-*`` -> ``claude-custom``)
_FREE = "custom"
_CLASS = re.compile(r"\[(!?)([^\]]*)\]")


class ModelPrice(msgspec.Struct, frozen=True, kw_only=True):
    """USD per million tokens; ``cached_input`` is what a cached input token costs
    (the input price when the table has no discount)."""

    input: float
    output: float
    cached_input: float


class ModelInfo(msgspec.Struct, frozen=True, kw_only=True):
    """A model (or a pattern of model ids) the deployment routes.

    ``id``: the pattern listed (a glob) or the id asked for; ``example``: an id it
    covers; ``family``: the provider family a turn calls; ``sent_as``: the model
    name that family is sent for ``example``; ``route``: the router's rule that
    takes it; ``key_configured``: the deployment has its own key for the family
    (None: ``local`` needs none; a turn may still use a per-user key from the
    agent's credential resolver); ``price_pattern``: the price entry that prices it
    (None with ``price`` None: its cost is unknown, recorded as null)."""

    id: str
    example: str
    family: str
    sent_as: str
    route: str
    key_configured: bool | None
    context_window: int | None
    price: ModelPrice | None
    price_pattern: str | None
    supports_tools: bool
    supports_native_compaction: bool
    supports_summary_compaction: bool
    # the model parameters its family honours (use_cases/model_params.py)
    params: FamilyLimits


def example_of(pattern: str) -> str | None:
    """An id the glob ``pattern`` matches: ``*`` left out, ``?`` and a class taken
    as one of their characters. None when none could be made (a negated class)."""
    out = _CLASS.sub(lambda m: "" if m.group(1) or not m.group(2) else m.group(2)[0], pattern)
    out = out.replace("*", "").replace("?", "x")
    return out if out and fnmatchcase(out, pattern) else None


class Models:
    def __init__(self, router: ModelRouter, prices: PriceTable) -> None:
        self._router = router
        self._prices = prices

    def list(self, who: Principal) -> list[ModelInfo]:
        """Every model a turn can be sent to here: the price table's entries the
        router serves (in the table's order; one an earlier entry shadows is left
        out), then the router's rules for the ids no entry names. Any member may
        read it (``who`` only needs to be signed in)."""
        del who
        out: list[ModelInfo] = []
        seen: set[str] = set()
        for pattern, price in self._prices.entries:
            example = example_of(pattern)
            if example is None or pattern in seen or self._prices.price(example) is not price:
                continue
            found = self._router.match(example)
            if found is None or not found.route.configured:
                continue
            seen.add(pattern)
            out.append(self._info(pattern, example, found))
        for route in self._router.routes():
            example = route.pattern.replace("*", _FREE)
            found = self._router.match(example)
            if not route.configured or route.pattern in seen or found is None:
                continue
            seen.add(route.pattern)
            out.append(self._info(route.pattern, example, found))
        return out

    def get(self, who: Principal, model_id: str) -> ModelInfo:
        """What a turn with ``model_id`` would do: its family, price, context window.
        ``NotFound`` naming the rules tried when no configured family serves it."""
        del who
        found = self._router.match(model_id)
        if found is None or not found.route.configured:
            raise NotFound(f"no route serves {model_id!r}; tried: {self._tried()}")
        return self._info(model_id, model_id, found)

    def _tried(self) -> str:
        return ", ".join(
            f"{r.pattern} ({r.family}{'' if r.configured else ', not configured'})"
            for r in self._router.routes()
        )

    def _info(self, listed: str, example: str, found: RouteMatch) -> ModelInfo:
        route: ModelRoute = found.route
        price = self._prices.price(example)
        return ModelInfo(
            id=listed,
            example=example,
            family=route.family,
            sent_as=found.name,
            route=route.pattern,
            key_configured=route.key_configured,
            context_window=None if price is None else price.context_window,
            price=_price(price),
            price_pattern=self._pattern_of(price),
            supports_tools=True,  # every family's adapter sends the tools offered
            supports_native_compaction=route.family in NATIVE_COMPACTION_FAMILIES,
            supports_summary_compaction=route.family in SUMMARY_COMPACTION_FAMILIES,
            params=limits_of(route.family),
        )

    def _pattern_of(self, price: Price | None) -> str | None:
        return next((p for p, q in self._prices.entries if q is price), None)


def _price(price: Price | None) -> ModelPrice | None:
    if price is None:
        return None
    return ModelPrice(input=price.input, output=price.output, cached_input=price.cached)
