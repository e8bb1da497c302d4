"""Error responses documented on every route, so the OpenAPI document is honest."""

from __future__ import annotations

from collections.abc import Iterator

from litestar import Litestar
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import Operation

from agentsvc_web.schemas import ErrorBody

_DESCRIPTIONS = {
    400: "The body is not JSON, or not a JSON object (BAD_REQUEST)",
    401: "Missing, malformed, unknown, revoked or expired credential (UNAUTHORIZED)",
    403: "Authenticated, but no access to this resource (FORBIDDEN)",
    404: "Unknown id, or another organization's (NOT_FOUND)",
    405: "Method not allowed on this path (METHOD_NOT_ALLOWED)",
    409: "Conflicts with the current state (THREAD_BUSY, ...)",
    413: "Body over the configured limit (PAYLOAD_TOO_LARGE)",
    415: "The body is not declared application/json (UNSUPPORTED_MEDIA_TYPE)",
    422: "A field is missing, of the wrong type or out of bounds; detail names it",
    500: "Internal error (INTERNAL_ERROR), never with a trace or a secret",
    502: "A service this call depends on failed (UPSTREAM_ERROR, REGISTRY_UNAVAILABLE, ...)",
    503: "Storage is unreachable right now (UNAVAILABLE); retry after Retry-After seconds",
}


def errors(*statuses: int) -> dict[int, ResponseSpec]:
    """The error responses a route can give, all with the one error body.

    401, 500 and 503 apply to every authenticated route and are always included."""
    wanted = sorted({401, 500, 503, *statuses})
    return {
        s: ResponseSpec(
            data_container=ErrorBody, description=_DESCRIPTIONS[s], generate_examples=False
        )
        for s in wanted
    }


READ = errors(404)
WRITE = errors(400, 404, 413, 415, 422)
CREATE = errors(400, 413, 415, 422)


def operations(app: Litestar) -> Iterator[Operation]:
    """Every operation of ``app``'s document (the served one is this cached object)."""
    for item in (app.openapi_schema.paths or {}).values():
        for op in (item.get, item.put, item.post, item.delete, item.patch):
            if op is not None:
                yield op
