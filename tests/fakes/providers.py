"""Scripted fake model providers: real HTTP servers that speak the two streaming wire formats.

A :class:`FakeProvider` runs a uvicorn server on ``127.0.0.1`` (a free port) in a background
thread with its own event loop, so sync tests, async tests and benchmarks can all point the
service at it. Each request consumes one scripted :class:`Reply` (``enqueue``); when the queue is
empty the ``default`` reply answers, which by default echoes the last user message.

Two kinds:

``alpha`` -- the Anthropic Messages API, ``POST /v1/messages``. A streamed reply is
``text/event-stream`` with named events, each ``event: NAME`` + ``data: JSON`` whose ``type``
repeats the name::

    message_start        {"message": {id, type: "message", role, model, content: [],
                          stop_reason: null, stop_sequence: null, usage: {...}}}
    content_block_start  {"index", "content_block": {"type": "text", "text": ""}
                                                 or {"type": "tool_use", id, name, "input": {}}}
    ping                 (once, after the first content_block_start)
    content_block_delta  {"index", "delta": {"type": "text_delta", "text"}
                                         or {"type": "input_json_delta", "partial_json"}}
    content_block_stop   {"index"}
    message_delta        {"delta": {stop_reason, stop_sequence: null}, "usage": {...}}
    message_stop         {}

A tool_use block starts with an empty ``partial_json`` delta, as the real API does; the
fragments concatenate to the JSON of the arguments. ``message_start`` reports
``output_tokens: 1`` and ``message_delta`` the cumulative totals. A mid-stream failure is
``event: error`` with ``{"type": "error", "error": {"type": "overloaded_error", "message":
"Overloaded"}}``. HTTP errors are ``{"type": "error", "error": {"type", "message"},
"request_id"}`` with the matching status (400 invalid_request_error, 401 authentication_error,
403 permission_error, 404 not_found_error, 413 request_too_large, 429 rate_limit_error,
500 api_error, 504 timeout_error, 529 overloaded_error). Usage semantics are Anthropic's:
``input_tokens`` excludes cache reads, reported separately as ``cache_read_input_tokens``.

References. The published pages are https://docs.anthropic.com/en/docs/build-with-claude/streaming
(now https://platform.claude.com/docs/en/build-with-claude/streaming),
https://docs.anthropic.com/en/api/messages and https://docs.anthropic.com/en/api/errors. The
shapes here were checked against what the search index held of them, which was mostly their
machine-readable form rather than the prose:

- anthropics/anthropic-sdk-python, generated from the API's OpenAPI spec:
  ``src/anthropic/types/message.py``, ``usage.py``, ``message_delta_usage.py``,
  ``raw_message_delta_event.py``, ``shared/error_response.py`` (``request_id``) and
  ``_streaming.py`` (raises on ``event: error``, skips ``ping``).
- A recorded real stream (vercel/ai ``@ai-sdk/anthropic`` fixture
  ``anthropic-json-tool.1.chunks.txt``): the empty first ``partial_json``, the
  cumulative ``input_tokens`` / ``cache_*`` counts in ``message_delta.usage``.
- Error statuses and types: summaries of the errors page (429 rate_limit_error, 529
  overloaded_error, ...), consistent with the SDK's error classes.
- The official SDK itself (anthropic 2.12.0, in a scratch virtualenv outside this project):
  ``messages.stream(...).get_final_message()``, ``messages.create`` and its error classes
  (RateLimitError, OverloadedError, a mid-stream APIStatusError) all parse this fake. That
  SDK sends ``Authorization: Bearer`` rather than ``x-api-key``, so both are accepted.

``beta`` -- the OpenAI Chat Completions API, ``POST /v1/chat/completions`` (an OpenAI-style
client wants ``base_url + "/v1"``). A streamed reply is ``data: JSON`` lines of
``chat.completion.chunk`` objects, every one with the same ``id`` / ``created`` / ``model``::

    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "", "refusal": null},
                  "logprobs": null, "finish_reason": null}]}
    {"choices": [{"index": 0, "delta": {"content": "Hel"}, ...}]}          (one per token)
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id", "type": "function",
                  "function": {"name", "arguments": ""}}]}, ...}]}          (per tool call)
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0,
                  "function": {"arguments": "{\\"ci"}}]}, ...}]}           (argument fragments)
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"|"tool_calls"|"length"}]}
    {"choices": [], "usage": {prompt_tokens, completion_tokens, total_tokens,
                              prompt_tokens_details: {cached_tokens, ...}, ...}}
    [DONE]

The usage chunk is sent only with ``stream_options.include_usage``; then every other chunk
carries ``"usage": null``. When a reply is only tool calls, the role rides on the first tool
call chunk with ``"content": null``. A mid-stream failure either sends ``data: {"error":
{"message", "type", "param", "code"}}`` and ends the body without ``[DONE]``, or drops the
connection mid-body (``Reply.mid_stream_error = "disconnect"``). HTTP errors are
``{"error": {"message", "type", "param", "code"}}``. Usage semantics are OpenAI's:
``prompt_tokens`` includes the cached tokens, which ``prompt_tokens_details.cached_tokens``
counts again, so one ``Reply`` means the same thing in both formats.

References. The published pages are
https://platform.openai.com/docs/api-reference/chat/streaming,
https://platform.openai.com/docs/api-reference/chat/object and
https://platform.openai.com/docs/guides/error-codes; the shapes were checked against:

- openai/openai-python, generated from the OpenAPI spec:
  ``src/openai/types/chat/chat_completion_chunk.py`` (``usage`` null on every chunk but the
  last when ``include_usage``, ``choices`` empty on that last one), ``chat_completion.py``,
  ``chat_completion_message.py``, ``completion_usage.py`` and ``_streaming.py`` (stops at
  ``[DONE]``, raises on a ``data`` object with an ``error`` key).
- Recorded real chunks (meta-llama/llama-stack test recordings): first delta
  ``{"role": "assistant", "content": "", "refusal": null}``, ``"usage": null`` on every chunk.
- The official SDK itself (openai 3.54.0, scratch virtualenv): ``chat.completions.stream(...)
  .get_final_completion()`` reassembles text, both tool calls and usage; the raw stream, the
  non-streaming completion, RateLimitError (``code="rate_limit_exceeded"``), the mid-stream
  APIError and the disconnect (APIConnectionError) behave as against the real API.

Both kinds check what the real API checks before generating anything (``strict=True``): the
route, the key header (alpha ``x-api-key`` or ``Authorization: Bearer`` -- the current official
SDK sends the latter -- beta ``Authorization: Bearer``; a fixed ``api_key`` when one is given;
``api_key=""`` is a proxy that adds the key itself and requires none from its clients),
``anthropic-version`` for alpha, a JSON object body and its required fields
(alpha ``model``, ``messages``, ``max_tokens``; beta ``model``, ``messages``). A refused request
is recorded but consumes no scripted reply.

Known deviations: alpha sends one ``ping`` (the real API may send more during long pauses) and
a fixed ``output_tokens: 1`` in ``message_start``, and leaves out optional fields
(``stop_details``, ``service_tier``, ``inference_geo``, ``cache_creation``); beta leaves out
``obfuscation`` / ``service_tier`` on chunks; no rate-limit headers besides ``retry-after``; no
thinking/citations/server-tool blocks; ``n`` > 1, ``stop_sequence`` and request validation
beyond the required fields are not modelled; the error ``message`` strings are made up, and
beta error ``type``/``code`` strings for 403 and 503 are best-effort (OpenAI publishes no full
table).

Process-wide side effects: uvicorn sets the level of the ``uvicorn.error`` / ``uvicorn.access``
/ ``uvicorn.asgi`` loggers to WARNING, and a filter on ``uvicorn.error`` drops the records of
this fake's deliberately aborted responses (and nothing else).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import logging
import re
import secrets
import socket
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

import anyio
import msgspec
import uvicorn

try:  # uvicorn[standard] ships uvloop; plain asyncio works too, only slower
    import uvloop
except ImportError:  # pragma: no cover
    uvloop = None  # type: ignore[assignment]

__all__ = [
    "FakeProvider",
    "Kind",
    "RecordedRequest",
    "Reply",
    "ToolCallSpec",
    "fake_alpha",
    "fake_beta",
    "split_tokens",
]

Kind = Literal["alpha", "beta"]

_Scope = MutableMapping[str, Any]
_Message = MutableMapping[str, Any]
_Receive = Callable[[], Awaitable[_Message]]
_Send = Callable[[_Message], Awaitable[None]]
_Emit = Callable[[bytes], Awaitable[None]]

ALPHA_PATH = "/v1/messages"
BETA_PATH = "/v1/chat/completions"
DEFAULT_TEXT = "Hello from the fake model."
ARGUMENT_FRAGMENT_CHARS = 8  # tool-call arguments arrive in pieces of this many characters


# --- scripting ---------------------------------------------------------------------------


@dataclass
class ToolCallSpec:
    """A tool call the fake model makes; ``arguments`` is the JSON object it passes."""

    id: str
    name: str
    arguments: dict[str, Any]


@dataclass
class Reply:
    """One scripted answer.

    Text comes first (``tokens`` if given, else ``text`` split by :func:`split_tokens`, or the
    echo of the last user message when ``echo``), then the tool calls, each one's arguments in
    fragments of ``ARGUMENT_FRAGMENT_CHARS`` characters. Text tokens and argument fragments are
    the "token deltas" that ``error_after_tokens`` and the delays count.

    ``stop_reason`` may be given in either vocabulary (``end_turn``/``tool_use``/``max_tokens``
    or ``stop``/``tool_calls``/``length``); it is translated for the wire. ``status`` other than
    200 answers an error JSON before any stream (``error_type``/``error_code``/``error_message``
    override the defaults for the status; 429 adds ``retry-after: 0``). ``error_after_tokens``
    fails the stream after that many token deltas, with an error event or (``mid_stream_error=
    "disconnect"``) by dropping the connection; a non-streaming request gets an error status
    instead (alpha 529, beta 500). The first token delta is due ``first_token_delay`` after the
    request arrived (headers and ``message_start``/role chunk go out at once), each later one
    ``token_delay`` after the previous one's due time; errors before a stream and non-streaming
    answers wait as long as the stream would have. ``headers`` are
    extra response headers. ``compaction`` (alpha only) is passed through unchanged as a first
    content block. ``ignore_stream`` answers the whole message as JSON (200
    ``application/json``) even to a streaming request, as a proxy that drops ``stream`` does.
    """

    text: str = DEFAULT_TEXT
    tokens: list[str] | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    input_tokens: int = 12
    output_tokens: int | None = None
    cached_tokens: int = 0
    stop_reason: str | None = None
    status: int = 200
    error_after_tokens: int | None = None
    mid_stream_error: Literal["event", "disconnect"] = "event"
    error_type: str | None = None
    error_code: str | None = None
    error_message: str | None = None
    first_token_delay: float = 0.0
    token_delay: float = 0.0
    compaction: dict[str, Any] | None = None
    echo: bool = False
    headers: dict[str, str] = field(default_factory=dict)
    ignore_stream: bool = False  # answer the whole JSON message, even when asked to stream


@dataclass(frozen=True)
class RecordedRequest:
    """A request as the fake saw it; ``json`` is the decoded body (None if it was not JSON)."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    json: Any


