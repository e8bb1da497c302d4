"""A project: a named grouping of an organization's agents and runners. It owns
nothing: an agent or a runner names its project (``project_id``), and deleting the
project detaches them."""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

import msgspec


class Project(msgspec.Struct, frozen=True, kw_only=True):
    id: UUID
    org_id: str
    name: str
    description: str
    created_at: datetime
    updated_at: datetime


class Detached(msgspec.Struct, frozen=True, kw_only=True):
    """How many members a deleted project let go of."""

    agents: int
    runners: int
