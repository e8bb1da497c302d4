"""Summary-based compaction (beta family) end to end, against the fake provider."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from agentsvc_core.use_cases.turn.compaction import SUMMARY_PROMPT
from tests.e2e.service import Service, client, new_org, running
from tests.fakes.providers import FakeProvider, Reply
from tests.sse import names, parse

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]


JWT_SECRET = "compaction-e2e-jwt-secret-0123456789abcdefghijklm"


@pytest.fixture(scope="module")
def served(
    pg_url: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Service, dict[str, FakeProvider]]]:
    """One service for the module with both fakes ('alpha' for native compaction,
    'beta' for summaries): each test picks its family by its agent's model."""
    tmp = tmp_path_factory.mktemp("compaction")
    fakes = {"alpha": FakeProvider("alpha"), "beta": FakeProvider("beta")}
    alpha, beta = fakes["alpha"].start(), fakes["beta"].start()
    try:
        with running(
            {
                "AGENTSVC_DATABASE_URL": pg_url,
                "AGENTSVC_BOOTSTRAP_API_KEY": f"ask_e2e_{uuid.uuid4().hex}",
                "AGENTSVC_BOOTSTRAP_ORG": f"cmp-{uuid.uuid4().hex[:8]}",
                "AGENTSVC_JWT_SECRET": JWT_SECRET,
                "AGENTSVC_ALPHA_BASE_URL": alpha,
                "AGENTSVC_ALPHA_API_KEY": "sk-ant-platform",
                "AGENTSVC_BETA_BASE_URL": f"{beta}/v1",
                "AGENTSVC_BETA_API_KEY": "sk-platform",
                "AGENTSVC_DATA_DIR": str(tmp / "data"),
            },
            log=tmp / "svc.log",
        ) as svc:
            yield svc, fakes
    finally:
        for fake in fakes.values():
            fake.stop()


def _world(
    served: tuple[Service, dict[str, FakeProvider]], kind: str
) -> Iterator[tuple[httpx.Client, FakeProvider]]:
    """An organization of this test's own, and the fake with nothing recorded."""
    svc, fakes = served
    for fake in fakes.values():
        fake.reset()
    _, key = new_org(svc.url, JWT_SECRET, "cmp")
    with client(svc, key, timeout=30) as c:
        yield c, fakes[kind]


@pytest.fixture
def world(
    served: tuple[Service, dict[str, FakeProvider]],
) -> Iterator[tuple[httpx.Client, FakeProvider]]:
    yield from _world(served, "beta")


def system_of(body: dict[str, Any]) -> str:
    first = body["messages"][0]
    return str(first["content"]) if first["role"] == "system" else ""


