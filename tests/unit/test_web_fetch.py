"""The web_fetch adapter against real servers on loopback (tests/fakes/web.py)."""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_adapters.web import HttpWebFetcher
from agentsvc_core.ports.web import FetchLimits, WebFetchFailed
from tests.fakes.web import FakeSite
from tests.outbound import Listener, fake_dns
from tests.web.live import serve

LIMITS = FetchLimits(max_bytes=2 * 1024 * 1024, timeout_ms=5000)


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[FakeSite, str]]:
    fake = FakeSite()
    with serve(fake) as url:
        yield fake, url


@pytest.fixture
async def fetcher() -> AsyncIterator[HttpWebFetcher]:
    """Private networks allowed: the test site is on loopback."""
    f = HttpWebFetcher(OutboundGuard(allow_private_network=True))
    yield f
    await f.aclose()


class PublicHost(httpx.AsyncBaseTransport):
    """A guarded client in which one made-up public name (``public.test``) reaches
    the loopback site directly, as a public web site would be reached; every other
    request goes through the guarded client, whose guard allows no private address."""

    def __init__(self, guarded: httpx.AsyncClient, site_port: int) -> None:
        self.guarded = guarded
        self.direct = httpx.AsyncClient()
        self.site_port = site_port

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "public.test":
            url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.site_port)
            inner = httpx.Request(request.method, url, headers=request.headers)
            answer = await self.direct.send(inner, stream=True)
        else:
            answer = await self.guarded.send(request, stream=True)
        return httpx.Response(answer.status_code, headers=answer.headers, stream=answer.stream)

    async def aclose(self) -> None:
        await self.direct.aclose()
        await self.guarded.aclose()


def _public_fetcher(site_url: str) -> HttpWebFetcher:
    guard = OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"internal.test": ["127.0.0.1"]})
    )
    port = int(site_url.rsplit(":", 1)[1])
    client = httpx.AsyncClient(transport=PublicHost(guard.http_client(timeout=5.0), port))
    return HttpWebFetcher(guard, client)


async def test_an_html_page_comes_back_as_its_readable_text(
    site: tuple[FakeSite, str], fetcher: HttpWebFetcher
) -> None:
    _, url = site
    page = await fetcher.fetch(f"{url}/", LIMITS)
    assert page.title == "Brewing Green Tea - The Tea Journal"
    assert page.url == f"{url}/"
    assert page.content_type == "text/html"
    assert "# How to brew green tea" in page.text
    assert "between 70 and 80 degrees" in page.text
    assert "1. Warm the pot." in page.text
    # the page's furniture is not its text
    for noise in ("tracking-script-body", "font-family", "Log in", "All rights reserved"):
        assert noise not in page.text
    assert page.cut is False


async def test_the_size_cap_cuts_the_body_while_reading(
    site: tuple[FakeSite, str], fetcher: HttpWebFetcher
) -> None:
    _, url = site
    page = await fetcher.fetch(f"{url}/big?n=500000", FetchLimits(max_bytes=2048, timeout_ms=5000))
    assert page.cut is True
    assert len(page.text) == 2048
    whole = await fetcher.fetch(f"{url}/big?n=2048", FetchLimits(max_bytes=2048, timeout_ms=5000))
    assert whole.cut is False
    assert len(whole.text) == 2048


async def test_a_compressed_body_is_decompressed_only_up_to_the_cap(
    site: tuple[FakeSite, str], fetcher: HttpWebFetcher
) -> None:
    """64 MiB of zeros in about 64 KiB of gzip: read up to the cap, never inflated
    whole (httpx's own decoder would inflate each chunk without a limit)."""
    _, url = site
    small = FetchLimits(max_bytes=1024, timeout_ms=5000)
    tracemalloc.start()
    try:
        bomb = await fetcher.fetch(f"{url}/gzip?n={64 * 1024 * 1024}", small)
        peak = tracemalloc.get_traced_memory()[1]  # this process: the fake site's too
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024, f"{peak} bytes at the peak: the body was inflated whole"
    assert (bomb.cut, len(bomb.text)) == (True, 1024)
    assert set(bomb.text) == {"0"}
    whole = await fetcher.fetch(f"{url}/gzip?n=1000", small)
    assert (whole.cut, whole.text) == (False, "0" * 1000)
    deflated = await fetcher.fetch(f"{url}/deflate", small)
    assert deflated.text.startswith("deflated tea deflated tea")
    with pytest.raises(WebFetchFailed, match="answered in 'br', which web_fetch does not read"):
        await fetcher.fetch(f"{url}/brotli", small)


async def test_the_deadline_covers_a_server_that_never_answers(fetcher: HttpWebFetcher) -> None:
    async with Listener(silent=True) as listener:
        started = time.monotonic()
        with pytest.raises(WebFetchFailed, match="did not answer within 1000 ms"):
            await fetcher.fetch(
                f"http://127.0.0.1:{listener.port}/", FetchLimits(max_bytes=1024, timeout_ms=1000)
            )
        assert time.monotonic() - started < 3
        assert listener.connections == 1


