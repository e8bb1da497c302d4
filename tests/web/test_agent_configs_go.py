"""An agent's configurations go when the agent goes (docs/api.md, "Agents" and "Memories"):
every sealed record keyed by its id, of every kind the turn reads."""

from __future__ import annotations

import uuid

from litestar.testing import TestClient

from agentsvc_web.app import create_app
from agentsvc_web.bootstrap import build_services
from agentsvc_web.settings import Settings

KINDS = {"resolver", "compaction", "delegated", "web", "plan", "memory", "multiplayer"}


def test_deleting_an_agent_deletes_its_configurations() -> None:
    key = f"ask_web_{uuid.uuid4().hex}"
    org = f"cfg-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        storage="memory", bootstrap_api_key=key, bootstrap_org=org, allow_private_network=True
    )
    services = build_services(settings)
    with TestClient(create_app(settings, services)) as c:
        c.headers["Authorization"] = f"Bearer {key}"
        tool = c.post("/api/tools", json={"name": "t1", "url": "http://127.0.0.1:9/t"}).json()
        kept, gone = (
            c.post("/api/agents", json={"name": n}).json()["id"] for n in ("kept", "gone")
        )
        for agent in (kept, gone):
            for method, path, body in [
                ("PUT", "credentials", {"enabled": False}),
                ("PUT", "compaction", {"enabled": True}),
                ("PUT", "delegated", {"toolIds": [tool["id"]]}),
                ("PUT", "web", {"fetchEnabled": True}),
                ("PUT", "plan", {"enabled": True}),
                ("PUT", "memory", {"enabled": True}),
                ("PUT", "multiplayer", {"respondTo": "mentions"}),
            ]:
                r = c.request(method, f"/api/agents/{agent}/{path}", json=body)
                assert r.status_code == 200, (path, r.text)

        def kinds_of(agent: str) -> set[str]:
            with c.portal() as portal:
                records = portal.call(services.storage.secrets.every, org)
            return {kind for _, kind, k, _ in records if k == agent}

        assert kinds_of(gone) == KINDS
        assert c.delete(f"/api/agents/{gone}").json() == {"ok": True}
        assert kinds_of(gone) == set()
        assert kinds_of(kept) == KINDS