_WORD_BOUNDARY = re.compile(r"(?<=\S)(?=\s)")


def split_tokens(text: str) -> list[str]:
    """Split text the way tokenizers tend to: words with their leading whitespace.

    ``"Hello big world"`` -> ``["Hello", " big", " world"]``; the pieces concatenate to the text.
    """
    return [t for t in _WORD_BOUNDARY.split(text) if t]


def _fragments(text: str, size: int = ARGUMENT_FRAGMENT_CHARS) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _content_text(content: Any) -> str:
    """The text of a message's content: a string, or a list of blocks/parts.

    Text blocks/parts count; when there are none, the text inside alpha ``tool_result`` blocks.
    """
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    texts = [
        b["text"]
        for b in content
        if isinstance(b, dict) and b.get("type") == "text" and isinstance(b.get("text"), str)
    ]
    if not texts:
        texts = [
            _content_text(b.get("content"))
            for b in content
            if isinstance(b, dict) and b.get("type") == "tool_result"
        ]
    return " ".join(t for t in texts if t)


def last_user_text(body: Any) -> str:
    """The text of the last ``role: "user"`` message of a request body ("" if none)."""
    messages = body.get("messages") if isinstance(body, dict) else None
    if not isinstance(messages, list):
        return ""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return _content_text(message.get("content"))
    return ""


