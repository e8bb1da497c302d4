"""What the generated resources need from a client (typed, so mypy checks them)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote

if TYPE_CHECKING:
    from agentsvc_client._stream import AsyncReplyStream, ReplyStream
    from agentsvc_client.computer import ExecEvent
    from agentsvc_client.models import Document, Profile, RegenerateBody, SendMessageBody
    from agentsvc_client.thread_events import AsyncThreadEventStream, ThreadEventStream

T = TypeVar("T")


class _Requester(Protocol):
    def _request(
        self,
        method: str,
        path: str,
        *,
        type: type[T],
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> T: ...

    def _send_message(
        self,
        thread_id: str,
        body: SendMessageBody | RegenerateBody,
        *,
        idempotency_key: str | None,
        path: str | None = None,
    ) -> ReplyStream: ...

    def _attach(self, thread_id: str, *, run_id: str | None, after: int | None) -> ReplyStream: ...

    def _exec_command(
        self, agent_id: str, instance_id: str, command: str, *, idempotency_key: str | None
    ) -> list[ExecEvent]: ...

    def _thread_events(self, thread_id: str, *, after: int | None) -> ThreadEventStream: ...

    def _upload(
        self,
        file: Any,
        *,
        filename: str | None,
        title: str | None,
        agent_id: str | None,
        thread_id: str | None,
        idempotency_key: str | None,
    ) -> Document: ...

    def _upload_avatar(
        self, agent_id: str, file: Any, *, filename: str | None, idempotency_key: str | None
    ) -> Profile: ...


class _AsyncRequester(Protocol):
    async def _request(
        self,
        method: str,
        path: str,
        *,
        type: type[T],
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotency_key: str | None = None,
    ) -> T: ...

    def _send_message(
        self,
        thread_id: str,
        body: SendMessageBody | RegenerateBody,
        *,
        idempotency_key: str | None,
        path: str | None = None,
    ) -> AsyncReplyStream: ...

    def _attach(
        self, thread_id: str, *, run_id: str | None, after: int | None
    ) -> AsyncReplyStream: ...

    def _thread_events(self, thread_id: str, *, after: int | None) -> AsyncThreadEventStream: ...

    async def _exec_command(
        self, agent_id: str, instance_id: str, command: str, *, idempotency_key: str | None
    ) -> list[ExecEvent]: ...

    async def _upload(
        self,
        file: Any,
        *,
        filename: str | None,
        title: str | None,
        agent_id: str | None,
        thread_id: str | None,
        idempotency_key: str | None,
    ) -> Document: ...

    async def _upload_avatar(
        self, agent_id: str, file: Any, *, filename: str | None, idempotency_key: str | None
    ) -> Profile: ...


def _seg(value: object) -> str:
    """A path parameter as one path segment (percent-encoded: no "/", "..", "#" or "?"
    of an id can reach another route)."""
    return quote(str(value), safe="")


class Resource:
    """A group of operations (``client.agents``, ``client.agents.memory``...)."""

    def __init__(self, client: _Requester) -> None:
        self._client = client


class AsyncResource:
    """A group of operations of the async client."""

    def __init__(self, client: _AsyncRequester) -> None:
        self._client = client