async def test_redirects_are_followed_to_the_final_url(
    site: tuple[FakeSite, str], fetcher: HttpWebFetcher
) -> None:
    fake, url = site
    page = await fetcher.fetch(f"{url}/redirect?to=/json", LIMITS)
    assert page.url == f"{url}/json"
    assert page.text == '{"tea": "sencha"}'
    fake.paths.clear()
    with pytest.raises(WebFetchFailed, match="more than 5 redirects"):
        await fetcher.fetch(f"{url}/loop", LIMITS)
    assert fake.paths == ["/loop"] * 6  # the first request and five redirects


async def test_a_redirect_to_a_loopback_address_is_refused(site: tuple[FakeSite, str]) -> None:
    fake, url = site
    fetcher = _public_fetcher(url)
    try:
        # the public page itself is read
        page = await fetcher.fetch("http://public.test/json", LIMITS)
        assert page.text == '{"tea": "sencha"}'
        async with Listener() as listener:
            for target in (
                f"http://127.0.0.1:{listener.port}/",  # an address: refused before connecting
                f"http://internal.test:{listener.port}/",  # a name that resolves to loopback
            ):
                fake.paths.clear()
                with pytest.raises(WebFetchFailed, match="refused by the outbound guard"):
                    await fetcher.fetch(f"http://public.test/redirect?to={target}", LIMITS)
                assert fake.paths == ["/redirect"]
            assert listener.connections == 0
        with pytest.raises(WebFetchFailed, match=r"127\.0\.0\.1 is a loopback address"):
            await fetcher.fetch(f"{url}/", LIMITS)
    finally:
        await fetcher.aclose()


async def test_types_that_are_not_text_are_refused_before_their_body(
    site: tuple[FakeSite, str], fetcher: HttpWebFetcher
) -> None:
    _, url = site
    with pytest.raises(WebFetchFailed, match=r"answered image/png, which web_fetch does not read"):
        await fetcher.fetch(f"{url}/image", LIMITS)


async def test_text_types_come_as_they_are(
    site: tuple[FakeSite, str], fetcher: HttpWebFetcher
) -> None:
    _, url = site
    notes = await fetcher.fetch(f"{url}/notes.md", LIMITS)
    assert (notes.title, notes.text) == ("Notes", "# Notes\n\nSteep *briefly*.\n")
    data = await fetcher.fetch(f"{url}/json", LIMITS)
    assert (data.title, data.content_type) == (None, "application/json")
    untyped = await fetcher.fetch(f"{url}/untyped", LIMITS)
    assert untyped.title == "Brewing Green Tea - The Tea Journal"
    assert "How to brew green tea" in untyped.text


async def test_an_error_status_is_a_failure_naming_the_host_only(
    site: tuple[FakeSite, str], fetcher: HttpWebFetcher
) -> None:
    _, url = site
    with pytest.raises(WebFetchFailed) as failed:
        await fetcher.fetch(f"{url}/missing?token=secret-in-query", LIMITS)
    assert failed.value.detail == "127.0.0.1 answered HTTP 404"


async def test_only_http_and_https_urls(fetcher: HttpWebFetcher) -> None:
    for url in ("ftp://example.com/file", "file:///etc/passwd", "javascript:alert(1)"):
        with pytest.raises(WebFetchFailed, match=r"only http:// and https://"):
            await fetcher.fetch(url, LIMITS)


async def test_no_cookie_is_kept_between_fetches(
    site: tuple[FakeSite, str], fetcher: HttpWebFetcher
) -> None:
    _, url = site
    await fetcher.fetch(f"{url}/cookie", LIMITS)
    page = await fetcher.fetch(f"{url}/echo-cookie", LIMITS)
    assert page.text == "(no cookie)"


async def test_the_agents_domain_lists_apply_to_every_hop(
    site: tuple[FakeSite, str], fetcher: HttpWebFetcher
) -> None:
    fake, url = site
    blocked = FetchLimits(max_bytes=1024, timeout_ms=5000, blocked_domains=("0.1",))
    assert (await fetcher.fetch(f"{url}/json", blocked)).text  # "0.1" is no suffix of a label
    fake.paths.clear()
    only = FetchLimits(max_bytes=1024, timeout_ms=5000, allowed_domains=("example.com",))
    with pytest.raises(WebFetchFailed, match=r"127\.0\.0\.1 is not in this agent's allowed"):
        await fetcher.fetch(f"{url}/json", only)
    never = FetchLimits(max_bytes=1024, timeout_ms=5000, blocked_domains=("localhost",))
    with pytest.raises(WebFetchFailed, match="localhost is in this agent's blocked domains"):
        await fetcher.fetch(f"{url}/redirect?to=http://localhost:1/", never)
    assert fake.paths == ["/redirect"]