# --- errors ------------------------------------------------------------------------------

_ALPHA_ERRORS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "Invalid request"),
    401: ("authentication_error", "invalid x-api-key"),
    403: ("permission_error", "Your API key does not have permission to use this resource."),
    404: ("not_found_error", "Not found"),
    405: ("invalid_request_error", "Method not allowed"),
    413: ("request_too_large", "Request exceeds the maximum allowed number of bytes."),
    429: ("rate_limit_error", "Number of requests has exceeded your rate limit."),
    500: ("api_error", "Internal server error"),
    504: ("timeout_error", "Request timed out"),
    529: ("overloaded_error", "Overloaded"),
}

_BETA_ERRORS: dict[int, tuple[str, str | None, str]] = {
    400: ("invalid_request_error", None, "Invalid request"),
    401: ("invalid_request_error", "invalid_api_key", "Incorrect API key provided."),
    403: (
        "invalid_request_error",
        "unsupported_country_region_territory",
        "Country, region, or territory not supported",
    ),
    404: (
        "invalid_request_error",
        "model_not_found",
        "The model does not exist or you do not have access to it.",
    ),
    405: ("invalid_request_error", None, "Method not allowed"),
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests"),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    503: (
        "service_unavailable_error",
        "server_is_overloaded",
        "The server is overloaded. Please try again later.",
    ),
}


def _alpha_error(
    status: int, type_: str | None = None, message: str | None = None
) -> dict[str, Any]:
    default_type, default_message = _ALPHA_ERRORS.get(
        status,
        ("api_error", "Internal server error")
        if status >= 500
        else ("invalid_request_error", "Invalid request"),
    )
    return {"type": type_ or default_type, "message": message or default_message}


def _beta_error(
    status: int, type_: str | None = None, code: str | None = None, message: str | None = None
) -> dict[str, Any]:
    default_type, default_code, default_message = _BETA_ERRORS.get(
        status,
        (_BETA_ERRORS[500] if status >= 500 else _BETA_ERRORS[400]),
    )
    return {
        "message": message or default_message,
        "type": type_ or default_type,
        "param": None,
        "code": code or default_code,
    }


class _InjectedError(Exception):
    """Raised by the pacer where the script says the stream fails."""


class _Refusal(Exception):
    """A request the real API would refuse before generating anything."""

    def __init__(
        self, status: int, message: str, *, code: str | None = None, param: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param


# Deliberately incomplete responses make uvicorn log "ASGI callable returned without
# completing response" (that is how it learns to drop the connection). The handler marks its own
# task's context and this filter drops only those records.
_DELIBERATE_ABORT: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "fake_provider_deliberate_abort", default=False
)


class _DeliberateAbortFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not _DELIBERATE_ABORT.get()


def _install_log_filter() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _DeliberateAbortFilter) for f in logger.filters):
        logger.addFilter(_DeliberateAbortFilter())


# --- one request's plan ------------------------------------------------------------------

_TO_ALPHA_STOP = {"stop": "end_turn", "tool_calls": "tool_use", "length": "max_tokens"}
_TO_BETA_STOP = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
}


@dataclass
class _ToolPlan:
    spec: ToolCallSpec
    fragments: list[str]


@dataclass
class _Plan:
    reply: Reply
    model: str
    tokens: list[str]
    tools: list[_ToolPlan]
    output_tokens: int
    stop_reason: str

    @property
    def text(self) -> str:
        return "".join(self.tokens)


