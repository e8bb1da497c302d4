"""The API document viewers under ``/schema``, served by the service itself.

Litestar's viewers load their scripts, styles, fonts and favicon from CDNs by
default, so ``/schema`` showed a blank page on a machine without Internet access.
Here every asset comes from the ``openapi-ui-bundles`` package, served under
``/schema/assets/`` (public, like the document; not in it):

- ``/schema`` and ``/schema/swagger``: Swagger UI 5 (reads OpenAPI 3.1; try it out
  with an API key via "Authorize");
- ``/schema/redoc``: Redoc (its "API docs by Redocly" footer logo is the one
  remote image it asks for; the page works without it);
- ``/schema/rapidoc``: RapiDoc;
- ``/schema/openapi.json`` and ``/schema/openapi.yaml``: the document.
"""

from __future__ import annotations

from pathlib import Path

import openapi_ui_bundles
from litestar import Router
from litestar.openapi.plugins import (
    JsonRenderPlugin,
    OpenAPIRenderPlugin,
    RapidocRenderPlugin,
    RedocRenderPlugin,
    SwaggerRenderPlugin,
    YamlRenderPlugin,
)
from litestar.static_files import create_static_files_router

__all__ = ["ASSETS_PATH", "asset_routers", "viewers"]

ASSETS_PATH = "/schema/assets"
_BUNDLES: dict[str, Path] = {
    "swagger-ui": Path(openapi_ui_bundles.swagger_ui.static_path),
    "redoc": Path(openapi_ui_bundles.redoc.static_path),
    "rapidoc": Path(openapi_ui_bundles.rapidoc.static_path),
}


def _asset(bundle: str, name: str) -> str:
    return f"{ASSETS_PATH}/{bundle}/{name}"


def viewers() -> list[OpenAPIRenderPlugin]:
    """The render plugins of ``OpenAPIConfig``, every URL of theirs on this service."""
    favicon = (
        f"<link rel='icon' type='image/png' href='{_asset('swagger-ui', 'favicon-32x32.png')}'>"
    )
    return [
        SwaggerRenderPlugin(
            path=["/", "/swagger"],
            js_url=_asset("swagger-ui", "swagger-ui-bundle.js"),
            css_url=_asset("swagger-ui", "swagger-ui.css"),
            standalone_preset_js_url=_asset("swagger-ui", "swagger-ui-standalone-preset.js"),
            favicon=favicon,
        ),
        RedocRenderPlugin(
            path="/redoc",
            js_url=_asset("redoc", "redoc.standalone.js"),
            google_fonts=False,
            favicon=favicon,
        ),
        RapidocRenderPlugin(
            path="/rapidoc", js_url=_asset("rapidoc", "rapidoc-min.js"), favicon=favicon
        ),
        JsonRenderPlugin(),
        YamlRenderPlugin(),
    ]


def asset_routers() -> list[Router]:
    """One static files route per bundle, under ``ASSETS_PATH``."""
    return [
        create_static_files_router(
            path=f"{ASSETS_PATH}/{bundle}", directories=[folder], name=f"schema-assets-{bundle}"
        )
        for bundle, folder in _BUNDLES.items()
    ]