def users_of(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_a_long_conversation_is_summarised_and_history_stays_complete(
    world: tuple[httpx.Client, FakeProvider],
) -> None:
    c, fake = world
    agent = c.post(
        "/api/agents",
        json={"name": "Long talker", "defaultModel": "gpt-long", "stablePreamble": "PREAMBLE"},
    ).json()
    r = c.put(
        f"/api/agents/{agent['id']}/compaction",
        json={"enabled": True, "betaCompactThreshold": 1000},
    )
    assert r.status_code == 200
    assert (
        r.json()["enabled"],
        r.json()["beta_compact_threshold"],
        r.json()["alpha_trigger_tokens"],
    ) == (True, 1000, 150000)
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
    said = [f"message {i}: " + f"word{i} " * 400 for i in range(6)]
    for text in said:
        events = parse(c.post(f"/api/threads/{thread['id']}/messages", json={"content": text}).text)
        assert names(events)[-1] == "done"

    bodies = [r.json for r in fake.requests]
    summaries = [b for b in bodies if system_of(b) == SUMMARY_PROMPT]
    assert summaries, "no summary was asked for"
    assert "message 0" in summaries[0]["messages"][-1]["content"]  # the oldest were summarised
    last = bodies[-1]
    assert system_of(last).startswith("PREAMBLE\n\nSummary of the earlier conversation:\n")
    sent = users_of(last)
    assert sent[-1] == said[-1]
    assert said[0] not in sent  # replaced by the summary
    assert len(sent) < len(said)
    # the history is complete
    history = c.get(f"/api/threads/{thread['id']}/messages").json()
    assert history["total"] == 12
    assert [m["content"] for m in history["messages"] if m["role"] == "user"] == said


def test_compaction_settings_bounds(world: tuple[httpx.Client, FakeProvider]) -> None:
    c, _ = world
    agent = c.post("/api/agents", json={"name": "x"}).json()
    url = f"/api/agents/{agent['id']}/compaction"
    assert c.get(url).json() == {
        "agent_id": agent["id"],
        "org_id": agent["org_id"],
        "enabled": False,
        "alpha_trigger_tokens": 150000,
        "alpha_instructions": None,
        "alpha_pause_after": False,
        "beta_compact_threshold": 100000,
    }
    for body in ({"alphaTriggerTokens": 49999}, {"betaCompactThreshold": 999}, {"enabled": "yes"}):
        r = c.put(url, json=body)
        assert (r.status_code, r.json()["error"]) == (422, "VALIDATION_ERROR"), body
    r = c.put(url, json={"alphaInstructions": "Keep the numbers.", "alphaPauseAfter": True})
    assert (r.json()["alpha_instructions"], r.json()["alpha_pause_after"], r.json()["enabled"]) == (
        "Keep the numbers.",
        True,
        False,
    )


@pytest.fixture
def alpha_world(
    served: tuple[Service, dict[str, FakeProvider]],
) -> Iterator[tuple[httpx.Client, FakeProvider]]:
    yield from _world(served, "alpha")


def _alpha_texts(body: dict[str, Any]) -> list[tuple[str, list[str]]]:
    """(role, block types) of each message the provider received."""
    return [(m["role"], [b["type"] for b in m["content"]]) for m in body["messages"]]


def test_native_compaction_block_replaces_the_history_it_covers(
    alpha_world: tuple[httpx.Client, FakeProvider],
) -> None:
    c, fake = alpha_world
    agent = c.post("/api/agents", json={"name": "Native", "defaultModel": "claude-native"}).json()
    c.put(
        f"/api/agents/{agent['id']}/compaction",
        json={
            "enabled": True,
            "alphaTriggerTokens": 60000,
            "alphaInstructions": "Keep the numbers.",
        },
    )
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
    url = f"/api/threads/{thread['id']}/messages"

    assert names(parse(c.post(url, json={"content": "first question"}).text))[-1] == "done"
    first = fake.requests[-1]
    assert first.headers["anthropic-beta"] == "compact-2026-01-12"
    assert first.json["context_management"] == {
        "edits": [
            {
                "type": "compact_20260112",
                "trigger": {"type": "input_tokens", "value": 60000},
                "pause_after_compaction": False,
                "instructions": "Keep the numbers.",
            }
        ]
    }

    block = {"type": "compaction", "content": "SUMMARY OF THE FIRST EXCHANGE"}
    fake.enqueue(Reply(text="Second answer.", compaction=block))
    events = parse(c.post(url, json={"content": "second question"}).text)
    assert events[-1].data["content"] == "Second answer."

    c.post(url, json={"content": "third question"})
    third = fake.requests[-1].json
    # the user turn before the block, the block (verbatim) with its text, then what followed
    assert _alpha_texts(third) == [
        ("user", ["text"]),
        ("assistant", ["compaction", "text"]),
        ("user", ["text"]),
    ]
    assert third["messages"][1]["content"][0] == block
    assert "first question" not in str(third["messages"])  # replaced by the block
    history = c.get(url).json()
    assert history["total"] == 6  # the stored history is complete
    assert history["messages"][0]["content"] == "first question"


def test_pause_after_compaction_continues_the_reply(
    alpha_world: tuple[httpx.Client, FakeProvider],
) -> None:
    c, fake = alpha_world
    agent = c.post("/api/agents", json={"name": "Pausing", "defaultModel": "claude-native"}).json()
    c.put(f"/api/agents/{agent['id']}/compaction", json={"enabled": True, "alphaPauseAfter": True})
    thread = c.post("/api/threads", json={"agentId": agent["id"]}).json()
    url = f"/api/threads/{thread['id']}/messages"
    block = {"type": "compaction", "content": "SUMMARY"}
    fake.enqueue(
        Reply(tokens=[], compaction=block, stop_reason="compaction"), Reply(text="After the pause.")
    )
    events = parse(c.post(url, json={"content": "long question"}).text)
    assert events[-1].event == "done"
    assert events[-1].data["content"] == "After the pause."
    continued = fake.requests[-1].json
    assert continued["context_management"]["edits"][0]["pause_after_compaction"] is True
    assert continued["messages"][-1]["content"][0] == block  # the call went on from the block
    history = c.get(url).json()["messages"]
    assert [(m["role"], m["content"]) for m in history] == [
        ("user", "long question"),
        ("assistant", "After the pause."),
    ]


def _long_agent(c: httpx.Client, threshold: int) -> str:
    agent = c.post(
        "/api/agents",
        json={"name": "Seen", "defaultModel": "gpt-seen", "stablePreamble": "PREAMBLE"},
    ).json()
    r = c.put(
        f"/api/agents/{agent['id']}/compaction",
        json={"enabled": True, "betaCompactThreshold": threshold},
    )
    assert r.status_code == 200, r.text
    return str(agent["id"])


def _summaries_since(fake: FakeProvider, start: int) -> int:
    return sum(1 for r in fake.requests[start:] if system_of(r.json) == SUMMARY_PROMPT)


def test_the_compaction_event_comes_only_to_a_send_that_asks(
    world: tuple[httpx.Client, FakeProvider],
) -> None:
    c, fake = world
    agent = _long_agent(c, 1000)
    said = [f"message {i}: " + f"word{i} " * 400 for i in range(5)]
    for include in ([], ["compaction"]):
        thread = c.post("/api/threads", json={"agentId": agent}).json()["id"]
        start = len(fake.requests)
        seen: list[dict[str, Any]] = []
        for text in said:
            body: dict[str, Any] = {"content": text}
            if include:
                body["includeEvents"] = include
            events = parse(c.post(f"/api/threads/{thread}/messages", json=body).text)
            assert names(events)[-1] == "done"
            seen += [e.data for e in events if e.event == "compaction"]
        summaries = _summaries_since(fake, start)
        assert summaries > 0, "the thread was not compacted"
        if not include:
            assert seen == []  # a client that knows only the spec sees nothing new
            continue
        assert len(seen) == summaries
        for event in seen:
            assert set(event) == {"tokens_before", "tokens_after", "kind"}
            assert event["kind"] == "summary"
            assert event["tokens_before"] > 1000


def test_compact_now_and_the_context_shows_the_summary(
    world: tuple[httpx.Client, FakeProvider], pg_url: str
) -> None:
    c, fake = world
    agent = _long_agent(c, 100_000)  # no turn compacts by itself here
    thread = c.post("/api/threads", json={"agentId": agent}).json()["id"]
    for i in range(4):
        text = f"message {i}: " + f"word{i} " * 200
        events = parse(c.post(f"/api/threads/{thread}/messages", json={"content": text}).text)
        assert names(events)[-1] == "done"
    before = c.get(f"/api/threads/{thread}/context").json()
    assert (before["system"], before["summary"], len(before["messages"])) == ("PREAMBLE", None, 8)
    fake.enqueue(Reply(text="A short summary."))
    done = c.post(f"/api/threads/{thread}/compact")
    assert done.status_code == 200, done.text
    answer = done.json()
    assert (answer["compacted"], answer["kind"], answer["tokens_before"]) == (
        True,
        "summary",
        before["tokens"],
    )
    assert answer["tokens_after"] < answer["tokens_before"]
    after = c.get(f"/api/threads/{thread}/context").json()
    assert after["summary"] == "A short summary."
    assert after["system"] == "PREAMBLE\n\nSummary of the earlier conversation:\nA short summary."
    assert after["tokens"] == answer["tokens_after"] < before["tokens"]
    assert [m["content"] for m in after["messages"]] == [
        m["content"] for m in before["messages"][-4:]
    ]
    # the next turn sends what /context showed, then its own message
    c.post(f"/api/threads/{thread}/messages", json={"content": "and now?"})
    sent = fake.requests[-1].json
    assert system_of(sent) == after["system"]
    assert [m["content"] for m in sent["messages"][1:]] == [
        *(m["content"] for m in after["messages"]),
        "and now?",
    ]
    with psycopg.connect(pg_url) as db:
        purposes = [
            r[0]
            for r in db.execute(
                "SELECT purpose FROM usage_records WHERE thread_id = %s", (thread,)
            ).fetchall()
        ]
    assert purposes.count("compaction") == 1
    # the stored history is complete
    assert c.get(f"/api/threads/{thread}/messages").json()["total"] == 10