def _make_plan(kind: Kind, reply: Reply, body: dict[str, Any]) -> _Plan:
    if reply.tokens is not None:
        tokens = list(reply.tokens)
    else:
        text = f"You said: {last_user_text(body)}" if reply.echo else reply.text
        tokens = split_tokens(text)
    tools = []
    for spec in reply.tool_calls:
        if kind == "alpha":  # Anthropic's fragments look like json.dumps output
            args = json.dumps(spec.arguments, ensure_ascii=False)
        else:  # OpenAI's are compact
            args = json.dumps(spec.arguments, ensure_ascii=False, separators=(",", ":"))
        tools.append(_ToolPlan(spec, _fragments(args)))
    output_tokens = reply.output_tokens
    if output_tokens is None:
        output_tokens = len(tokens) + sum(len(t.fragments) for t in tools)
    raw_stop = reply.stop_reason or ("tool_use" if tools else "end_turn")
    if kind == "alpha":
        stop = _TO_ALPHA_STOP.get(raw_stop, raw_stop)
    else:
        stop = _TO_BETA_STOP.get(raw_stop, raw_stop)
    model = body.get("model")
    return _Plan(
        reply=reply,
        model=model if isinstance(model, str) else "fake-model",
        tokens=tokens,
        tools=tools,
        output_tokens=output_tokens,
        stop_reason=stop,
    )


class _Pacer:
    """Sleeps before token deltas and raises where the script injects a failure.

    Deltas are due on a fixed schedule from the moment the request was read (first after
    ``first_token_delay``, then every ``token_delay``), so a loaded event loop does not stretch
    the stream: a late delta shortens the next sleep instead of shifting everything after it.
    """

    __slots__ = ("count", "due", "reply")

    def __init__(self, reply: Reply) -> None:
        self.reply = reply
        self.count = 0
        self.due = anyio.current_time()

    def total_delay(self, deltas: int) -> float:
        r = self.reply
        return r.first_token_delay + r.token_delay * max(0, deltas - 1)

    async def tick(self) -> None:
        delay = self.reply.first_token_delay if self.count == 0 else self.reply.token_delay
        if delay > 0:
            self.due += delay
            await anyio.sleep(max(0.0, self.due - anyio.current_time()))
        limit = self.reply.error_after_tokens
        if limit is not None and self.count >= limit:
            raise _InjectedError
        self.count += 1

    def finish(self) -> None:
        if self.reply.error_after_tokens is not None:
            raise _InjectedError


_encode = msgspec.json.encode


def _new_id(prefix: str, nbytes: int = 12) -> str:
    return prefix + secrets.token_hex(nbytes)


# --- wire formats ------------------------------------------------------------------------


