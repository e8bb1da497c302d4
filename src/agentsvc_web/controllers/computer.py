"""An agent's computer (docs/computer.md): ``GET/PUT /api/agents/{id}/computer``
(its configuration), ``/api/agents/{id}/computer-instances`` (its instances, an
operator's commands streamed as Server-Sent Events, stop and destroy) and ``GET
/api/threads/{id}/computer`` (the thread's instance). Members read; an admin
configures, runs commands, stops and destroys."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get, post, put
from litestar.di import NamedDependency
from litestar.openapi.spec import OpenAPIType, Schema
from litestar.params import FromPath, JSONBody
from litestar.response import Stream
from msgspec import UNSET, Meta, UnsetType

from agentsvc_core.entities.computer import ComputerInstance
from agentsvc_core.partial import given_fields
from agentsvc_core.use_cases.computer import ComputerConfig, Computers
from agentsvc_core.use_cases.computer.events import EXEC_EVENTS, exec_events
from agentsvc_core.use_cases.computer.settings import BOUNDS, MAX_HOST, MAX_HOSTS, TOOL_NAMES
from agentsvc_core.use_cases.computer.tools import MAX_COMMAND
from agentsvc_web.auth import principal_of
from agentsvc_web.openapi import errors
from agentsvc_web.schemas import OkBody, copied, items_schema
from agentsvc_web.sse import SSE_HEADERS

Req = Request[Any, Any, Any]

EXEC_MAX_OUTPUT = 1_000_000  # bytes of each stream an operator's command may print
_B = {field: (least, most) for field, least, most in BOUNDS}
ComputerToolName = Literal[TOOL_NAMES]  # type: ignore[valid-type]
_enc = msgspec.json.Encoder()

Hosts = Annotated[
    list[Annotated[str, Meta(min_length=1, max_length=MAX_HOST)]],
    Meta(max_length=MAX_HOSTS),
    items_schema(Schema(type=OpenAPIType.STRING, min_length=1, max_length=MAX_HOST)),
]


def _bounded(field: str) -> Any:
    least, most = _B[field]
    return Annotated[int, Meta(ge=least, le=most)] | UnsetType


class ComputerPutBody(msgspec.Struct, rename="camel"):
    enabled: bool | UnsetType = UNSET
    provider: Literal["local", "e2b"] | UnsetType | None = UNSET
    persistent: bool | UnsetType = UNSET
    scope: Literal["thread", "agent"] | UnsetType = UNSET
    idle_timeout_s: _bounded("idle_timeout_s") = UNSET  # type: ignore[valid-type]
    exec_timeout_s: _bounded("exec_timeout_s") = UNSET  # type: ignore[valid-type]
    memory_mb: _bounded("memory_mb") = UNSET  # type: ignore[valid-type]
    network: Literal["none", "allowlist"] | UnsetType = UNSET
    allowed_hosts: Hosts | UnsetType = UNSET
    # the computer tools whose calls wait for a person's approval (docs/tools.md)
    require_approval: Annotated[list[ComputerToolName], Meta(max_length=4)] | UnsetType = UNSET


class ComputerOut(msgspec.Struct):
    agent_id: UUID
    org_id: str
    enabled: bool
    provider: str | None
    persistent: bool
    scope: str
    idle_timeout_s: int
    exec_timeout_s: int
    memory_mb: int
    network: str
    allowed_hosts: list[str]
    require_approval: list[str]
    # where the agent's sandboxes run: ``provider``, else from its runtimeProvider
    effective_provider: str
    # the providers this service has; a computer whose effective provider is not
    # among them answers 503 saying what to install or set
    available_providers: list[str]

    @classmethod
    def of(cls, c: ComputerConfig, effective: str, available: list[str]) -> ComputerOut:
        return copied(
            cls,
            c,
            allowed_hosts=list(c.allowed_hosts),
            require_approval=list(c.require_approval),
            effective_provider=effective,
            available_providers=available,
        )


class InstanceOut(msgspec.Struct):
    id: UUID
    agent_id: UUID
    thread_id: UUID | None
    provider: str
    status: str
    persistent: bool
    created_at: datetime
    last_used_at: datetime
    disk_bytes: int
    # its files were lost at the provider and the workspace made again, empty
    state_lost: bool
    error: str | None

    @classmethod
    def of(cls, i: ComputerInstance) -> InstanceOut:
        return copied(cls, i)


class ExecBody(msgspec.Struct, rename="camel"):
    command: Annotated[str, Meta(min_length=1, max_length=MAX_COMMAND)]


class AgentComputerController(Controller):
    path = "/api/agents/{agent_id:uuid}"
    tags = ["computer"]

    @get(
        "/computer",
        operation_id="getAgentComputer",
        responses=errors(404),
        summary="The agent's computer configuration",
    )
    async def get_config(
        self, request: Req, computers: NamedDependency[Computers], agent_id: FromPath[UUID]
    ) -> ComputerOut:
        config, effective = await computers.configuration(principal_of(request), agent_id)
        return ComputerOut.of(config, effective, computers.available)

    @put(
        "/computer",
        operation_id="putAgentComputer",
        responses=errors(400, 404, 413, 415, 422),
        summary="Change the supplied computer settings",
    )
    async def put_config(
        self,
        request: Req,
        computers: NamedDependency[Computers],
        agent_id: FromPath[UUID],
        data: JSONBody[ComputerPutBody],
    ) -> ComputerOut:
        changes = given_fields(data)
        config, effective = await computers.configure(principal_of(request), agent_id, changes)
        return ComputerOut.of(config, effective, computers.available)

    @get(
        "/computer-instances",
        operation_id="listComputerInstances",
        responses=errors(404),
        summary="The agent's computer instances, newest first (destroyed ones included)",
    )
    async def list_instances(
        self, request: Req, computers: NamedDependency[Computers], agent_id: FromPath[UUID]
    ) -> list[InstanceOut]:
        found = await computers.instances(principal_of(request), agent_id)
        return [InstanceOut.of(i) for i in found]

    @post(
        "/computer-instances/{instance_id:uuid}/exec",
        operation_id="execComputerCommand",
        status_code=200,
        media_type="text/event-stream",
        response_description=(
            "exec_started, then stdout and stderr as the command prints, then exit, "
            "as Server-Sent Events"
        ),
        responses=errors(400, 404, 413, 415, 422, 429),
        summary="Run a shell command on a computer instance (resumed when stopped)",
    )
    async def exec_command(
        self,
        request: Req,
        computers: NamedDependency[Computers],
        agent_id: FromPath[UUID],
        instance_id: FromPath[UUID],
        data: JSONBody[ExecBody],
    ) -> Stream:
        execution = await computers.operator_exec(
            principal_of(request), agent_id, instance_id, data.command, max_output=EXEC_MAX_OUTPUT
        )

        async def frames() -> AsyncIterator[bytes]:
            try:
                number = 0
                async for event in exec_events(execution, data.command):
                    number += 1
                    name = EXEC_EVENTS[type(event)]
                    yield b"id: %d\nevent: %s\ndata: %s\n\n" % (
                        number,
                        name.encode(),
                        _enc.encode(event),
                    )
            finally:
                execution.close()

        return Stream(frames(), media_type="text/event-stream", headers=SSE_HEADERS)

    @post(
        "/computer-instances/{instance_id:uuid}/stop",
        operation_id="stopComputerInstance",
        status_code=200,
        responses=errors(404),
        summary="Stop a computer instance (a persistent one keeps its files)",
    )
    async def stop_instance(
        self,
        request: Req,
        computers: NamedDependency[Computers],
        agent_id: FromPath[UUID],
        instance_id: FromPath[UUID],
    ) -> InstanceOut:
        return InstanceOut.of(await computers.stop(principal_of(request), agent_id, instance_id))

    @delete(
        "/computer-instances/{instance_id:uuid}",
        operation_id="deleteComputerInstance",
        status_code=200,
        responses=errors(404),
        summary="Destroy a computer instance and its files",
    )
    async def delete_instance(
        self,
        request: Req,
        computers: NamedDependency[Computers],
        agent_id: FromPath[UUID],
        instance_id: FromPath[UUID],
    ) -> OkBody:
        await computers.destroy(principal_of(request), agent_id, instance_id)
        return OkBody(ok=True)


class ThreadComputerController(Controller):
    path = "/api/threads/{thread_id:uuid}/computer"
    tags = ["computer"]

    @get(
        "/",
        operation_id="getThreadComputer",
        responses=errors(404),
        summary="The thread's active computer instance (404 when it has none)",
    )
    async def thread_instance(
        self, request: Req, computers: NamedDependency[Computers], thread_id: FromPath[UUID]
    ) -> InstanceOut:
        return InstanceOut.of(await computers.of_thread(principal_of(request), thread_id))
