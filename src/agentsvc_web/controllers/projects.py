"""Projects (``/api/projects``): a named grouping of agents and runners
(use_cases/projects.py). Members join a project through their own ``projectId``
(``/api/agents``, ``/api/runners``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

import msgspec
from litestar import Controller, Request, delete, get, patch, post
from litestar.di import NamedDependency
from litestar.params import FromPath, JSONBody
from msgspec import UNSET, UnsetType

from agentsvc_core.entities.project import Project
from agentsvc_core.partial import given_fields
from agentsvc_core.use_cases.projects import ProjectChanges, ProjectDraft, Projects
from agentsvc_web.auth import principal_of
from agentsvc_web.controllers.runners.schemas import RunnerOut
from agentsvc_web.openapi import CREATE, READ, WRITE, errors
from agentsvc_web.schemas import AgentOut, Description, Name, copied

Req = Request[Any, Any, Any]


class ProjectBody(msgspec.Struct, rename="camel"):
    name: Name
    description: Description = ""


class ProjectPatchBody(msgspec.Struct, rename="camel"):
    name: Name | UnsetType = UNSET
    description: Description | UnsetType = UNSET


class ProjectOut(msgspec.Struct):
    id: UUID
    org_id: str
    name: str
    description: str
    created_at: datetime
    updated_at: datetime

    @classmethod
    def of(cls, p: Project) -> ProjectOut:
        return copied(cls, p)


class MembersOut(msgspec.Struct):
    agents: list[AgentOut]
    runners: list[RunnerOut]


class DetachedOut(msgspec.Struct):
    agents: int
    runners: int


class ProjectDeleted(msgspec.Struct):
    ok: bool
    detached: DetachedOut


class ProjectController(Controller):
    path = "/api/projects"
    tags = ["projects"]

    @get(
        "/",
        operation_id="listProjects",
        responses=errors(),
        summary="The organization's projects, oldest first",
    )
    async def list_projects(
        self, request: Req, projects: NamedDependency[Projects]
    ) -> list[ProjectOut]:
        return [ProjectOut.of(p) for p in await projects.list(principal_of(request))]

    @post("/", operation_id="createProject", responses=CREATE, summary="Create a project")
    async def create_project(
        self, request: Req, projects: NamedDependency[Projects], data: JSONBody[ProjectBody]
    ) -> ProjectOut:
        draft = msgspec.convert(msgspec.structs.asdict(data), ProjectDraft)
        return ProjectOut.of(await projects.create(principal_of(request), draft))

    @get("/{project_id:uuid}", operation_id="getProject", responses=READ, summary="A project")
    async def get_project(
        self, request: Req, projects: NamedDependency[Projects], project_id: FromPath[UUID]
    ) -> ProjectOut:
        return ProjectOut.of(await projects.get(principal_of(request), project_id))

    @patch(
        "/{project_id:uuid}",
        operation_id="updateProject",
        responses=WRITE,
        summary="Change the supplied fields of a project",
    )
    async def update_project(
        self,
        request: Req,
        projects: NamedDependency[Projects],
        project_id: FromPath[UUID],
        data: JSONBody[ProjectPatchBody],
    ) -> ProjectOut:
        changes = ProjectChanges(**given_fields(data))
        return ProjectOut.of(await projects.update(principal_of(request), project_id, changes))

    @delete(
        "/{project_id:uuid}",
        operation_id="deleteProject",
        status_code=200,
        responses=READ,
        summary="Delete a project: its agents and runners are detached, not deleted",
    )
    async def delete_project(
        self, request: Req, projects: NamedDependency[Projects], project_id: FromPath[UUID]
    ) -> ProjectDeleted:
        detached = await projects.delete(principal_of(request), project_id)
        return ProjectDeleted(
            ok=True, detached=DetachedOut(agents=detached.agents, runners=detached.runners)
        )

    @get(
        "/{project_id:uuid}/members",
        operation_id="listProjectMembers",
        responses=READ,
        summary="The project's agents (oldest first) and runners (newest first)",
    )
    async def members(
        self, request: Req, projects: NamedDependency[Projects], project_id: FromPath[UUID]
    ) -> MembersOut:
        found = await projects.members(principal_of(request), project_id)
        return MembersOut(
            agents=[AgentOut.of(a) for a in found.agents],
            runners=[RunnerOut.of(r) for r in found.runners],
        )