def _bearer(headers: dict[str, str]) -> str:
    scheme, _, token = headers.get("authorization", "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" else ""


class _Wire:
    """One API's routes, checks, payloads and stream framing."""

    path: str
    json_headers: list[tuple[bytes, bytes]]
    sse_headers: list[tuple[bytes, bytes]]

    def check(self, req: RecordedRequest, api_key: str | None) -> None:
        raise NotImplementedError

    def error_body(self, status: int, reply: Reply | None, refusal: _Refusal | None) -> bytes:
        raise NotImplementedError

    def message(self, plan: _Plan) -> dict[str, Any]:
        raise NotImplementedError

    async def stream(self, plan: _Plan, body: dict[str, Any], emit: _Emit, pacer: _Pacer) -> None:
        raise NotImplementedError

    async def stream_error(self, plan: _Plan, emit: _Emit) -> None:
        raise NotImplementedError

    def mid_stream_status(self) -> int:
        raise NotImplementedError

    def request_id_header(self) -> tuple[bytes, bytes]:
        raise NotImplementedError

    @staticmethod
    def require_object(req: RecordedRequest) -> dict[str, Any]:
        if not isinstance(req.json, dict):
            raise _Refusal(400, "The request body is not a valid JSON object.")
        return req.json


def _number_in(body: dict[str, Any], name: str, high: float) -> str | None:
    """Why ``body[name]`` is refused (a number from 0 to ``high`` when present), or None."""
    value = body.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"{name}: Input should be a valid number"
    if not 0 <= value <= high:
        return f"{name}: Input should be between 0 and {high:g}"
    return None


def _texts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _alpha_params(body: dict[str, Any]) -> None:
    """The Messages API's model parameters, refused as it refuses them: temperature and
    top_p from 0 to 1 and not both (the current models: "use only one"), a positive
    max_tokens, stop_sequences of strings with something besides whitespace,
    output_config.format a json_schema."""
    for name in ("temperature", "top_p"):
        problem = _number_in(body, name, 1)
        if problem:
            raise _Refusal(400, problem)
    if "temperature" in body and "top_p" in body:
        raise _Refusal(
            400,
            "`temperature` and `top_p` cannot both be specified for this model."
            " Please use only one.",
        )
    cap = body["max_tokens"]
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
        raise _Refusal(400, "max_tokens: Input should be greater than or equal to 1")
    if "stop_sequences" in body:
        if not _texts(body["stop_sequences"]):
            raise _Refusal(400, "stop_sequences: Input should be a valid list of strings")
        if any(not text.strip() for text in body["stop_sequences"]):
            raise _Refusal(400, "stop_sequences: each stop sequence must contain non-whitespace")
    if "output_config" in body:
        fmt = (
            body["output_config"].get("format") if isinstance(body["output_config"], dict) else None
        )
        if not (
            isinstance(fmt, dict)
            and fmt.get("type") == "json_schema"
            and isinstance(fmt.get("schema"), dict)
            and set(fmt) == {"type", "schema"}
        ):
            raise _Refusal(400, "output_config.format: expected {type: json_schema, schema}")


_FORMAT_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _beta_params(body: dict[str, Any]) -> None:
    """The Chat Completions API's model parameters, refused as it refuses them:
    temperature from 0 to 2, top_p from 0 to 1, stop a string or up to 4 strings,
    response_format text, json_object or a named json_schema."""
    for name, high in (("temperature", 2.0), ("top_p", 1.0)):
        problem = _number_in(body, name, high)
        if problem:
            raise _Refusal(400, problem, code="invalid_value", param=name)
    stop = body.get("stop")
    if stop is not None and not isinstance(stop, str) and not (_texts(stop) and len(stop) <= 4):
        raise _Refusal(400, "'stop': at most 4 strings", code="invalid_value", param="stop")
    rf = body.get("response_format")
    if rf is None:
        return
    kind = rf.get("type") if isinstance(rf, dict) else None
    if kind in ("text", "json_object") and set(rf) == {"type"}:
        return
    spec = rf.get("json_schema") if kind == "json_schema" else None
    if not (
        isinstance(spec, dict)
        and isinstance(spec.get("name"), str)
        and _FORMAT_NAME.fullmatch(spec["name"])
        and isinstance(spec.get("schema", {}), dict)
        and set(spec) <= {"name", "schema", "strict", "description"}
    ):
        raise _Refusal(
            400,
            "Invalid 'response_format': expected text, json_object or json_schema with a name",
            code="invalid_value",
            param="response_format",
        )


class _AlphaWire(_Wire):
    path = ALPHA_PATH

    def check(self, req: RecordedRequest, api_key: str | None) -> None:
        # Older clients send x-api-key; current official SDKs send Authorization: Bearer.
        key = req.headers.get("x-api-key") or _bearer(req.headers)
        if not key and api_key != "":  # "": a proxy that adds the key itself
            raise _Refusal(401, "x-api-key header is required")
        if api_key and key != api_key:
            raise _Refusal(401, "invalid x-api-key")
        if not req.headers.get("anthropic-version"):
            raise _Refusal(400, "anthropic-version: header is required")
        body = self.require_object(req)
        for name in ("model", "messages", "max_tokens"):
            if name not in body:
                raise _Refusal(400, f"{name}: Field required")
        _alpha_params(body)

    def error_body(self, status: int, reply: Reply | None, refusal: _Refusal | None) -> bytes:
        if refusal is not None:
            error = _alpha_error(status, message=refusal.message)
        else:
            assert reply is not None
            error = _alpha_error(status, reply.error_type, reply.error_message)
        return _encode({"type": "error", "error": error, "request_id": _new_id("req_")})

    def request_id_header(self) -> tuple[bytes, bytes]:
        return (b"request-id", _new_id("req_").encode())

    def mid_stream_status(self) -> int:
        return 529

    @staticmethod
    def _usage(plan: _Plan, output_tokens: int) -> dict[str, int]:
        return {
            "input_tokens": plan.reply.input_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": plan.reply.cached_tokens,
            "output_tokens": output_tokens,
        }

    def message(self, plan: _Plan) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if plan.reply.compaction is not None:
            content.append(plan.reply.compaction)
        if plan.tokens:
            content.append({"type": "text", "text": plan.text})
        content.extend(
            {"type": "tool_use", "id": t.spec.id, "name": t.spec.name, "input": t.spec.arguments}
            for t in plan.tools
        )
        return {
            "id": _new_id("msg_01"),
            "type": "message",
            "role": "assistant",
            "model": plan.model,
            "content": content,
            "stop_reason": plan.stop_reason,
            "stop_sequence": None,
            "usage": self._usage(plan, plan.output_tokens),
        }

    @staticmethod
    def _event(name: bytes, data: dict[str, Any]) -> bytes:
        return b"event: " + name + b"\ndata: " + _encode(data) + b"\n\n"

    async def stream(self, plan: _Plan, body: dict[str, Any], emit: _Emit, pacer: _Pacer) -> None:
        ev = self._event
        await emit(
            ev(
                b"message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": _new_id("msg_01"),
                        "type": "message",
                        "role": "assistant",
                        "model": plan.model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": self._usage(plan, min(1, plan.output_tokens)),
                    },
                },
            )
        )
        index = 0
        pinged = False

        async def start(block: dict[str, Any]) -> None:
            nonlocal pinged
            await emit(
                ev(
                    b"content_block_start",
                    {"type": "content_block_start", "index": index, "content_block": block},
                )
            )
            if not pinged:
                await emit(ev(b"ping", {"type": "ping"}))
                pinged = True

        async def delta(d: dict[str, Any]) -> None:
            await emit(
                ev(
                    b"content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": d},
                )
            )

        async def stop() -> None:
            nonlocal index
            await emit(ev(b"content_block_stop", {"type": "content_block_stop", "index": index}))
            index += 1

        if plan.reply.compaction is not None:
            await start(plan.reply.compaction)
            await stop()
        if plan.tokens:
            await start({"type": "text", "text": ""})
            for token in plan.tokens:
                await pacer.tick()
                await delta({"type": "text_delta", "text": token})
            await stop()
        for tool in plan.tools:
            await start(
                {"type": "tool_use", "id": tool.spec.id, "name": tool.spec.name, "input": {}}
            )
            await delta({"type": "input_json_delta", "partial_json": ""})
            for fragment in tool.fragments:
                await pacer.tick()
                await delta({"type": "input_json_delta", "partial_json": fragment})
            await stop()
        if not pinged:
            await emit(ev(b"ping", {"type": "ping"}))
        pacer.finish()
        await emit(
            ev(
                b"message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": plan.stop_reason, "stop_sequence": None},
                    "usage": self._usage(plan, plan.output_tokens),
                },
            )
        )
        await emit(ev(b"message_stop", {"type": "message_stop"}))

    async def stream_error(self, plan: _Plan, emit: _Emit) -> None:
        error = _alpha_error(529, plan.reply.error_type, plan.reply.error_message)
        await emit(self._event(b"error", {"type": "error", "error": error}))


