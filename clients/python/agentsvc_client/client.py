"""``Client`` and ``AsyncClient``: one pooled httpx client each, every operation as a
method of a resource (``client.agents.create(...)``), replies as event streams."""

from __future__ import annotations

import mimetypes
import os
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from contextlib import asynccontextmanager, contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, TypeVar

import httpx
import msgspec

from agentsvc_client import errors
from agentsvc_client._async_resources import AsyncResources
from agentsvc_client._base import _seg
from agentsvc_client._resources import Resources
from agentsvc_client._stream import RETRY_STATUSES, AsyncReplyStream, ReplyStream
from agentsvc_client.computer import ExecEvent, exec_events
from agentsvc_client.models import Document, Profile, RegenerateBody, SendMessageBody
from agentsvc_client.thread_events import AsyncThreadEventStream, ThreadEventStream

T = TypeVar("T")

__version__ = "0.1.0"
DEFAULT_TIMEOUT = httpx.Timeout(60.0, connect=10.0)
_ENCODER = msgspec.json.Encoder()

# What the file argument of knowledge.upload may be: bytes, a path, or an open binary file.
FileInput = bytes | str | os.PathLike[str] | IO[bytes]


def _params(params: Mapping[str, Any] | None) -> dict[str, str] | None:
    """Query parameters as the service reads them: None left out, booleans lowercase."""
    if not params:
        return None
    out: dict[str, str] = {}
    for name, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[name] = "true" if value else "false"
        elif isinstance(value, datetime):
            out[name] = value.isoformat()
        else:
            out[name] = str(value)
    return out


def _decode(response: httpx.Response, type: type[T]) -> T:
    if type is str:  # a page or a script (a runner's button, its embed.js)
        return response.text  # type: ignore[return-value]
    if type is bytes:  # a picture (an agent's avatar)
        return response.content  # type: ignore[return-value]
    try:
        return msgspec.json.decode(response.content, type=type)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise errors.UnexpectedResponse(
            f"{response.request.method} {response.request.url.path}: the answer does not match"
            f" the client's model: {exc}",
            status=response.status_code,
            request_id=response.headers.get("x-request-id"),
        ) from exc


def _file_parts(file: FileInput, filename: str | None) -> tuple[str, bytes | IO[bytes], str | None]:
    if isinstance(file, str | os.PathLike):
        path = Path(file)
        name = filename or path.name
        data: bytes | IO[bytes] = path.read_bytes()
    else:
        name = filename or os.path.basename(str(getattr(file, "name", "") or "")) or "upload"
        data = file
    return name, data, mimetypes.guess_type(name)[0]


def _upload_form(title: str | None, agent_id: str | None, thread_id: str | None) -> dict[str, str]:
    fields = {"title": title, "agentId": agent_id, "threadId": thread_id}
    return {k: v for k, v in fields.items() if v is not None}


def _headers(is_json: bool, idempotency_key: str | None) -> dict[str, str]:
    headers = {"Content-Type": "application/json"} if is_json else {}
    if idempotency_key is not None:
        headers["Idempotency-Key"] = idempotency_key
    return headers


