"""The model price table (docs/models.md, "Prices"): glob matching in order, the cost of a
call with and without cached input, unknown models costing None, the shipped file,
an operator's override, and AGENTSVC_PRICES_FILE."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_adapters.prices import PriceFileError, load_prices
from agentsvc_core.entities import Usage
from agentsvc_core.pricing import CACHE_MAX_MODELS, Price, PriceTable
from agentsvc_web.settings import Settings, SettingsError

MINI = Price(input=0.15, output=0.6, cached_input=0.075)
FULL = Price(input=2.5, output=10, cached_input=1.25)
NO_CACHE_PRICE = Price(input=5, output=15)

TABLE = PriceTable(
    [
        ("gpt-4o-mini*", MINI),
        ("gpt-4o-2024-05-13", NO_CACHE_PRICE),
        ("gpt-4o*", FULL),
        ("local", Price(input=0, output=0, cached_input=0)),
    ],
    taken="2026-11-01",
)


def usage(i: int = 0, o: int = 0, cached: int | None = None) -> Usage:
    return Usage(input_tokens=i, output_tokens=o, cached_input_tokens=cached)


def write(path: Path, doc: Any) -> Path:
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return path


# -- matching ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("gpt-4o-mini", MINI),
        ("gpt-4o-mini-2024-07-18", MINI),  # the first match wins, not the longest
        ("gpt-4o-2024-05-13", NO_CACHE_PRICE),
        ("gpt-4o-2024-08-06", FULL),
        ("gpt-4o", FULL),
        ("GPT-4o", None),  # case-sensitive
        ("xgpt-4o", None),  # a glob matches the whole id
        ("gpt-4", None),
    ],
)
def test_the_first_matching_pattern_gives_the_price(model: str, expected: Price | None) -> None:
    assert TABLE.price(model) == expected


def test_the_order_of_entries_decides() -> None:
    general_first = PriceTable([("gpt-4o*", FULL), ("gpt-4o-mini*", MINI)], "2026-11-01")
    assert general_first.price("gpt-4o-mini") == FULL


@pytest.mark.parametrize("prefix", ["alpha:", "beta:"])
def test_a_family_prefix_is_stripped_before_matching(prefix: str) -> None:
    assert TABLE.price(f"{prefix}gpt-4o-mini") == MINI
    assert TABLE.cost(f"{prefix}gpt-4o", usage(1_000_000)) == 2.5


def test_only_one_known_family_prefix_is_stripped() -> None:
    assert TABLE.price("gamma:gpt-4o") is None
    assert TABLE.price("beta:alpha:gpt-4o") is None


def test_the_lookup_is_remembered_and_bounded() -> None:
    table = PriceTable([("m-*", MINI)], "2026-11-01")
    assert table.price("m-1") == MINI
    assert table.price("m-1") is table.price("m-1")
    for n in range(CACHE_MAX_MODELS * 2):
        assert table.price(f"m-{n}") == MINI
        assert table.price(f"x-{n}") is None
    assert len(table._memo) <= CACHE_MAX_MODELS


def test_an_empty_pattern_is_refused() -> None:
    with pytest.raises(ValueError, match="empty"):
        PriceTable([("", MINI)], "2026-11-01")


@pytest.mark.parametrize("bad", [-0.01, float("inf"), float("nan")])
def test_a_price_is_finite_and_not_negative(bad: float) -> None:
    with pytest.raises(ValueError, match="input"):
        Price(input=bad, output=1)
    with pytest.raises(ValueError, match="cached_input"):
        Price(input=1, output=1, cached_input=bad)


# -- cost -------------------------------------------------------------------------


def test_cost_without_cached_tokens() -> None:
    # 1000 * 2.5 + 500 * 10 = 7500 per million
    assert TABLE.cost("gpt-4o", usage(1000, 500)) == 0.0075
    assert TABLE.cost("gpt-4o", usage(1000, 500, cached=0)) == 0.0075


def test_cached_input_tokens_are_part_of_input_and_cost_the_cached_price() -> None:
    # 800 uncached * 0.15 + 200 cached * 0.075 + 500 * 0.6 = 120 + 15 + 300 per million
    assert TABLE.cost("gpt-4o-mini", usage(1000, 500, cached=200)) == 0.000435


def test_without_a_cached_price_cached_tokens_cost_the_input_price() -> None:
    plain = TABLE.cost("gpt-4o-2024-05-13", usage(1000, 100))
    assert TABLE.cost("gpt-4o-2024-05-13", usage(1000, 100, cached=600)) == plain == 0.0065


def test_more_cached_than_input_tokens_never_goes_negative() -> None:
    # an inconsistent report: the cached ones are charged, no uncached ones
    assert TABLE.cost("gpt-4o", usage(100, 0, cached=400)) == 0.0005


def test_cost_is_rounded_to_ten_decimal_places() -> None:
    cost = TABLE.cost("gpt-4o-mini", usage(1, 1, cached=1))  # 0.075e-6 + 0.6e-6
    assert cost == 6.75e-7
    assert TABLE.cost("gpt-4o-mini", usage(3, 0)) == 4.5e-7  # 3 * 0.15 has float noise


def test_an_unknown_model_costs_none_not_zero() -> None:
    assert TABLE.price("claude-sonnet-4-5") is None
    assert TABLE.cost("claude-sonnet-4-5", usage(1000, 1000)) is None
    assert TABLE.cost("claude-sonnet-4-5", usage()) is None


def test_local_costs_zero() -> None:
    assert TABLE.cost("local", usage(10_000, 5_000, cached=100)) == 0.0
    assert load_prices().cost("local", usage(10_000, 5_000, cached=100)) == 0.0


_tokens = st.integers(min_value=0, max_value=10**9)
_prices = st.floats(min_value=0, max_value=1000, allow_nan=False)


@given(
    price=st.builds(Price, input=_prices, output=_prices, cached_input=st.none() | _prices),
    i=_tokens,
    o=_tokens,
    more=_tokens,
    cached=st.none() | _tokens,
)
def test_cost_is_never_negative_and_grows_with_output(
    price: Price, i: int, o: int, more: int, cached: int | None
) -> None:
    table = PriceTable([("*", price)], "2026-11-01")
    cost = table.cost("m", usage(i, o, cached))
    more_output = table.cost("m", usage(i, o + more, cached))
    assert cost is not None
    assert more_output is not None
    assert 0 <= cost <= more_output


# -- merge and files --------------------------------------------------------------


def test_merge_puts_the_override_first_with_its_date() -> None:
    cheap = Price(input=0.01, output=0.02)
    override = PriceTable([("gpt-4o*", cheap)], "2026-12-24")
    merged = TABLE.merge(override)
    assert merged.taken == "2026-12-24"
    assert merged.entries == (("gpt-4o*", cheap), *TABLE.entries)
    assert merged.price("gpt-4o-mini") == cheap  # the override's glob shadows the shipped one
    assert TABLE.price("gpt-4o-mini") == MINI  # the original is unchanged


def test_the_shipped_file_loads_and_every_entry_is_well_formed() -> None:
    table = load_prices()
    assert load_prices() is table  # read once
    assert len(table.taken) == 10
    assert table.taken[4] == table.taken[7] == "-"
    assert table.entries
    seen: set[str] = set()
    for pattern, price in table.entries:
        assert pattern
        assert pattern not in seen
        seen.add(pattern)
        assert not set(pattern) & set("?[]")  # plain prefixes and stars only
        assert price.input >= 0
        assert price.output >= price.input or pattern == "local"
        assert price.cached_input is None or price.cached_input <= price.input
        # no entry is shadowed by a more general one before it
        assert table.price(pattern.replace("*", "")) is price, pattern


@pytest.mark.parametrize(
    ("model", "input_price", "output_price"),
    [
        ("claude-opus-4-5-20251101", 5, 25),
        ("claude-opus-4-1-20250805", 15, 75),
        ("alpha:claude-sonnet-4-5", 3, 15),
        ("claude-haiku-4-5", 1, 5),
        ("claude-3-7-sonnet-20250219", 3, 15),
        ("claude-3-5-haiku-latest", 0.8, 4),
        ("gpt-4o-mini", 0.15, 0.6),
        ("beta:gpt-4o", 2.5, 10),
        ("gpt-4.1-mini", 0.4, 1.6),
        ("gpt-5", 1.25, 10),
        ("gpt-5-mini", 0.25, 2),
        ("o1", 15, 60),
        ("o3", 2, 8),
        ("o3-mini", 1.1, 4.4),
        ("o4-mini", 1.1, 4.4),
    ],
)
def test_the_shipped_table_prices_the_common_models(
    model: str, input_price: float, output_price: float
) -> None:
    price = load_prices().price(model)
    assert price is not None
    assert (price.input, price.output) == (input_price, output_price)


def test_an_override_file_is_tried_first(tmp_path: Path) -> None:
    path = write(
        tmp_path / "prices.json",
        {
            "taken": "2026-11-01",
            "prices": [
                {"model": "gpt-4o-mini*", "input": 0.1, "output": 0.2, "cachedInput": 0.05},
                {"model": "my-llama*", "input": 0, "output": 0},
            ],
        },
    )
    table = load_prices(path)
    assert table.taken == "2026-11-01"
    assert table.price("gpt-4o-mini") == Price(input=0.1, output=0.2, cached_input=0.05)
    assert table.cost("beta:my-llama-70b", usage(100, 100)) == 0.0
    assert table.price("gpt-4o") == load_prices().price("gpt-4o")  # the rest still shipped


def test_an_override_without_a_date_takes_the_shipped_one(tmp_path: Path) -> None:
    path = write(tmp_path / "p.json", {"prices": [{"model": "x", "input": 1, "output": 2}]})
    assert load_prices(path).taken == load_prices().taken


@pytest.mark.parametrize(
    ("doc", "what"),
    [
        ("{not json", "malformed"),
        ({"taken": "2026-11-01"}, "prices"),
        ({"prices": [{"model": "", "input": 1, "output": 1}]}, r"\$\.prices\[0\]\.model"),
        ({"prices": [{"model": "x", "input": -1, "output": 1}]}, r"\$\.prices\[0\]\.input"),
        (
            {"prices": [{"model": "x", "input": 1, "output": 1, "cachedInput": -0.5}]},
            r"\$\.prices\[0\]\.cachedInput",
        ),
        ({"prices": [{"model": "x", "input": "1", "output": 1}]}, "float"),
        ({"prices": [{"model": "x", "output": 1}]}, "input"),
        ({"prices": [{"model": "x", "input": 1, "output": 1, "cached_input": 1}]}, "cached_input"),
        # beyond a float's range: msgspec refuses it rather than reading inf
        ('{"prices": [{"model": "x", "input": 1e400, "output": 1}]}', r"\$\.prices\[0\]\.input"),
        ({"taken": "1 Nov 2026", "prices": []}, "taken"),
        ({"taken": "2026-02-30", "prices": []}, "taken"),
    ],
)
def test_a_malformed_override_names_the_file_and_the_fault(
    tmp_path: Path, doc: Any, what: str
) -> None:
    path = write(tmp_path / "bad-prices.json", doc)
    with pytest.raises(PriceFileError, match=what) as err:
        load_prices(path)
    assert str(path) in str(err.value)
    assert isinstance(err.value, ValueError)


def test_a_missing_override_file_is_a_price_file_error(tmp_path: Path) -> None:
    with pytest.raises(PriceFileError, match=r"nope\.json"):
        load_prices(tmp_path / "nope.json")


# -- AGENTSVC_PRICES_FILE ------------------------------------------------------------


def test_prices_file_is_unset_by_default() -> None:
    assert Settings.from_env({}).prices_file is None
    assert Settings.from_env({"AGENTSVC_PRICES_FILE": "  "}).prices_file is None


def test_prices_file_names_an_existing_file(tmp_path: Path) -> None:
    path = write(tmp_path / "prices.json", {"prices": []})
    settings = Settings.from_env({"AGENTSVC_PRICES_FILE": f" {path} "})
    assert settings.prices_file == path


@pytest.mark.parametrize("name", ["missing.json", "."])
def test_prices_file_that_is_not_a_file_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(SettingsError, match="AGENTSVC_PRICES_FILE"):
        Settings.from_env({"AGENTSVC_PRICES_FILE": str(tmp_path / name)})