class _BetaWire(_Wire):
    path = BETA_PATH

    def check(self, req: RecordedRequest, api_key: str | None) -> None:
        key = _bearer(req.headers)
        if not key and api_key != "":  # "": a proxy that adds the key itself
            raise _Refusal(
                401,
                "You didn't provide an API key. You need to provide your API key in an "
                "Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            )
        if api_key and key != api_key:
            raise _Refusal(401, "Incorrect API key provided.", code="invalid_api_key")
        body = self.require_object(req)
        if "model" not in body:
            raise _Refusal(400, "you must provide a model parameter")
        if "messages" not in body:
            raise _Refusal(
                400,
                "Missing required parameter: 'messages'.",
                code="missing_required_parameter",
                param="messages",
            )
        _beta_params(body)

    def error_body(self, status: int, reply: Reply | None, refusal: _Refusal | None) -> bytes:
        if refusal is not None:
            error = _beta_error(status, message=refusal.message)
            error["code"] = refusal.code
            error["param"] = refusal.param
        else:
            assert reply is not None
            error = _beta_error(status, reply.error_type, reply.error_code, reply.error_message)
        return _encode({"error": error})

    def request_id_header(self) -> tuple[bytes, bytes]:
        return (b"x-request-id", _new_id("req_", 16).encode())

    def mid_stream_status(self) -> int:
        return 500

    @staticmethod
    def _usage(plan: _Plan) -> dict[str, Any]:
        r = plan.reply
        prompt = r.input_tokens + r.cached_tokens
        return {
            "prompt_tokens": prompt,
            "completion_tokens": plan.output_tokens,
            "total_tokens": prompt + plan.output_tokens,
            "prompt_tokens_details": {"cached_tokens": r.cached_tokens, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def message(self, plan: _Plan) -> dict[str, Any]:
        message: dict[str, Any] = {
            "role": "assistant",
            "content": plan.text if plan.tokens or not plan.tools else None,
            "refusal": None,
            "annotations": [],
        }
        if plan.tools:
            message["tool_calls"] = [
                {
                    "id": t.spec.id,
                    "type": "function",
                    "function": {"name": t.spec.name, "arguments": "".join(t.fragments)},
                }
                for t in plan.tools
            ]
        return {
            "id": _new_id("chatcmpl-"),
            "object": "chat.completion",
            "created": int(time.time()),
            "model": plan.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": plan.stop_reason,
                }
            ],
            "usage": self._usage(plan),
            "system_fingerprint": "fp_fake",
        }

    async def stream(self, plan: _Plan, body: dict[str, Any], emit: _Emit, pacer: _Pacer) -> None:
        options = body.get("stream_options")
        include_usage = isinstance(options, dict) and options.get("include_usage") is True
        base: dict[str, Any] = {
            "id": _new_id("chatcmpl-"),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": plan.model,
            "system_fingerprint": "fp_fake",
        }

        async def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> None:
            data = {
                **base,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
                ],
            }
            if include_usage:
                data["usage"] = None
            await emit(b"data: " + _encode(data) + b"\n\n")

        role_sent = False
        if plan.tokens or not plan.tools:
            await chunk({"role": "assistant", "content": "", "refusal": None})
            role_sent = True
        for token in plan.tokens:
            await pacer.tick()
            await chunk({"content": token})
        for i, tool in enumerate(plan.tools):
            opening = {
                "index": i,
                "id": tool.spec.id,
                "type": "function",
                "function": {"name": tool.spec.name, "arguments": ""},
            }
            if role_sent:
                await chunk({"tool_calls": [opening]})
            else:
                await chunk(
                    {"role": "assistant", "content": None, "tool_calls": [opening], "refusal": None}
                )
                role_sent = True
            for fragment in tool.fragments:
                await pacer.tick()
                await chunk({"tool_calls": [{"index": i, "function": {"arguments": fragment}}]})
        pacer.finish()
        await chunk({}, plan.stop_reason)
        if include_usage:
            await emit(
                b"data: " + _encode({**base, "choices": [], "usage": self._usage(plan)}) + b"\n\n"
            )
        await emit(b"data: [DONE]\n\n")

    async def stream_error(self, plan: _Plan, emit: _Emit) -> None:
        r = plan.reply
        error = _beta_error(500, r.error_type, r.error_code, r.error_message)
        await emit(b"data: " + _encode({"error": error}) + b"\n\n")


_JSON_CT = (b"content-type", b"application/json")
_SSE_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
]


async def _read_request(scope: _Scope, receive: _Receive) -> RecordedRequest | None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    raw = b"".join(chunks)
    try:
        parsed: Any = msgspec.json.decode(raw) if raw else None
    except msgspec.DecodeError:
        parsed = None
    return RecordedRequest(
        method=scope["method"],
        path=scope["path"],
        query=scope.get("query_string", b"").decode("latin-1"),
        headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
        body=raw,
        json=parsed,
    )


# --- the provider ------------------------------------------------------------------------


