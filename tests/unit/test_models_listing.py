"""The model listing (use_cases/models.py; docs/models.md#listing): derived from the
router's rules and the price table, so that what it says of a model is what a turn
with that model does (the router's ``route``, the table's ``cost``)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from agentsvc_adapters.llm import Families, LocalModel, PrefixRouter
from agentsvc_adapters.prices import load_prices
from agentsvc_core.entities import Principal, Usage
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports import ChatModel, ModelEvent, ModelRequest
from agentsvc_core.pricing import Price, PriceTable
from agentsvc_core.use_cases.model_params import FamilyLimits
from agentsvc_core.use_cases.models import Models, example_of

WHO = Principal(org_id="o", method="jwt", user_id="member")


class Silent(ChatModel):
    def __init__(self, provider: str) -> None:
        self.provider = provider

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        return
        yield


def router(*, beta: bool = True, keyed: frozenset[str] = frozenset({"alpha"})) -> PrefixRouter:
    return PrefixRouter(
        Families(
            local=LocalModel(),
            alpha=Silent("alpha"),
            beta=Silent("beta") if beta else None,
            keyed=keyed,
        ),
        (("claude-", "alpha"), ("gpt-", "beta"), ("llama", "beta")),
    )


TABLE = PriceTable(
    [
        ("local", Price(input=0, output=0, cached_input=0)),
        ("claude-opus-4-5*", Price(input=5, output=25, cached_input=0.5, context_window=200000)),
        ("gpt-4o-mini*", Price(input=0.15, output=0.6)),
        ("gpt-4o*", Price(input=2.5, output=10, cached_input=1.25, context_window=128000)),
        ("gpt-4o-mini-2024*", Price(input=9, output=9)),  # shadowed by gpt-4o-mini*
        ("mistral-*", Price(input=1, output=1)),  # no route serves it
    ],
    taken="2026-11-01",
)


@pytest.mark.parametrize(
    ("pattern", "example"),
    [
        ("gpt-4o*", "gpt-4o"),
        ("gpt-5*-pro*", "gpt-5-pro"),
        ("o?-mini", "ox-mini"),
        ("claude-[34]-x", "claude-3-x"),
        ("local", "local"),
        ("a[!b]c", None),
        ("*", None),
    ],
)
def test_an_example_id_matches_its_pattern(pattern: str, example: str | None) -> None:
    assert example_of(pattern) == example


def test_the_listing_is_the_served_price_entries_then_the_routes_for_the_rest() -> None:
    listed = Models(router(), TABLE).list(WHO)
    assert [m.id for m in listed] == [
        "local",
        "claude-opus-4-5*",
        "gpt-4o-mini*",
        "gpt-4o*",
        "alpha:*",
        "beta:*",
        "claude-*",
        "gpt-*",
        "llama*",
    ]
    by_id = {m.id: m for m in listed}
    opus = by_id["claude-opus-4-5*"]
    assert (opus.example, opus.family, opus.sent_as, opus.route) == (
        "claude-opus-4-5",
        "alpha",
        "claude-opus-4-5",
        "claude-*",
    )
    assert (opus.key_configured, opus.context_window, opus.price_pattern) == (
        True,
        200000,
        "claude-opus-4-5*",
    )
    assert opus.price is not None
    assert (opus.price.input, opus.price.cached_input) == (5, 0.5)
    assert (opus.supports_native_compaction, opus.supports_summary_compaction) == (True, False)
    mini = by_id["gpt-4o-mini*"]
    assert mini.key_configured is False  # the beta family runs without a key here
    assert mini.price is not None
    assert mini.price.cached_input == 0.15
    assert mini.context_window is None
    assert (mini.supports_native_compaction, mini.supports_summary_compaction) == (False, True)
    named = by_id["alpha:*"]
    assert (named.example, named.sent_as, named.price) == ("alpha:custom", "custom", None)
    local = by_id["local"]
    assert (local.family, local.key_configured, local.supports_tools) == ("local", None, True)
    assert local.params == FamilyLimits(structured=False)  # its family's model parameters
    assert opus.params == FamilyLimits(max_temperature=1.0, one_sampler=True, blank_stop=False)
    assert mini.params == FamilyLimits()
    assert by_id["llama*"].price is None


def test_what_the_listing_says_is_what_a_turn_does() -> None:
    r = router()
    for m in Models(r, TABLE).list(WHO):
        model, name = r.route(m.example)
        assert (model.provider, name) == (m.family, m.sent_as)
        cost = TABLE.cost(m.example, Usage(input_tokens=1_000_000, output_tokens=0))
        assert cost == (None if m.price is None else m.price.input)


def test_an_unconfigured_family_is_not_listed() -> None:
    listed = Models(router(beta=False), TABLE).list(WHO)
    assert all(m.family != "beta" for m in listed)
    assert "gpt-4o*" not in {m.id for m in listed}


def test_one_model_is_what_its_turn_does_with_any_characters() -> None:
    models = Models(router(), TABLE)
    m = models.get(WHO, "alpha:claude-opus-4-5@2025+x/y")
    assert (m.id, m.family, m.sent_as, m.route) == (
        "alpha:claude-opus-4-5@2025+x/y",
        "alpha",
        "claude-opus-4-5@2025+x/y",
        "alpha:*",
    )
    assert m.price_pattern == "claude-opus-4-5*"  # the family prefix is not priced
    unknown = models.get(WHO, "gpt-unknown")
    assert (unknown.price, unknown.price_pattern, unknown.family) == (None, None, "beta")


@pytest.mark.parametrize("model_id", ["mistral-large", "", "alpha:"])
def test_a_model_no_route_serves_is_not_found_and_names_the_routes(model_id: str) -> None:
    with pytest.raises(NotFound) as caught:
        Models(router(), TABLE).get(WHO, model_id)
    assert caught.value.detail == (
        f"no route serves {model_id!r}; tried: local (local), alpha:* (alpha), beta:* (beta),"
        " claude-* (alpha), gpt-* (beta), llama* (beta)"
    )
    with pytest.raises(InvalidInput):
        router().route(model_id)


def test_a_model_of_an_unconfigured_family_is_not_found() -> None:
    with pytest.raises(NotFound, match=r"gpt-\* \(beta, not configured\)"):
        Models(router(beta=False), TABLE).get(WHO, "gpt-4o")


def test_the_shipped_table_lists_context_windows_and_every_priced_model_routes() -> None:
    listed = Models(router(), load_prices()).list(WHO)
    opus = next(m for m in listed if m.id == "claude-opus-4-5*")
    assert opus.context_window == 200000
    gpt = next(m for m in listed if m.id == "gpt-4.1*")
    assert gpt.context_window == 1047576
    assert next(m for m in listed if m.id == "local").context_window is None
