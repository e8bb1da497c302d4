"""The client's hand-written marketplace calls against the real service: an
avatar uploaded from a path, bytes or a file object (multipart), the public
picture read back as bytes, a handle taken twice as the client's typed error, and
a project and a template made into an agent of it."""

from __future__ import annotations

import io
import uuid
from pathlib import Path

import pytest
from PIL import Image

from agentsvc_client import AsyncClient, Client, errors
from agentsvc_client.models import OverridesBody
from tests.client.conftest import KEY
from tests.e2e.service import Service


def png(size: tuple[int, int] = (12, 10)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, (9, 99, 199)).save(out, format="PNG")
    return out.getvalue()


def test_an_avatar_goes_up_and_comes_back_as_bytes(memory_service: Service, tmp_path: Path) -> None:
    with Client(memory_service.url, KEY) as c:
        agent = c.agents.create(name="Portrait")
        from_bytes = c.agents.marketplace.upload_avatar(agent.id, png(), filename="a.png")
        assert from_bytes.avatar_url is not None
        sha = from_bytes.avatar_url.rsplit("/", 1)[1]
        data = c.public.avatar(agent.id, sha)
        assert isinstance(data, bytes)
        with Image.open(io.BytesIO(data)) as img:
            assert (img.format, img.size) == ("PNG", (12, 10))
        path = tmp_path / "me.png"
        path.write_bytes(png((20, 20)))
        from_path = c.agents.marketplace.upload_avatar(agent.id, path)
        assert from_path.avatar_url not in (None, from_bytes.avatar_url)
        with pytest.raises(errors.ValidationError) as refused:
            c.agents.marketplace.upload_avatar(agent.id, b"not a picture", filename="x.png")
        assert "file" in str(refused.value)
        handle = f"portrait-{uuid.uuid4().hex[:8]}"
        c.agents.marketplace.put(agent.id, handle=handle)
        other = c.agents.create(name="Copy")
        with pytest.raises(errors.Conflict) as taken:
            c.agents.marketplace.put(other.id, handle=handle)
        assert taken.value.error == "HANDLE_TAKEN"


async def test_the_async_client_uploads_an_avatar_too(memory_service: Service) -> None:
    async with AsyncClient(memory_service.url, KEY) as c:
        agent = await c.agents.create(name="Async portrait")
        profile = await c.agents.marketplace.upload_avatar(agent.id, io.BytesIO(png()))
        assert profile.avatar_url is not None
        data = await c.public.avatar(agent.id, profile.avatar_url.rsplit("/", 1)[1])
        assert data.startswith(b"\x89PNG")


def test_a_template_becomes_an_agent_in_a_project(memory_service: Service) -> None:
    with Client(memory_service.url, KEY) as c:
        project = c.projects.create(name=f"ops-{uuid.uuid4().hex[:6]}")
        listed = c.templates.list(category="productivity")
        assert {t.id for t in listed} >= {"project-planner", "meeting-notes"}
        agent = c.templates.use(
            template_id="project-planner", overrides=OverridesBody(project_id=project.id)
        )
        assert agent.template is not None
        assert (agent.template.id, agent.project_id) == ("project-planner", project.id)
        members = c.projects.members(project.id)
        assert [a.id for a in members.agents] == [agent.id]
        assert c.projects.delete(project.id).detached.agents == 1