class FakeProvider:
    """A scripted fake provider served over real HTTP from a background thread.

    ``start()`` binds ``127.0.0.1`` on a free port, runs uvicorn (uvloop when available) in a
    daemon thread and returns the base URL; ``stop()`` cancels in-flight requests and joins the
    thread. Everything else (``enqueue``, ``requests``, ``wait_for_requests``, ``active_streams``)
    is thread-safe and may be used from any thread. Async code should use the ``*_async``
    waiters (or ``async with``) so the caller's own event loop keeps running.
    """

    def __init__(self, kind: Kind, *, api_key: str | None = None, strict: bool = True) -> None:
        if kind not in ("alpha", "beta"):
            raise ValueError(f"unknown provider kind {kind!r}")
        self.kind: Kind = kind
        self.api_key = api_key
        self.strict = strict
        self.default: Reply = Reply(echo=True)
        self._wire: _Wire = _AlphaWire() if kind == "alpha" else _BetaWire()
        self._cond = threading.Condition()
        self._queue: deque[Reply] = deque()
        self._requests: list[RecordedRequest] = []
        self._active_streams = 0
        self._url: str | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._socket: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scopes: set[anyio.CancelScope] = set()
        self._closing = False
        self._crash: BaseException | None = None

    # -- lifecycle --

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT`` (no trailing slash); only while started."""
        if self._url is None:
            raise RuntimeError("the fake provider is not started")
        return self._url

    def start(self, timeout: float = 10.0) -> str:
        """Start serving (idempotent) and return the base URL."""
        if self._url is not None:
            return self._url
        _install_log_filter()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(2048)  # connections made before the loop accepts wait in the backlog
        config = uvicorn.Config(
            self._asgi,
            host="127.0.0.1",
            port=sock.getsockname()[1],
            log_level="warning",
            log_config=None,  # leave the process's logging configuration alone
            lifespan="off",
            ws="none",
            interface="asgi3",
            backlog=2048,
            timeout_graceful_shutdown=2,
        )
        server = uvicorn.Server(config)
        self._closing = False
        self._crash = None
        thread = threading.Thread(
            target=self._run, args=(server, sock), name=f"fake-{self.kind}-provider", daemon=True
        )
        self._server, self._socket, self._thread = server, sock, thread
        thread.start()
        deadline = time.monotonic() + timeout
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                self._cleanup()
                raise RuntimeError(f"fake {self.kind} provider failed to start") from self._crash
            time.sleep(0.002)
        self._url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        return self._url

    def _run(self, server: uvicorn.Server, sock: socket.socket) -> None:
        factory = uvloop.new_event_loop if uvloop is not None else None
        try:
            with asyncio.Runner(loop_factory=factory) as runner:
                runner.run(self._serve(server, sock))
        except Exception as exc:  # noqa: BLE001 - start() re-raises it as the cause
            self._crash = exc

    async def _serve(self, server: uvicorn.Server, sock: socket.socket) -> None:
        self._loop = asyncio.get_running_loop()
        await server.serve(sockets=[sock])

    def stop(self, timeout: float = 10.0) -> None:
        """Stop serving (idempotent): open streams are cut, the thread is joined."""
        server, thread, loop = self._server, self._thread, self._loop
        if server is None or thread is None:
            return
        if loop is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(self._cancel_all)
        server.should_exit = True
        server.force_exit = True
        thread.join(timeout)
        self._cleanup()

    def _cleanup(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._socket is not None:
            self._socket.close()
        self._server = self._thread = self._socket = self._loop = None
        self._url = None

    def _cancel_all(self) -> None:
        self._closing = True
        for scope in list(self._scopes):
            scope.cancel()

    def __enter__(self) -> FakeProvider:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> FakeProvider:
        await anyio.to_thread.run_sync(self.start)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)

    # -- scripting and inspection --

    def enqueue(self, *replies: Reply) -> None:
        """Script the next replies; each request consumes one, in order."""
        with self._cond:
            self._queue.extend(replies)

    @property
    def queued(self) -> int:
        """Scripted replies not consumed yet."""
        with self._cond:
            return len(self._queue)

    @property
    def requests(self) -> list[RecordedRequest]:
        """A snapshot of every request received so far, oldest first."""
        with self._cond:
            return list(self._requests)

    @property
    def active_streams(self) -> int:
        """Streaming responses currently open."""
        return self._active_streams

    def reset(self) -> None:
        """Forget queued replies and recorded requests; restore the echoing default."""
        with self._cond:
            self._queue.clear()
            self._requests.clear()
            self.default = Reply(echo=True)

    def wait_for_requests(self, n: int, timeout: float = 5) -> None:
        """Block until at least ``n`` requests were received; TimeoutError otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self._requests) >= n, timeout):
                raise TimeoutError(
                    f"fake {self.kind}: {len(self._requests)} request(s) after {timeout}s, "
                    f"expected {n}"
                )

    def wait_for_active_streams(self, n: int, timeout: float = 5) -> None:
        """Block until exactly ``n`` streams are open; TimeoutError otherwise."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._active_streams == n, timeout):
                raise TimeoutError(
                    f"fake {self.kind}: {self._active_streams} open stream(s) after {timeout}s, "
                    f"expected {n}"
                )

    # The async waiters block a worker thread on the same condition as the sync ones. A cancel
    # scope cannot interrupt that thread, hence the explicit timeout.
    async def wait_for_requests_async(self, n: int, timeout: float = 5) -> None:  # noqa: ASYNC109
        """``wait_for_requests`` without blocking the caller's event loop."""
        await anyio.to_thread.run_sync(self.wait_for_requests, n, timeout)

    async def wait_for_active_streams_async(self, n: int, timeout: float = 5) -> None:  # noqa: ASYNC109
        """``wait_for_active_streams`` without blocking the caller's event loop."""
        await anyio.to_thread.run_sync(self.wait_for_active_streams, n, timeout)

    def _next_reply(self) -> Reply:
        with self._cond:
            return self._queue.popleft() if self._queue else self.default

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self._requests.append(request)
            self._cond.notify_all()

    def _streams_changed(self, delta: int) -> None:
        with self._cond:
            self._active_streams += delta
            self._cond.notify_all()

    # -- the ASGI application --

    async def _asgi(self, scope: _Scope, receive: _Receive, send: _Send) -> None:
        if scope["type"] != "http":
            return
        cancel = anyio.CancelScope()
        self._scopes.add(cancel)
        if self._closing:
            cancel.cancel()
        finished = False
        try:
            with cancel:
                finished = await self._handle(scope, receive, send, cancel)
        finally:
            self._scopes.discard(cancel)
        if not finished:
            # Leave the response incomplete: uvicorn then drops the connection (or answers 500
            # if nothing was sent yet); the filter keeps the deliberate abort out of the logs.
            _DELIBERATE_ABORT.set(True)

    async def _handle(
        self, scope: _Scope, receive: _Receive, send: _Send, cancel: anyio.CancelScope
    ) -> bool:
        """Answer one request; False when the response was deliberately left unfinished."""
        request = await _read_request(scope, receive)
        if request is None:  # the client left before sending its body
            return True
        self._record(request)
        wire = self._wire
        refusal = self._refusal(request)
        if refusal is not None:
            payload = wire.error_body(refusal.status, None, refusal)
            await self._send_json(send, refusal.status, payload, [])
            return True

        body: dict[str, Any] = request.json if isinstance(request.json, dict) else {}
        reply = self._next_reply()
        plan = _make_plan(self.kind, reply, body)
        extra = [
            (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in reply.headers.items()
        ]
        if reply.status != 200:
            if reply.first_token_delay > 0:
                await anyio.sleep(reply.first_token_delay)
            if reply.status == 429 and all(k != b"retry-after" for k, _ in extra):
                extra.append((b"retry-after", b"0"))
            payload = wire.error_body(reply.status, reply, None)
            await self._send_json(send, reply.status, payload, extra)
            return True
        if body.get("stream") is not True or reply.ignore_stream:
            await self._answer_whole(plan, send, extra)
            return True
        return await self._stream(plan, body, receive, send, cancel, extra)

    def _refusal(self, request: RecordedRequest) -> _Refusal | None:
        wire = self._wire
        try:
            if request.path != wire.path:
                raise _Refusal(404, f"Not found: {request.method} {request.path}")
            if request.method != "POST":
                raise _Refusal(405, f"Method not allowed: {request.method} {request.path}")
            if self.strict:
                wire.check(request, self.api_key)
        except _Refusal as refusal:
            return refusal
        return None

    async def _answer_whole(
        self, plan: _Plan, send: _Send, extra: list[tuple[bytes, bytes]]
    ) -> None:
        """A non-streaming answer, after as long as streaming it would have taken."""
        reply, wire = plan.reply, self._wire
        deltas = len(plan.tokens) + sum(len(t.fragments) for t in plan.tools)
        if reply.error_after_tokens is not None:
            deltas = min(deltas, reply.error_after_tokens)
        delay = _Pacer(reply).total_delay(deltas)
        if delay > 0:
            await anyio.sleep(delay)
        if reply.error_after_tokens is not None:
            status = wire.mid_stream_status()
            await self._send_json(send, status, wire.error_body(status, reply, None), extra)
        else:
            await self._send_json(send, 200, _encode(wire.message(plan)), extra)

    async def _stream(
        self,
        plan: _Plan,
        body: dict[str, Any],
        receive: _Receive,
        send: _Send,
        cancel: anyio.CancelScope,
        extra: list[tuple[bytes, bytes]],
    ) -> bool:
        wire = self._wire
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [*_SSE_HEADERS, wire.request_id_header(), *extra],
            }
        )

        async def emit(data: bytes) -> None:
            await send({"type": "http.response.body", "body": data, "more_body": True})

        async def watch_disconnect() -> None:
            # uvicorn's send() silently drops data once the client is gone; only receive()
            # tells, so a watcher cancels the stream when the client disconnects.
            while (await receive())["type"] != "http.disconnect":
                pass
            cancel.cancel()

        complete = False
        self._streams_changed(+1)
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(watch_disconnect)
                try:
                    await wire.stream(plan, body, emit, _Pacer(plan.reply))
                    complete = True
                except _InjectedError:
                    if plan.reply.mid_stream_error == "event":
                        await wire.stream_error(plan, emit)
                        complete = True
                tg.cancel_scope.cancel()
        finally:
            self._streams_changed(-1)
        if complete:
            await send({"type": "http.response.body", "body": b"", "more_body": False})
        return complete

    async def _send_json(
        self, send: _Send, status: int, payload: bytes, extra: list[tuple[bytes, bytes]]
    ) -> None:
        headers = [
            _JSON_CT,
            (b"content-length", str(len(payload)).encode()),
            self._wire.request_id_header(),
            *extra,
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": payload, "more_body": False})


def fake_alpha(*, api_key: str | None = None, strict: bool = True) -> FakeProvider:
    """An (unstarted) fake Anthropic-Messages-style provider; use as a context manager."""
    return FakeProvider("alpha", api_key=api_key, strict=strict)


def fake_beta(*, api_key: str | None = None, strict: bool = True) -> FakeProvider:
    """An (unstarted) fake OpenAI-Chat-Completions-style provider; use as a context manager."""
    return FakeProvider("beta", api_key=api_key, strict=strict)
