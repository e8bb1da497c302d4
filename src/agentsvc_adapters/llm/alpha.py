"""The ``alpha`` family: the Anthropic Messages API, streamed, on aiohttp
(see ``sse.ProviderHttp``).

Wire format (checked against https://docs.anthropic.com/en/api/messages,
.../en/docs/build-with-claude/streaming, .../tool-use and .../prompt-caching, via the
search index: the OpenAPI-generated ``anthropic-sdk-python`` types and the docs' text):

Request: ``POST {base_url}/v1/messages`` (``base_url`` has no ``/v1``, as
``AGENTSVC_ALPHA_BASE_URL=https://api.anthropic.com``), headers ``x-api-key`` (left
out when there is no key: a proxy that adds it), ``anthropic-version: 2023-06-01``;
body ``model``, ``max_tokens`` (required), ``stream: true``, ``system`` (top level,
left out when empty), ``tools`` (``{name, description, input_schema}``) and
``messages``, which must alternate user/assistant, so consecutive same-role messages
are merged into one:

- user text -> ``{"type": "text"}`` blocks (empty text is left out: the API rejects
  empty text blocks);
- assistant -> its text, then ``tool_use`` blocks ``{id, name, input}``;
- a ``tool`` message -> a user message with a ``tool_result`` block
  ``{tool_use_id, content}``; consecutive results share one user message, and tool
  results are put before any text in it ("tool_result blocks must come FIRST").

Model parameters (entities/model_params.py): ``temperature``, ``top_p``,
``stop_sequences``, the output cap as ``max_tokens``, and structured output as
``output_config: {"format": {"type": "json_schema", "schema"}}`` (the structured
outputs page: generally available, the beta's ``output_format`` and its header no
longer needed; the format has no name and no ``strict``: the reply always follows the
schema). A temperature over 1, or temperature with top_p, is refused before the call
(use_cases/model_params.py).

Response events: ``message_start`` (usage), ``content_block_start`` (a ``tool_use``
block carries id and name), ``content_block_delta`` (``text_delta`` -> one
``TextDelta`` each; ``input_json_delta`` fragments per block index), ``content_block_stop``
(a tool call is complete: its JSON is parsed and emitted), ``message_delta`` (stop
reason; usage counts that are *cumulative*), ``message_stop``, ``ping`` and unknown
events (ignored, as the docs ask), ``error`` (-> ``Upstream(PROVIDER_ERROR)``).

Usage: Anthropic's ``input_tokens`` counts only the tokens after the last cache
breakpoint; the docs give ``total = input_tokens + cache_creation_input_tokens +
cache_read_input_tokens``. ``Usage.input_tokens`` reports that total (what the beta
family's ``prompt_tokens`` means) and ``cached_input_tokens`` the cache reads.

Tool arguments that are not a JSON object (a stream cut off by ``max_tokens`` mid-call)
are passed on as ``{"_raw": "<the text received>"}``, so nothing is lost and the tool
rejects them with a message the model can act upon.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Unpack

import aiohttp
import httpx
import msgspec

from agentsvc_adapters.llm.sse import (
    TRANSPORT_ERRORS,
    ProviderHttp,
    SSEParser,
    TransportOptions,
    short,
)
from agentsvc_core.entities import Message, ToolCall, Usage
from agentsvc_core.entities.model_params import ModelParams
from agentsvc_core.ports import (
    ChatModel,
    CompactionBlock,
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallRequested,
    UsageReport,
)
from agentsvc_core.ports.llm import FinishReason

__all__ = ["AlphaModel", "parse_arguments"]

ANTHROPIC_VERSION = "2023-06-01"


class _Usage(msgspec.Struct):
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None


class _StartMessage(msgspec.Struct):
    usage: _Usage = msgspec.field(default_factory=_Usage)


class _MessageStart(msgspec.Struct):
    message: _StartMessage


class _Delta(msgspec.Struct):
    type: str = ""
    text: str = ""
    partial_json: str = ""
    content: str = ""  # compaction_delta


class _BlockDelta(msgspec.Struct):
    delta: _Delta
    index: int = 0


class _Block(msgspec.Struct):
    type: str = ""
    id: str = ""
    name: str = ""


class _BlockStart(msgspec.Struct):
    content_block: _Block
    index: int = 0


class _BlockStop(msgspec.Struct):
    index: int = 0


class _StopDelta(msgspec.Struct):
    stop_reason: str | None = None


class _MessageDelta(msgspec.Struct):
    delta: _StopDelta = msgspec.field(default_factory=_StopDelta)
    usage: _Usage | None = None


class _ErrorBody(msgspec.Struct):
    type: str = ""
    message: str = ""


class _ErrorEvent(msgspec.Struct):
    error: _ErrorBody = msgspec.field(default_factory=_ErrorBody)


_block_delta = msgspec.json.Decoder(_BlockDelta).decode
_block_start = msgspec.json.Decoder(_BlockStart).decode
_block_stop = msgspec.json.Decoder(_BlockStop).decode
_message_start = msgspec.json.Decoder(_MessageStart).decode
_message_delta = msgspec.json.Decoder(_MessageDelta).decode
_error_event = msgspec.json.Decoder(_ErrorEvent).decode
_any = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode

_STOP: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "compaction": "compaction",  # paused after a native compaction (pause_after_compaction)
}

COMPACTION_BETA = "compact-2026-01-12"


def parse_arguments(text: str) -> dict[str, Any]:
    """Streamed tool arguments as a dict: ``{}`` for none, ``{"_raw": text}`` when
    they are not a JSON object."""
    if not text:
        return {}
    try:
        value = _any(text)
    except msgspec.DecodeError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_raw": text}


def _since_compaction(messages: list[Message]) -> list[Message]:
    """Native compaction: the latest message carrying a compaction block replaces
    everything before it. The user message just before it is kept so the request
    still starts with a user turn (the API ignores content before the block)."""
    last = max((i for i, m in enumerate(messages) if m.provider_blocks), default=None)
    if last is None:
        return messages
    start = max((i for i in range(last) if messages[i].role == "user"), default=last)
    return messages[start:]


def _messages(messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    reorder = False
    for m in _since_compaction(messages):
        blocks: list[dict[str, Any]]
        if m.role == "tool":
            role = "user"
            result: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id or ""}
            if m.content:
                result["content"] = m.content
            blocks = [result]
        else:
            role = m.role
            blocks = [dict(b) for b in m.provider_blocks]
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            blocks.extend(
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in m.tool_calls
            )
        if not blocks:
            continue
        if out and out[-1]["role"] == role:
            content: list[dict[str, Any]] = out[-1]["content"]
            reorder = reorder or (m.role == "tool" and content[-1]["type"] != "tool_result")
            content.extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    if reorder:  # a user text then tool results in one message: the results go first
        for message in out:
            if message["role"] == "user":
                message["content"].sort(key=lambda b: b["type"] != "tool_result")
    return out


def _put_params(body: dict[str, Any], params: ModelParams) -> None:
    """The model parameters under the Messages API's names (the output cap is
    ``max_tokens``, set from the request)."""
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.stop:
        body["stop_sequences"] = list(params.stop)
    structured = params.structured()
    if structured is not None:
        body["output_config"] = {"format": {"type": "json_schema", "schema": structured.schema}}


def request_body(request: ModelRequest) -> dict[str, Any]:
    """The Messages API body for ``request`` (a dict, for tests and benchmarks)."""
    body: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "stream": True,
    }
    if request.system:
        body["system"] = request.system
    if request.tools:
        tools = []
        for t in request.tools:
            tool: dict[str, Any] = {"name": t.name, "input_schema": t.parameters}
            if t.description:
                tool["description"] = t.description
            tools.append(tool)
        body["tools"] = tools
    body["messages"] = _messages(request.messages)
    if request.params is not None:
        _put_params(body, request.params)
    native = request.native_compaction
    if native is not None:
        edit: dict[str, Any] = {
            "type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": native.trigger_tokens},
            "pause_after_compaction": native.pause_after,
        }
        if native.instructions:
            edit["instructions"] = native.instructions
        body["context_management"] = {"edits": [edit]}
    return body


class AlphaModel(ChatModel):
    """Anthropic Messages API, streamed. See the module docstring for the mapping."""

    provider = "alpha"

    def __init__(
        self,
        base_url: str = "https://api.anthropic.com",
        api_key: str = "",
        *,
        http: httpx.AsyncClient | aiohttp.ClientSession | None = None,
        **options: Unpack[TransportOptions],
    ) -> None:
        self._url = base_url.rstrip("/") + "/v1/messages"
        self._api_key = api_key
        self._http = ProviderHttp(self.provider, http=http, **options)

    async def aclose(self) -> None:
        await self._http.aclose()

    def __repr__(self) -> str:  # no key in reprs
        return f"AlphaModel({self._url!r})"

    def _headers(self, key: str, *, compaction: bool = False) -> dict[str, str]:
        headers = {
            "anthropic-version": ANTHROPIC_VERSION,
            "content-type": "application/json",
            "accept": "text/event-stream",
            "accept-encoding": "identity",  # SSE: compression would only buffer tokens
        }
        # No key: no x-api-key header (a proxy that adds the key itself, configured
        # by AGENTSVC_ALPHA_BASE_URL alone); a provider that wants one answers 401,
        # which is PROVIDER_AUTH.
        if key:
            headers["x-api-key"] = key
        if compaction:
            headers["anthropic-beta"] = COMPACTION_BETA
        return headers

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:  # noqa: PLR0912
        # (the per-chunk loop is inlined on purpose: it is the hot path)
        key = request.api_key or self._api_key  # a BYOK key wins, for this call only
        secrets = (key, self._api_key)
        body = _encode(request_body(request))
        headers = self._headers(key, compaction=request.native_compaction is not None)
        response = await self._http.open(self._url, headers, body, secrets)
        parser = SSEParser()
        state = _State()
        chunks = response.chunks()
        try:
            async for chunk in chunks:
                for event, data in parser.feed(chunk):
                    if event == "content_block_delta":  # the hot path, inline
                        bd = _block_delta(data)
                        if bd.delta.type == "text_delta":
                            if bd.delta.text:
                                yield TextDelta(bd.delta.text)
                        elif bd.delta.type == "input_json_delta":
                            state.fragment(bd.index, bd.delta.partial_json)
                        elif bd.delta.content:
                            state.compaction_text(bd.index, bd.delta.content)
                    else:
                        out = state.event(event, data)
                        if out is not None:
                            yield out
        except _StreamError as exc:
            err = self._http.error(f"failed mid-stream: {short(str(exc))}", secrets)
            raise self._http.failed(err, "an error event mid-stream") from None
        except (*TRANSPORT_ERRORS, msgspec.MsgspecError, ValueError) as exc:
            err = self._http.broken(exc, secrets)
            raise self._http.failed(err, f"stream broken: {type(exc).__name__}") from None
        finally:
            await response.aclose()
        if not state.done:
            err = self._http.error("ended the stream before message_stop", secrets)
            raise self._http.failed(err, "stream ended early")
        yield UsageReport(state.usage())
        yield Finished(_STOP.get(state.stop or "", "other"))


class _StreamError(Exception):
    """An ``error`` event: the provider failed mid-stream."""


class _State:
    """What a stream accumulates besides text: tool calls, usage, the stop reason."""

    __slots__ = ("compactions", "done", "stop", "tools", "totals")

    def __init__(self) -> None:
        # tool_use blocks being received: index -> (id, name, argument fragments)
        self.tools: dict[int, tuple[str, str, list[str]]] = {}
        # compaction blocks being received: index -> (the block as started, content deltas)
        self.compactions: dict[int, tuple[dict[str, Any], list[str]]] = {}
        self.totals = _Usage()
        self.stop: str | None = None
        self.done = False

    def compaction_text(self, index: int, content: str) -> None:
        found = self.compactions.get(index)
        if found is not None:
            found[1].append(content)

    def fragment(self, index: int, partial_json: str) -> None:
        tool = self.tools.get(index)
        if tool is not None:
            tool[2].append(partial_json)

    def _block_stopped(self, data: bytes) -> ModelEvent | None:
        index = _block_stop(data).index
        compaction = self.compactions.pop(index, None)
        if compaction is not None:
            raw, parts = compaction
            if parts:
                raw["content"] = str(raw.get("content") or "") + "".join(parts)
            return CompactionBlock(raw)
        tool = self.tools.pop(index, None)
        if tool is None:
            return None
        args = parse_arguments("".join(tool[2]))
        return ToolCallRequested(ToolCall(id=tool[0], name=tool[1], arguments=args))

    def _block_started(self, data: bytes) -> None:
        start = _block_start(data)
        block = start.content_block
        if block.type == "tool_use":
            self.tools[start.index] = (block.id, block.name, [])
        elif block.type == "compaction":
            self.compactions[start.index] = (dict(_any(data).get("content_block", {})), [])

    def event(self, event: str, data: bytes) -> ModelEvent | None:
        if event == "content_block_stop":
            return self._block_stopped(data)
        if event == "content_block_start":
            self._block_started(data)
        elif event == "message_start":
            self.totals = _message_start(data).message.usage
        elif event == "message_delta":
            md = _message_delta(data)
            self.stop = md.delta.stop_reason or self.stop
            if md.usage is not None:  # cumulative counts: a reported one replaces
                for name in _Usage.__struct_fields__:
                    value = getattr(md.usage, name)
                    if value is not None:
                        setattr(self.totals, name, value)
        elif event == "message_stop":
            self.done = True
        elif event == "error":
            err = _error_event(data).error
            raise _StreamError(f"{err.type}: {err.message}")
        return None

    def usage(self) -> Usage:
        t = self.totals
        cached = t.cache_read_input_tokens
        written = t.cache_creation_input_tokens or 0
        return Usage(
            input_tokens=(t.input_tokens or 0) + (cached or 0) + written,
            output_tokens=t.output_tokens or 0,
            cached_input_tokens=cached,
        )
