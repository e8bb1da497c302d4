"""What the generated OpenAPI document cannot say by itself, so that it is honest: the
error responses of every route, and the events of every Server-Sent Events stream."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import msgspec
from litestar import Litestar
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIFormat,
    OpenAPIResponse,
    OpenAPIType,
    Operation,
    Reference,
    Schema,
)

from agentsvc_core.use_cases.computer.events import EXEC_EVENTS
from agentsvc_core.use_cases.multiplayer.events import MessageEvent, ReplyEvent, ReplyStarted
from agentsvc_core.use_cases.turn.events import EVENT_NAMES
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
    429: "Too many requests from this address or credential (RATE_LIMITED); see Retry-After",
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


def operations(app: Litestar | OpenAPI) -> Iterator[Operation]:
    """Every operation of ``app``'s document (the served one is this cached object),
    or of the document given."""
    document = app.openapi_schema if isinstance(app, Litestar) else app
    for item in (document.paths or {}).values():
        for op in (item.get, item.put, item.post, item.delete, item.patch):
            if op is not None:
                yield op


def document_body_limits(document: OpenAPI) -> None:
    """413 on every operation that reads a body, so that no route forgets it: those
    with a request body (the JSON routes, the upload), and every authenticated POST,
    whose body the idempotency middleware reads when an ``Idempotency-Key`` is sent
    (``agentsvc_web.idempotency``). Public routes that read a body of their own (the
    runner webhook) declare it themselves. Runs after ``document_roles``, which marks
    the public operations (``security: []``)."""
    for item in (document.paths or {}).values():
        for op in (item.get, item.put, item.post, item.delete, item.patch):
            if op is None or op.responses is None or "413" in op.responses:
                continue
            authenticated_post = op is item.post and op.security != []
            if op.request_body is None and not authenticated_post:
                continue
            template = op.responses.get("401") or op.responses.get("500")
            if not isinstance(template, OpenAPIResponse):
                raise ValueError(f"{op.operation_id} has no error response to copy for 413")
            too_large = copy.copy(template)
            too_large.description = _DESCRIPTIONS[413]
            op.responses["413"] = too_large


# --- Server-Sent Events -------------------------------------------------------------

SSE_MEDIA_TYPE = "text/event-stream"
SSE_COMPONENT_PREFIX = "Sse"
_SSE_ID = Schema(
    type=OpenAPIType.STRING,
    pattern="^[1-9][0-9]*$",
    description="Increasing within the reply: 1, 2, 3, ... (Last-Event-ID)",
)
# msgspec's JSON Schema keywords -> the Schema fields they fill
_SCALAR_KEYWORDS = {
    "title": "title",
    "description": "description",
    "format": "format",
    "const": "const",
    "enum": "enum",
    "default": "default",
    "minimum": "minimum",
    "maximum": "maximum",
    "minLength": "min_length",
    "maxLength": "max_length",
    "pattern": "pattern",
    "minItems": "min_items",
    "maxItems": "max_items",
    "required": "required",
}


def _from_json_schema(raw: dict[str, Any]) -> Schema | Reference:
    """A JSON Schema as msgspec writes it, as Litestar's spec objects (so the served
    document is built by one serializer). A keyword not mapped here raises: the test
    of the document then fails, instead of the keyword being lost."""
    if "$ref" in raw:
        return Reference(ref=str(raw["$ref"]))
    out = Schema()
    for key, value in raw.items():
        if key == "type":
            out.type = OpenAPIType(value)
        elif key == "format":
            out.format = OpenAPIFormat(value)
        elif key == "properties":
            out.properties = {name: _from_json_schema(sub) for name, sub in value.items()}
        elif key == "items":
            out.items = _from_json_schema(value)
        elif key == "anyOf":
            out.any_of = [_from_json_schema(sub) for sub in value]
        elif key == "additionalProperties":
            out.additional_properties = (
                value if isinstance(value, bool) else _from_json_schema(value)
            )
        elif key in _SCALAR_KEYWORDS:
            setattr(out, _SCALAR_KEYWORDS[key], value)
        else:
            raise ValueError(f"JSON Schema keyword {key!r} is not mapped to the OpenAPI document")
    return out


def sse_schemas(
    events: Mapping[type[Any], str], without_id: frozenset[str] = frozenset()
) -> tuple[Schema, dict[str, Schema]]:
    """The schema of one event of a stream of ``events`` (event struct -> event name),
    and the components its data refer to.

    Each event is described as OpenAPI 3.2 models ``text/event-stream`` (and as
    Schemathesis validates it on 3.1): an object with the SSE fields ``event``,
    ``id`` and ``data``, where ``data`` is a string of JSON (``contentMediaType``)
    whose ``contentSchema`` is the event struct's schema, generated by msgspec (the
    encoder that writes it) into the components as ``Sse<StructName>``. One
    ``oneOf`` branch per event name (``event`` a ``const``); the events named in
    ``without_id`` carry no ``id``."""
    template = f"#/components/schemas/{SSE_COMPONENT_PREFIX}{{name}}"
    refs, raw_components = msgspec.json.schema_components(list(events), ref_template=template)
    components: dict[str, Schema] = {}
    for name, raw in raw_components.items():
        schema = _from_json_schema(raw)
        if not isinstance(schema, Schema):  # a struct's schema is an object, never a $ref
            raise TypeError(f"component {name} is a reference")
        components[SSE_COMPONENT_PREFIX + name] = schema
    branches: list[Schema | Reference] = []
    for name, ref in zip(events.values(), refs, strict=True):
        properties: dict[str, Schema | Reference] = {
            "event": Schema(type=OpenAPIType.STRING, const=name),
            "id": _SSE_ID,
            "data": Schema(
                type=OpenAPIType.STRING,
                content_media_type="application/json",
                content_schema=_from_json_schema(ref),
            ),
        }
        if name in without_id:
            del properties["id"]
        branches.append(
            Schema(
                type=OpenAPIType.OBJECT,
                title=f"{name} event",
                required=[f for f in ("event", "id", "data") if f in properties],
                properties=properties,
            )
        )
    event = Schema(
        one_of=branches,
        description=(
            "One Server-Sent Event (`id`, `event` and one `data` line of JSON); comment "
            "lines (`: keep-alive`) come between events while the model is silent. "
            "Events: " + ", ".join(f"`{name}`" for name in events.values())
        ),
    )
    return event, components


# Streams whose events are not a reply's, by operation id: (event struct -> event
# name, the events without an id). A thread's live events (controllers/multiplayer.py).
OTHER_STREAMS: dict[str, tuple[Mapping[type[Any], str], frozenset[str]]] = {
    "threadEvents": (
        {MessageEvent: "message", ReplyEvent: "reply", ReplyStarted: "reply_started"},
        frozenset({"reply_started"}),
    ),
    # an operator's command on a computer (controllers/computer.py)
    "execComputerCommand": (EXEC_EVENTS, frozenset()),
}


def document_event_streams(
    document: OpenAPI, events: Mapping[type[Any], str] = EVENT_NAMES
) -> None:
    """Every ``text/event-stream`` response in ``app``'s document gets the schema of
    its events (``sse_schemas``: a reply's, or those ``OTHER_STREAMS`` names for its
    operation) instead of ``{}``, and the document gets their data's components.
    Called once by ``create_app``, it covers any route that declares
    ``media_type="text/event-stream"`` (the served document is this cached object)."""
    event, components = sse_schemas(events)
    others = {op_id: sse_schemas(*spec) for op_id, spec in OTHER_STREAMS.items()}
    found = False
    for op in operations(document):
        own = others.get(op.operation_id or "")
        for response in (op.responses or {}).values():
            content = getattr(response, "content", None) or {}
            media = content.get(SSE_MEDIA_TYPE)
            if media is not None:
                media.schema = event if own is None else own[0]
                found = True
    for _, extra in others.values():
        components.update(extra)
    if found:
        if document.components.schemas is None:
            document.components.schemas = {}
        clash = set(components) & set(document.components.schemas)
        if clash:
            raise ValueError(f"SSE components clash with the API's: {sorted(clash)}")
        document.components.schemas.update(components)
