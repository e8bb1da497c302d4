"""The ``beta`` family: the OpenAI Chat Completions API (and compatible servers),
streamed, on aiohttp (see ``sse.ProviderHttp``).

Wire format (checked against https://platform.openai.com/docs/api-reference/chat/create,
.../chat/streaming and .../chat/object, via the search index: the OpenAPI-generated
``openai-python`` types ``completion_create_params.py``, ``chat_completion_chunk.py``,
``completion_usage.py``):

Request: ``POST {base_url}/chat/completions``; ``base_url`` includes ``/v1``, OpenAI's own
convention (``AGENTSVC_BETA_BASE_URL=https://api.openai.com/v1``; a local server is
``http://localhost:11434/v1`` and the like). ``Authorization: Bearer KEY``, left out when
there is no key (local servers). Body: ``model``, ``stream: true``,
``stream_options: {"include_usage": true}``, ``messages`` (the system prompt first as
``role: "system"``, left out when empty; user text; assistant text with ``tool_calls``
``[{id, type: "function", function: {name, arguments: "<JSON string>"}}]`` and
``content: null`` when it has no text; ``role: "tool"`` results with ``tool_call_id``),
``tools`` (``{type: "function", function: {name, description, parameters}}``).

The output cap: the reference marks ``max_tokens`` "deprecated in favor of
``max_completion_tokens``, and not compatible with o-series models" (issue threads
report GPT-5 models refusing it too), so ``max_completion_tokens`` is the default.
Several OpenAI-compatible servers only know ``max_tokens`` and silently ignore the new
name (per their issue trackers: Ollama, whose PR for it was still open, and LM Studio;
llama.cpp's server accepts both since early 2026), so the field is a constructor option:
``max_tokens_field="max_tokens"`` for those. Sending both is no way out: OpenAI's
reasoning models refuse a request that carries ``max_tokens``.

Model parameters (entities/model_params.py): ``temperature``, ``top_p``, ``stop`` (up
to 4), the output cap as above, and ``response_format`` as given (``{"type": "text"}``
or ``{"type": "json_schema", "json_schema": {name, schema, strict}}``: the service's
shape is OpenAI's). A model that refuses one (reasoning models take no temperature)
answers 400, which is ``PROVIDER_ERROR``.

Response: ``data:`` lines of ``chat.completion.chunk`` objects, then ``data: [DONE]``.
``delta.content`` -> one ``TextDelta`` per chunk; ``delta.tool_calls`` fragments are
assembled per ``index`` (id and name arrive in the first) and emitted as
``ToolCallRequested`` when ``finish_reason`` arrives (or at ``[DONE]``); the last chunk
(``choices: []``) carries ``usage``: ``prompt_tokens`` (which includes cached tokens),
``completion_tokens``, ``prompt_tokens_details.cached_tokens``. A ``data`` object with
an ``error`` key is a mid-stream failure (``Upstream(PROVIDER_ERROR)``). A stream that
ends without ``[DONE]`` is accepted when a ``finish_reason`` was seen (some compatible
servers omit it), else it is a broken stream.

Tool arguments that are not a JSON object become ``{"_raw": "<text>"}`` (see
:func:`agentsvc_adapters.llm.alpha.parse_arguments`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, Literal, Unpack

import aiohttp
import httpx
import msgspec

from agentsvc_adapters.llm.alpha import parse_arguments
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
    Finished,
    ModelEvent,
    ModelRequest,
    TextDelta,
    ToolCallRequested,
    UsageReport,
)
from agentsvc_core.ports.llm import FinishReason

__all__ = ["BetaModel", "MaxTokensField"]

MaxTokensField = Literal["max_completion_tokens", "max_tokens"]


class _Function(msgspec.Struct):
    name: str | None = None
    arguments: str | None = None


class _ToolDelta(msgspec.Struct):
    index: int | None = None
    id: str | None = None
    function: _Function | None = None


class _Delta(msgspec.Struct):
    content: str | None = None
    tool_calls: list[_ToolDelta] | None = None


class _Choice(msgspec.Struct):
    delta: _Delta | None = None
    finish_reason: str | None = None


class _Details(msgspec.Struct):
    cached_tokens: int | None = None


class _Usage(msgspec.Struct):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    prompt_tokens_details: _Details | None = None


class _Error(msgspec.Struct):
    message: str = ""
    type: str | None = None


class _Chunk(msgspec.Struct):
    choices: list[_Choice] = []
    usage: _Usage | None = None
    error: _Error | str | None = None


_chunk = msgspec.json.Decoder(_Chunk).decode
_encode = msgspec.json.Encoder().encode

_STOP: dict[str, FinishReason] = {"stop": "stop", "tool_calls": "tool_calls", "length": "length"}


def _messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id or "", "content": m.content})
        elif m.role == "assistant":
            if not m.content and not m.tool_calls:
                continue  # a reply stopped before its first token: nothing to show the model
            message: dict[str, Any] = {"role": "assistant", "content": m.content or None}
            if m.tool_calls:
                message["tool_calls"] = [
                    {
                        "id": c.id,
                        "type": "function",
                        "function": {"name": c.name, "arguments": _encode(c.arguments).decode()},
                    }
                    for c in m.tool_calls
                ]
            out.append(message)
        else:
            out.append({"role": "user", "content": m.content})
    return out


def request_body(
    request: ModelRequest, max_tokens_field: MaxTokensField = "max_completion_tokens"
) -> dict[str, Any]:
    """The Chat Completions body for ``request`` (a dict, for tests and benchmarks)."""
    body: dict[str, Any] = {
        "model": request.model,
        "messages": _messages(request.system, request.messages),
        max_tokens_field: request.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        tools = []
        for t in request.tools:
            function: dict[str, Any] = {"name": t.name, "parameters": t.parameters}
            if t.description:
                function["description"] = t.description
            tools.append({"type": "function", "function": function})
        body["tools"] = tools
    if request.params is not None:
        _put_params(body, request.params)
    return body


def _put_params(body: dict[str, Any], params: ModelParams) -> None:
    """The model parameters under the Chat Completions API's names (the output cap is
    ``max_tokens_field``, set from the request)."""
    if params.temperature is not None:
        body["temperature"] = params.temperature
    if params.top_p is not None:
        body["top_p"] = params.top_p
    if params.stop:
        body["stop"] = list(params.stop)
    rf = params.response_format
    if rf is not None:
        body["response_format"] = msgspec.to_builtins(rf)


class BetaModel(ChatModel):
    """OpenAI Chat Completions API, streamed. See the module docstring for the mapping."""

    provider = "beta"

    def __init__(
        self,
        base_url: str = "https://api.openai.com/v1",
        api_key: str = "",
        *,
        http: httpx.AsyncClient | aiohttp.ClientSession | None = None,
        max_tokens_field: MaxTokensField = "max_completion_tokens",
        **options: Unpack[TransportOptions],
    ) -> None:
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._api_key = api_key
        self._max_tokens_field: MaxTokensField = max_tokens_field
        self._http = ProviderHttp(self.provider, http=http, **options)

    async def aclose(self) -> None:
        await self._http.aclose()

    def __repr__(self) -> str:  # no key in reprs
        return f"BetaModel({self._url!r})"

    async def stream(  # noqa: C901, PLR0912 - the wire format's cases in one streaming loop
        self, request: ModelRequest
    ) -> AsyncIterator[ModelEvent]:
        # (the per-chunk loop is inlined on purpose: it is the hot path)
        key = request.api_key or self._api_key  # a BYOK key wins, for this call only
        secrets = (key, self._api_key)
        headers = {
            "content-type": "application/json",
            "accept": "text/event-stream",
            "accept-encoding": "identity",  # SSE: compression would only buffer tokens
        }
        if key:
            headers["authorization"] = f"Bearer {key}"
        body = _encode(request_body(request, self._max_tokens_field))
        response = await self._http.open(self._url, headers, body, secrets)
        parser = SSEParser()
        state = _State()
        chunks = response.chunks()
        try:
            async for raw in chunks:
                for _, data in parser.feed(raw):
                    if data == b"[DONE]":
                        state.done = True
                        continue
                    chunk = _chunk(data)
                    for choice in chunk.choices:
                        delta = choice.delta
                        if delta is not None:
                            if delta.content:
                                yield TextDelta(delta.content)
                            if delta.tool_calls:
                                state.fragments(delta.tool_calls)
                        if choice.finish_reason:
                            state.stop = choice.finish_reason
                            for call in state.calls():
                                yield ToolCallRequested(call)
                    if chunk.usage is not None:
                        state.usage = chunk.usage
                    if chunk.error is not None:
                        state.fail(chunk.error)
        except _StreamError as exc:
            err = self._http.error(f"failed mid-stream: {short(str(exc))}", secrets)
            raise self._http.failed(err, "an error event mid-stream") from None
        except (*TRANSPORT_ERRORS, msgspec.MsgspecError, ValueError) as exc:
            err = self._http.broken(exc, secrets)
            raise self._http.failed(err, f"stream broken: {type(exc).__name__}") from None
        finally:
            await response.aclose()
        if not state.done and state.stop is None:
            err = self._http.error("ended the stream before [DONE]", secrets)
            raise self._http.failed(err, "stream ended early")
        for call in state.calls():
            yield ToolCallRequested(call)
        if state.usage is not None:
            yield UsageReport(state.report())
        yield Finished(_STOP.get(state.stop or "", "other"))


class _StreamError(Exception):
    """A chunk with an ``error``: the provider failed mid-stream."""


class _State:
    """What a stream accumulates besides text: tool calls, usage, the finish reason."""

    __slots__ = ("done", "stop", "tools", "usage")

    def __init__(self) -> None:
        # tool calls being received: index -> [id, name, argument fragments]
        self.tools: dict[int, tuple[list[str], list[str]]] = {}
        self.usage: _Usage | None = None
        self.stop: str | None = None
        self.done = False

    def fragments(self, deltas: list[_ToolDelta]) -> None:
        tools = self.tools
        for d in deltas:
            index = d.index
            if index is None:  # some compatible servers leave it out: a new id, a new call
                index = max(tools, default=-1)
                if index < 0 or (d.id and d.id != tools[index][0][0]):
                    index += 1
            tool = tools.get(index)
            if tool is None:
                tool = tools[index] = (["", ""], [])
            ident = tool[0]
            if d.id and not ident[0]:
                ident[0] = d.id
            fn = d.function
            if fn is not None:
                if fn.name and not ident[1]:  # some servers repeat the name: keep the first
                    ident[1] = fn.name
                if fn.arguments:
                    tool[1].append(fn.arguments)

    def calls(self) -> list[ToolCall]:
        """The tool calls received so far, complete, in index order (emptied)."""
        if not self.tools:
            return []
        calls = [
            ToolCall(id=ident[0], name=ident[1], arguments=parse_arguments("".join(parts)))
            for _, (ident, parts) in sorted(self.tools.items())
        ]
        self.tools = {}
        return calls

    @staticmethod
    def fail(error: _Error | str) -> None:
        if isinstance(error, str):
            raise _StreamError(error)
        raise _StreamError(f"{error.type}: {error.message}" if error.type else error.message)

    def report(self) -> Usage:
        u = self.usage or _Usage()
        details = u.prompt_tokens_details
        return Usage(
            input_tokens=u.prompt_tokens,
            output_tokens=u.completion_tokens,
            cached_input_tokens=details.cached_tokens if details is not None else None,
        )