class _Config:
    """What both clients share: where, who, how long, how hard to re-attach."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        *,
        timeout: float | httpx.Timeout | None,
        headers: Mapping[str, str] | None,
        stream_retries: int,
        stream_backoff: float,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.stream_retries = stream_retries
        self.stream_backoff = stream_backoff
        self._headers = {"User-Agent": f"agentsvc-client/{__version__}", **(headers or {})}
        if api_key is not None:  # an API key or a JWT: both are bearer tokens
            self._headers["Authorization"] = f"Bearer {api_key}"
        self._timeout = DEFAULT_TIMEOUT if timeout is None else timeout

    def __repr__(self) -> str:  # never the key
        return f"{type(self).__name__}(base_url={self.base_url!r})"


class Client(_Config, Resources):
    """The synchronous client.

    ::

        with Client("http://127.0.0.1:8000", api_key="ask_...") as client:
            agent = client.agents.create(name="Support")
            thread = client.threads.create(agent_id=agent.id)
            for event in client.send_message(thread.id, "Hello!"):
                ...

    ``api_key`` is any bearer token (an API key or a JWT). ``transport`` replaces
    httpx's (``httpx.MockTransport`` in tests). ``stream_retries``: re-attach attempts
    in a row, without a new event, before a reply stream gives up (``stream_backoff``
    seconds before the first, doubling, at most 10 s).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        transport: httpx.BaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        stream_retries: int = 5,
        stream_backoff: float = 0.5,
    ) -> None:
        _Config.__init__(
            self,
            base_url,
            api_key,
            timeout=timeout,
            headers=headers,
            stream_retries=stream_retries,
            stream_backoff=stream_backoff,
        )
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=self._headers,
            timeout=self._timeout,
            transport=transport,
        )
        self._init_resources()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    # --- what the resources call ---------------------------------------------------

    def _request(
        self,
        method: str,
        path: str,
        *,
        type: type[T],
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        files: Any = None,
        data: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> T:
        content = None if json is None else _ENCODER.encode(json)
        headers = _headers(content is not None, idempotency_key)
        try:
            response = self._http.request(
                method,
                path,
                content=content,
                headers=headers,
                params=_params(params),
                files=files,
                data=data,
            )
        except httpx.TransportError as exc:
            raise errors.APIConnectionError(f"{method} {path}: {exc!r}") from exc
        if response.status_code >= 400:
            raise errors.from_response(response)
        return _decode(response, type)

    @contextmanager
    def _stream(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str],
        params: Mapping[str, Any],
        body: bytes | None,
    ) -> Iterator[httpx.Response]:
        """An open streamed answer; an error status (but the retryable) raises."""
        with self._http.stream(
            method, path, headers=headers, params=_params(params), content=body
        ) as response:
            if response.status_code >= 400 and response.status_code not in RETRY_STATUSES:
                response.read()
                raise errors.from_response(response)
            yield response

    def _exec_command(
        self, agent_id: str, instance_id: str, command: str, *, idempotency_key: str | None
    ) -> list[ExecEvent]:
        path = f"/api/agents/{_seg(agent_id)}/computer-instances/{_seg(instance_id)}/exec"
        body = _ENCODER.encode({"command": command})
        headers = _headers(True, idempotency_key)
        try:
            with self._http.stream("POST", path, headers=headers, content=body) as response:
                if response.status_code >= 400:
                    response.read()
                    raise errors.from_response(response)
                return exec_events(response.iter_lines())
        except httpx.TransportError as exc:
            raise errors.APIConnectionError(f"POST {path}: {exc!r}") from exc

    def _send_message(
        self,
        thread_id: str,
        body: SendMessageBody | RegenerateBody,
        *,
        idempotency_key: str | None,
        path: str | None = None,
    ) -> ReplyStream:
        """A send, or (``path``) an edit or a regenerate: the same stream."""
        return ReplyStream(
            self,
            thread_id,
            _ENCODER.encode(body),
            idempotency_key=idempotency_key or str(uuid.uuid4()),
            path=path,
        )

    def _thread_events(self, thread_id: str, *, after: int | None) -> ThreadEventStream:
        return ThreadEventStream(self, thread_id, after)

    def _attach(self, thread_id: str, *, run_id: str | None, after: int | None) -> ReplyStream:
        _check_attach(run_id, after)
        return ReplyStream(
            self, thread_id, None, idempotency_key="", run_id=run_id, after=after or 0
        )

    def _upload(
        self,
        file: FileInput,
        *,
        filename: str | None,
        title: str | None,
        agent_id: str | None,
        thread_id: str | None,
        idempotency_key: str | None = None,
    ) -> Document:
        return self._request(
            "POST",
            "/api/knowledge/upload",
            type=Document,
            files={"file": _file_parts(file, filename)},
            data=_upload_form(title, agent_id, thread_id),
            idempotency_key=idempotency_key,
        )

    def _upload_avatar(
        self,
        agent_id: str,
        file: FileInput,
        *,
        filename: str | None = None,
        idempotency_key: str | None = None,
    ) -> Profile:
        return self._request(
            "POST",
            f"/api/agents/{_seg(agent_id)}/marketplace/avatar",
            type=Profile,
            files={"file": _file_parts(file, filename)},
            idempotency_key=idempotency_key,
        )


def _check_attach(run_id: str | None, after: int | None) -> None:
    """Events after an id belong to one reply: without its run id the stream would
    follow whichever reply runs now (another one, once that reply ended), and
    past its first events no ``meta`` would say which."""
    if after and not run_id:
        raise ValueError("attach with last_event_id (or after) needs the reply's run_id")


