"""The Brave Search adapter against a loopback fake of its API (tests/fakes/web.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.web import BraveSearch
from agentsvc_core.errors import Upstream
from agentsvc_core.ports.web import SearchHit
from tests.fakes.web import BRAVE_KEY, FakeBrave
from tests.web.live import serve

OPEN = OutboundGuard(allow_private_network=True)  # the fake is on loopback


@pytest.fixture(scope="module")
def brave() -> Iterator[tuple[FakeBrave, str]]:
    fake = FakeBrave()
    with serve(fake) as url:
        yield fake, url


async def test_results_in_the_real_wire_format(brave: tuple[FakeBrave, str]) -> None:
    fake, url = brave
    search = BraveSearch(OPEN, BRAVE_KEY, url + "/")
    try:
        hits = await search.search("green tea", 2)
    finally:
        await search.aclose()
    # the highlights and entities of Brave's titles and descriptions are removed
    assert hits == [
        SearchHit(
            title="How to brew green tea",
            url="https://tea.example/brew",
            snippet="Use water between 70 and 80 °C for green tea & sencha.",
        ),
        SearchHit(
            title="Sencha - Wikipedia",
            url="https://en.wikipedia.example/wiki/Sencha",
            snippet="A Japanese tea.",
        ),
    ]
    assert fake.queries[-1] == ("green tea", "2", BRAVE_KEY)


async def test_count_is_at_most_brave_s_twenty(brave: tuple[FakeBrave, str]) -> None:
    fake, url = brave
    search = BraveSearch(OPEN, BRAVE_KEY, url)
    try:
        assert len(await search.search("tea", 50)) == 3
    finally:
        await search.aclose()
    assert fake.queries[-1][1] == "20"


async def test_nothing_found_is_no_results(brave: tuple[FakeBrave, str]) -> None:
    _, url = brave
    search = BraveSearch(OPEN, BRAVE_KEY, url)
    try:
        assert await search.search("nothing", 5) == []
    finally:
        await search.aclose()


async def test_a_refused_key_is_an_upstream_error_without_the_key(
    brave: tuple[FakeBrave, str],
) -> None:
    fake, url = brave
    wrong = "not-the-subscription-token-0123456789"
    search = BraveSearch(OPEN, wrong, url)
    try:
        with pytest.raises(Upstream, match=r"refused the key \(HTTP 401\)") as failed:
            await search.search("tea", 5)
    finally:
        await search.aclose()
    assert wrong not in failed.value.detail
    assert fake.queries[-1][2] == wrong  # it was sent, in the header


async def test_the_search_call_goes_through_the_outbound_guard(
    brave: tuple[FakeBrave, str],
) -> None:
    fake, url = brave
    before = len(fake.queries)
    search = BraveSearch(OutboundGuard(allow_private_network=False), BRAVE_KEY, url)
    try:
        with pytest.raises(Upstream, match="refused by the outbound guard"):
            await search.search("tea", 5)
    finally:
        await search.aclose()
    assert len(fake.queries) == before
