"""The API document viewers at /schema work offline (docs/api.md: their scripts are served
from /schema/assets/, no CDN): every URL a viewer page loads is on this service, and
answers 200 with the asset."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest
from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings

VIEWERS = ["/schema", "/schema/swagger", "/schema/redoc", "/schema/rapidoc"]
# what a page loads: src/href/spec-url attributes, CSS url(...) and @import
LOADED = re.compile(
    r"""(?:\b(?:src|href|spec-url)\s*=\s*["']([^"']+)["'])|url\(\s*["']?([^"')]+)|@import\s+["']([^"']+)"""
)
TYPES = {
    ".js": "javascript",
    ".css": "text/css",
    ".png": "image/png",
    ".json": "application/vnd.oai.openapi+json",
}


@pytest.fixture(scope="module")
def c() -> Iterator[TestClient[Any]]:
    with TestClient(create_app(Settings(storage="memory", migrate_on_start=False))) as client:
        yield client


def loaded_urls(html: str) -> list[str]:
    head = html.split("<body", 1)[0]  # Swagger UI's body embeds the document itself
    body_tags = re.findall(r"<[^>]+>", html.split("<body", 1)[1]) if "<body" in html else []
    return [
        next(g for g in match.groups() if g)
        for text in (head, *body_tags)
        for match in LOADED.finditer(text)
    ]


@pytest.mark.parametrize("page", VIEWERS)
def test_a_viewer_loads_only_assets_this_service_serves(c: TestClient[Any], page: str) -> None:
    r = c.get(page)  # no credentials: the viewers and their assets are public
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/html")
    urls = loaded_urls(r.text)
    assert any(u.endswith(".js") for u in urls), urls
    for url in urls:
        parts = urlsplit(url)
        assert (parts.scheme, parts.netloc) == ("", ""), f"{page} loads {url} from elsewhere"
        assert url.startswith("/schema/"), url
        asset = c.get(url)
        assert asset.status_code == 200, url
        assert len(asset.content) > 100, url
        suffix = "." + url.rsplit(".", 1)[-1]
        assert TYPES[suffix] in asset.headers["content-type"], (url, asset.headers)


def test_an_unknown_asset_is_a_404_with_the_error_body(c: TestClient[Any]) -> None:
    r = c.get("/schema/assets/swagger-ui/nothing-here.js")
    assert r.status_code == 404
    assert r.json()["error"] == "NOT_FOUND"
