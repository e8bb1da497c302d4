"""A run's events followed live (docs/runners.md#following-a-run): the app on a real
server (real HTTP, real streaming), its job worker running a two-step runner
whose agent steps talk to the fake provider on loopback; the run is followed over
Server-Sent Events to its end, re-attached with ``Last-Event-ID`` mid-run, and
read as JSON pages."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentsvc_web.app import create_app
from agentsvc_web.settings import Settings
from tests.fakes.providers import FakeProvider, Reply
from tests.sse import Event, parse_lines
from tests.web.live import serve

KEY = "sk-test-0123456789abcdef"


class World:
    def __init__(self, base: str, key: str, fake: FakeProvider) -> None:
        self.fake = fake
        self.http = httpx.Client(
            base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=30
        )
        self.headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}

    def ok(self, r: httpx.Response, status: int = 200) -> Any:
        assert r.status_code == status, r.text
        return r.json()

    def runner(self) -> Any:
        agent = self.ok(
            self.http.post("/api/agents", json={"name": "W", "defaultModel": "claude-proxy-1"}),
            201,
        )
        steps = [
            {"id": "draft", "kind": "agent", "agentId": agent["id"], "prompt": "{{ input.topic }}"},
            {
                "id": "polish",
                "kind": "agent",
                "agentId": agent["id"],
                "prompt": "Polish: {{ steps.draft.output.text }}",
            },
        ]
        return self.ok(self.http.post("/api/runners", json={"name": "two", "steps": steps}), 201)

    def start(self, runner: dict[str, Any]) -> str:
        body = {"input": {"topic": "otters"}}
        run = self.ok(self.http.post(f"/api/runners/{runner['id']}/runs", json=body), 201)
        return str(run["id"])

    def follow(
        self, path: str, last_event_id: str | None = None, until: str | None = None
    ) -> list[Event]:
        """The stream's events, to its end (or to the first event of type ``until``,
        when the client hangs up)."""
        headers = dict(self.headers)
        if last_event_id is not None:
            headers["Last-Event-ID"] = last_event_id
        events: list[Event] = []
        with httpx.stream("GET", self.http.base_url.join(path), headers=headers, timeout=30) as r:
            assert r.status_code == 200, r.read()
            assert r.headers["content-type"].startswith("text/event-stream")
            for item in parse_lines(r.iter_lines()):
                if isinstance(item, Event):
                    events.append(item)
                    if item.event == until:
                        break
        return events


@pytest.fixture
def world() -> Iterator[World]:
    key = f"ask_web_{uuid.uuid4().hex}"
    with FakeProvider("alpha", api_key=KEY) as fake:
        settings = Settings.from_env(
            {
                "AGENTSVC_STORAGE": "memory",
                "AGENTSVC_BOOTSTRAP_API_KEY": key,
                "AGENTSVC_ALPHA_BASE_URL": fake.base_url,
                "AGENTSVC_ALPHA_API_KEY": KEY,
            }
        )
        with serve(create_app(settings)) as base:
            w = World(base, key, fake)
            try:
                yield w
            finally:
                w.http.close()


def test_a_run_is_followed_over_sse_to_its_end(world: World) -> None:
    runner = world.runner()
    # the first step's answer comes a moment later: the follower is there before it
    world.fake.enqueue(
        Reply(text="Otters hold hands.", first_token_delay=0.5), Reply(text="Otters hold paws.")
    )
    run_id = world.start(runner)
    path = f"/api/runners/{runner['id']}/runs/{run_id}/events"
    events = world.follow(path)  # the stream ends by itself after the run's last event

    assert [(e.id, e.event) for e in events] == [
        (1, "run.started"),
        (2, "step.started"),
        (3, "step.finished"),
        (4, "step.started"),
        (5, "step.finished"),
        (6, "run.finished"),
    ]
    assert all(e.data["seq"] == e.id and e.data["type"] == e.event for e in events)
    draft, polish = events[2].data["data"], events[4].data["data"]
    assert (draft["step_id"], draft["index"], draft["attempt"]) == ("draft", 0, 1)
    assert draft["output"]["text"] == "Otters hold hands."
    assert draft["tokens"] > 0
    assert (polish["step_id"], polish["output"]["text"]) == ("polish", "Otters hold paws.")
    assert events[3].data["data"]["thread_id"] == polish["thread_id"]
    finished = events[5].data["data"]
    assert finished["status"] == "succeeded"
    assert finished["output"]["text"] == "Otters hold paws."
    # the second step was asked with the first one's output
    assert "Polish: Otters hold hands." in str(world.fake.requests[1].json)

    # the same as a JSON page, and by pages
    page = world.ok(world.http.get(path))
    assert [(e["seq"], e["type"]) for e in page["events"]] == [(e.id, e.event) for e in events]
    assert page["next_after"] is None
    two = world.ok(world.http.get(path, params={"after": 2, "limit": 2}))
    assert [e["seq"] for e in two["events"]] == [3, 4]
    assert two["next_after"] == 4
    # an ended run's stream, re-attached after its last event: ends at once, empty
    assert world.follow(path, last_event_id="6") == []


def test_a_follower_re_attaches_with_last_event_id_and_misses_nothing(world: World) -> None:
    runner = world.runner()
    # the second step answers slowly: the follower hangs up while the run goes on
    world.fake.enqueue(
        Reply(text="First.", first_token_delay=0.3), Reply(text="Second.", first_token_delay=1.5)
    )
    run_id = world.start(runner)
    path = f"/api/runners/{runner['id']}/runs/{run_id}/events"
    first = world.follow(path, until="step.finished")
    assert [e.id for e in first] == [1, 2, 3]
    assert world.ok(world.http.get(f"/api/runners/{runner['id']}/runs/{run_id}"))["status"] == (
        "running"
    )
    rest = world.follow(path, last_event_id=str(first[-1].id))
    assert [e.id for e in rest] == [4, 5, 6]
    assert [e.event for e in rest] == ["step.started", "step.finished", "run.finished"]
    # ``after`` starts a stream the same way when there is no Last-Event-ID
    assert [e.id for e in world.follow(f"{path}?after=4")] == [5, 6]


def test_a_cancelled_runs_last_event_is_its_cancel(world: World) -> None:
    runner = world.runner()
    world.fake.enqueue(Reply(text="Slow.", first_token_delay=5))
    run_id = world.start(runner)
    base = f"/api/runners/{runner['id']}/runs/{run_id}"
    first = world.follow(f"{base}/events", until="step.started")
    world.ok(world.http.post(f"{base}/cancel"))
    rest = world.follow(f"{base}/events", last_event_id=str(first[-1].id))
    assert [e.event for e in first + rest] == ["run.started", "step.started", "run.cancelled"]
    assert rest[-1].data["data"]["status"] == "cancelled"


def test_the_events_of_a_run_not_of_this_runner_are_not_found(world: World) -> None:
    runner, other = world.runner(), world.runner()
    world.fake.enqueue(Reply(text="a"), Reply(text="b"))
    run_id = world.start(runner)
    for path in (
        f"/api/runners/{other['id']}/runs/{run_id}/events",
        f"/api/runners/{runner['id']}/runs/{uuid.uuid4()}/events",
    ):
        assert world.http.get(path).status_code == 404
        r = world.http.get(path, headers={"Accept": "text/event-stream"})
        assert r.status_code == 404
        assert r.json()["error"] == "NOT_FOUND"
    bad = world.http.get(
        f"/api/runners/{runner['id']}/runs/{run_id}/events",
        headers={"Accept": "text/event-stream", "Last-Event-ID": "x"},
    )
    assert bad.status_code in (400, 422)