class AsyncClient(_Config, AsyncResources):
    """The asynchronous client: the same resources, ``await``-ed; a reply is an async
    iterator (``async for event in client.send_message(...)``). See ``Client``."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float | httpx.Timeout | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        headers: Mapping[str, str] | None = None,
        stream_retries: int = 5,
        stream_backoff: float = 0.5,
    ) -> None:
        _Config.__init__(
            self,
            base_url,
            api_key,
            timeout=timeout,
            headers=headers,
            stream_retries=stream_retries,
            stream_backoff=stream_backoff,
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=self._headers,
            timeout=self._timeout,
            transport=transport,
        )
        self._init_resources()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool."""
        await self._http.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        type: type[T],
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        files: Any = None,
        data: Mapping[str, str] | None = None,
        idempotency_key: str | None = None,
    ) -> T:
        content = None if json is None else _ENCODER.encode(json)
        headers = _headers(content is not None, idempotency_key)
        try:
            response = await self._http.request(
                method,
                path,
                content=content,
                headers=headers,
                params=_params(params),
                files=files,
                data=data,
            )
        except httpx.TransportError as exc:
            raise errors.APIConnectionError(f"{method} {path}: {exc!r}") from exc
        if response.status_code >= 400:
            raise errors.from_response(response)
        return _decode(response, type)

    @asynccontextmanager
    async def _stream(
        self,
        method: str,
        path: str,
        *,
        headers: Mapping[str, str],
        params: Mapping[str, Any],
        body: bytes | None,
    ) -> AsyncIterator[httpx.Response]:
        async with self._http.stream(
            method, path, headers=headers, params=_params(params), content=body
        ) as response:
            if response.status_code >= 400 and response.status_code not in RETRY_STATUSES:
                await response.aread()
                raise errors.from_response(response)
            yield response

    async def _exec_command(
        self, agent_id: str, instance_id: str, command: str, *, idempotency_key: str | None
    ) -> list[ExecEvent]:
        path = f"/api/agents/{_seg(agent_id)}/computer-instances/{_seg(instance_id)}/exec"
        body = _ENCODER.encode({"command": command})
        headers = _headers(True, idempotency_key)
        try:
            async with self._http.stream("POST", path, headers=headers, content=body) as response:
                if response.status_code >= 400:
                    await response.aread()
                    raise errors.from_response(response)
                return exec_events([line async for line in response.aiter_lines()])
        except httpx.TransportError as exc:
            raise errors.APIConnectionError(f"POST {path}: {exc!r}") from exc

    def _send_message(
        self,
        thread_id: str,
        body: SendMessageBody | RegenerateBody,
        *,
        idempotency_key: str | None,
        path: str | None = None,
    ) -> AsyncReplyStream:
        """A send, or (``path``) an edit or a regenerate: the same stream."""
        return AsyncReplyStream(
            self,
            thread_id,
            _ENCODER.encode(body),
            idempotency_key=idempotency_key or str(uuid.uuid4()),
            path=path,
        )

    def _thread_events(self, thread_id: str, *, after: int | None) -> AsyncThreadEventStream:
        return AsyncThreadEventStream(self, thread_id, after)

    def _attach(self, thread_id: str, *, run_id: str | None, after: int | None) -> AsyncReplyStream:
        _check_attach(run_id, after)
        return AsyncReplyStream(
            self, thread_id, None, idempotency_key="", run_id=run_id, after=after or 0
        )

    async def _upload(
        self,
        file: FileInput,
        *,
        filename: str | None,
        title: str | None,
        agent_id: str | None,
        thread_id: str | None,
        idempotency_key: str | None = None,
    ) -> Document:
        return await self._request(
            "POST",
            "/api/knowledge/upload",
            type=Document,
            files={"file": _file_parts(file, filename)},
            data=_upload_form(title, agent_id, thread_id),
            idempotency_key=idempotency_key,
        )

    async def _upload_avatar(
        self,
        agent_id: str,
        file: FileInput,
        *,
        filename: str | None = None,
        idempotency_key: str | None = None,
    ) -> Profile:
        return await self._request(
            "POST",
            f"/api/agents/{_seg(agent_id)}/marketplace/avatar",
            type=Profile,
            files={"file": _file_parts(file, filename)},
            idempotency_key=idempotency_key,
        )
