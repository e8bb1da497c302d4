"""Runners end to end (docs/runners.md): the real service process on a database of this
module's own, the built-in ``local`` model, and the customer's receiver on
loopback checking every webhook step's signature with the docs' receiver.

- a three-step runner (agent, condition, webhook) runs from each trigger kind:
  ``api``, ``manual`` (a user's JWT), ``webhook`` (its token, with Idempotency-Key),
  ``button`` (its token, as the button page posts) and ``cron``;
- a cron trigger fires once per tick with two service processes running;
- a budget pauses a run before its next step (a condition) and resume finishes it;
- a process killed mid-run leaves a run that the next process finishes.
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt
import pytest

from tests.e2e.conftest import E2E_JWT_SECRET
from tests.e2e.receivers import SignedReceiver
from tests.e2e.service import Service
from tests.sse import Event, parse_lines
from tests.web.live import serve

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

STEP_SECRET = "runner-step-secret-6f0a1b"


class World:
    def __init__(self, db: str, tmp: Path, base: str, receiver: SignedReceiver) -> None:
        self.db, self.tmp, self.base, self.receiver = db, tmp, base, receiver
        self.key = f"ask_e2e_{uuid.uuid4().hex}"
        self.org = f"runners-{uuid.uuid4().hex[:8]}"
        self.services: list[Service] = []

    def start(self, **extra: str) -> Service:
        svc = Service(
            {
                "AGENTSVC_DATABASE_URL": self.db,
                "AGENTSVC_BOOTSTRAP_API_KEY": self.key,
                "AGENTSVC_BOOTSTRAP_ORG": self.org,
                "AGENTSVC_JWT_SECRET": E2E_JWT_SECRET,
                "AGENTSVC_ALLOW_PRIVATE_NETWORK": "true",  # the receiver is on loopback
                # one data folder: every process opens the same sealed secrets
                "AGENTSVC_DATA_DIR": str(self.tmp / "data"),
                "AGENTSVC_CRON_MIN_INTERVAL_S": "1",
                "AGENTSVC_SCHEDULER_TICK_MS": "200",
                "AGENTSVC_JOB_HEARTBEAT_S": "2",
                "AGENTSVC_RUN_STALE_AFTER_S": "4",
                "AGENTSVC_LOCAL_SLOW_DELAY_MS": "60",  # "slowly": a word each 60 ms
                **extra,
            },
            log=self.tmp / f"svc{len(self.services)}.log",
        )
        self.services.append(svc)
        svc.wait_ready()
        return svc

    def client(self, svc: Service, token: str | None = None) -> httpx.Client:
        return httpx.Client(
            base_url=svc.url, headers={"Authorization": f"Bearer {token or self.key}"}, timeout=60
        )


@pytest.fixture(scope="module")
def world(own_pg_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    receiver = SignedReceiver()
    with serve(receiver) as base:
        w = World(own_pg_url, tmp_path_factory.mktemp("runners"), base, receiver)
        try:
            svc = w.start()
            with w.client(svc) as c:
                receiver.secret = c.get("/api/orgs/settings").json()["signing_secret"]
            yield w
            for s in w.services:
                assert STEP_SECRET not in s.output()
        finally:
            for s in w.services:
                s.stop()


def _ok(r: httpx.Response) -> Any:
    assert r.status_code in (200, 201, 202), r.text
    return r.json()


def _ended(c: httpx.Client, runner: str, run: str, *statuses: str, timeout: float = 30) -> Any:
    wanted = statuses or ("succeeded", "failed", "cancelled")
    deadline = time.monotonic() + timeout
    while True:
        got = _ok(c.get(f"/api/runners/{runner}/runs/{run}"))
        if got["status"] in wanted:
            return got
        assert time.monotonic() < deadline, got
        time.sleep(0.1)


def _three_steps(c: httpx.Client, base: str) -> tuple[str, str]:
    agent = _ok(c.post("/api/agents", json={"name": "triage", "defaultModel": "local"}))
    runner = _ok(
        c.post(
            "/api/runners",
            json={
                "name": "ticket triage",
                "inputSchema": {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
                "steps": [
                    {
                        "id": "classify",
                        "kind": "agent",
                        "agentId": agent["id"],
                        "prompt": "Classify this ticket: {{ input.text }}",
                    },
                    {
                        "id": "urgent",
                        "kind": "condition",
                        "expression": "contains(steps.classify.output.text, 'urgent')",
                        "ifFalse": "stop",
                    },
                    {
                        "id": "notify",
                        "kind": "webhook",
                        "url": f"{base}/notify",
                        "headers": {"X-Api-Key": STEP_SECRET},
                        "inputMapping": {
                            "ticket": "input.text",
                            "summary": "steps.classify.output.text",
                        },
                    },
                ],
            },
        )
    )
    assert runner["steps"][2]["has_headers"] is True
    assert STEP_SECRET not in json.dumps(runner)
    return agent["id"], runner["id"]


def _check_notified(world: World, run: dict[str, Any], text: str) -> None:
    assert run["status"] == "succeeded", run
    assert [s["status"] for s in run["steps"]] == ["succeeded", "succeeded", "succeeded"]
    call = next(c for c in world.receiver.calls if c["body"]["runId"] == run["id"])
    assert call["verified"], call
    assert call["headers"]["x-api-key"] == STEP_SECRET
    assert call["headers"]["idempotency-key"]
    assert call["body"]["stepId"] == "notify"
    assert call["body"]["input"]["ticket"] == text
    assert text in call["body"]["input"]["summary"]
    assert run["output"]["status_code"] == 200
    assert run["output"]["json"] == {"accepted": True}


def test_a_three_step_runner_runs_from_each_trigger(world: World) -> None:
    svc = world.services[0]
    with world.client(svc) as c:
        _, runner = _three_steps(c, world.base)
        # api: an API key
        started = c.post(f"/api/runners/{runner}/runs", json={"input": {"text": "urgent: down"}})
        assert started.status_code == 201, started.text
        assert started.json()["trigger"]["kind"] == "api"
        _check_notified(world, _ended(c, runner, started.json()["id"]), "urgent: down")
        # the input is checked against the runner's schema
        bad = c.post(f"/api/runners/{runner}/runs", json={"input": {"text": 7}})
        assert bad.status_code == 422, bad.text
        # a condition that is false stops the run: no call
        calm = _ok(c.post(f"/api/runners/{runner}/runs", json={"input": {"text": "calm"}}))
        done = _ended(c, runner, calm["id"])
        assert [s["status"] for s in done["steps"]] == ["succeeded", "succeeded", "skipped"]
        assert all(call["body"]["runId"] != calm["id"] for call in world.receiver.calls)

        # manual: a user of the organization with the admin role
        token = jwt.encode(
            {"sub": "ops-1", "org_id": world.org, "role": "admin", "exp": int(time.time()) + 600},
            E2E_JWT_SECRET,
            algorithm="HS256",
        )
        with world.client(svc, token) as user:
            manual = _ok(
                user.post(f"/api/runners/{runner}/runs", json={"input": {"text": "urgent m"}})
            )
            assert manual["trigger"]["kind"] == "manual"
            _check_notified(world, _ended(user, runner, manual["id"]), "urgent m")

        # webhook and button: their token, no API key; 202 at once; Idempotency-Key
        for kind in ("webhook", "button"):
            trigger = _ok(c.post(f"/api/runners/{runner}/triggers", json={"kind": kind}))
            token = trigger["token"]
            assert trigger["webhook_url"] == f"/api/runners/webhooks/{token}"
            listed = _ok(c.get(f"/api/runners/{runner}/triggers"))
            assert token not in json.dumps(listed)
            text = f"urgent via {kind}"
            key = {"Idempotency-Key": f"k-{kind}"}
            r = httpx.post(
                f"{svc.url}/api/runners/webhooks/{token}", json={"text": text}, headers=key
            )
            assert r.status_code == 202, r.text
            again = httpx.post(
                f"{svc.url}/api/runners/webhooks/{token}", json={"text": text}, headers=key
            )
            assert (again.status_code, again.json()) == (200, r.json())
            run = _ended(c, runner, r.json()["runId"])
            assert run["trigger"] == {"kind": kind, "id": trigger["id"]}
            _check_notified(world, run, text)
            # rotated: the old token opens nothing
            rotated = _ok(c.post(f"/api/runners/{runner}/triggers/{trigger['id']}/rotate"))
            old = httpx.post(f"{svc.url}/api/runners/webhooks/{token}", json={"text": text})
            assert (old.status_code, old.json()["error"]) == (404, "NOT_FOUND")
            new = httpx.post(
                f"{svc.url}/api/runners/webhooks/{rotated['token']}", json={"text": "calm"}
            )
            assert new.status_code == 202, new.text
        # a body that is not an object, and one over the size limit
        r = httpx.post(f"{svc.url}/api/runners/webhooks/{rotated['token']}", content=b"[1]")
        assert r.status_code in (400, 422), r.text
        r = httpx.post(
            f"{svc.url}/api/runners/webhooks/{rotated['token']}",
            json={"text": "x" * (2 * 1024 * 1024)},
        )
        assert r.status_code == 413, r.text

        # cron: every second, in a time zone, until disabled
        trigger = _ok(
            c.post(
                f"/api/runners/{runner}/triggers",
                json={
                    "kind": "cron",
                    "cron": "* * * * * *",
                    "timezone": "America/New_York",
                    "input": {"text": "urgent by cron"},
                },
            )
        )
        assert trigger["next_fire_at"] is not None
        deadline = time.monotonic() + 20
        while True:
            runs = _ok(c.get(f"/api/runners/{runner}/runs", params={"limit": 100}))["runs"]
            cron_runs = [r for r in runs if r["trigger"]["id"] == trigger["id"]]
            if cron_runs:
                break
            assert time.monotonic() < deadline
            time.sleep(0.2)
        _ok(c.patch(f"/api/runners/{runner}/triggers/{trigger['id']}", json={"enabled": False}))
        run = _ended(c, runner, cron_runs[-1]["id"])
        assert run["trigger"]["kind"] == "cron"
        assert run["scheduled_for"] is not None
        _check_notified(world, run, "urgent by cron")

        # one trace per run: the run's span, its steps, the agent step's turn
        trace = _ok(c.get(f"/api/logs/{run['trace_id']}"))
        names = [s["name"] for s in trace["spans"]]
        assert "runner_run ticket triage" in names
        assert {"step classify", "step urgent", "step notify"} <= set(names)
        assert "invoke_agent triage" in names


def test_a_cron_tick_fires_once_with_two_processes(world: World) -> None:
    first = world.services[0]
    second = world.start()
    with world.client(first) as c:
        agent = _ok(c.post("/api/agents", json={"name": "ticker", "defaultModel": "local"}))
        runner = _ok(
            c.post(
                "/api/runners",
                json={
                    "name": "ticker",
                    "steps": [{"id": "tick", "kind": "agent", "agentId": agent["id"]}],
                },
            )
        )["id"]
        trigger = _ok(
            c.post(
                f"/api/runners/{runner}/triggers",
                json={"kind": "cron", "cron": "* * * * * *", "overlap": "queue"},
            )
        )
        time.sleep(5)
        _ok(c.patch(f"/api/runners/{runner}/triggers/{trigger['id']}", json={"enabled": False}))
        time.sleep(0.5)
        runs = _ok(c.get(f"/api/runners/{runner}/runs", params={"limit": 100}))["runs"]
    ticks = [r["scheduled_for"] for r in runs]
    assert len(ticks) >= 3, runs
    assert len(set(ticks)) == len(ticks), ticks  # no tick twice
    # about one per second: nothing fired twice, nothing skipped
    assert len(ticks) <= 7
    second.stop()
    world.services.remove(second)


def test_a_budget_pauses_a_run_before_its_next_step_and_resume_finishes_it(
    world: World,
) -> None:
    """The three-step runner (agent, condition, webhook) with ``maxTokensPerRun: 20``:
    its agent step's reply takes it past 20 tokens, and it pauses before the
    condition, whatever the next step's kind; one token under the limit, it runs
    through, warned of the share it used."""
    text = "urgent: the checkout page is down"
    with world.client(world.services[0]) as c:
        _, runner = _three_steps(c, world.base)
        budget = _ok(c.put(f"/api/runners/{runner}/budget", json={"maxTokensPerRun": 20}))
        assert (budget["max_tokens_per_run"], budget["on_exceed"]) == (20, "pause")
        bad = c.put(f"/api/runners/{runner}/budget", json={"softLimitPct": 0})
        assert bad.status_code == 422, bad.text
        run = _ok(c.post(f"/api/runners/{runner}/runs", json={"input": {"text": text}}))
        paused = _ended(c, runner, run["id"], "paused", "failed", "succeeded")
        spent = paused["tokens"]
        assert spent > 20  # the local model's reply repeats the prompt: the premise
        assert (paused["status"], paused["paused_reason"]) == ("paused", "budget"), paused
        assert [s["status"] for s in paused["steps"]] == ["succeeded", "pending", "pending"]
        assert paused["next_step"] == "urgent"
        assert paused["error"] == f"the run has used {spent} tokens of its 20"
        assert paused["budget_warning"] == f"{spent * 100 // 20}% of max_tokens_per_run used"
        assert not [k for k in world.receiver.calls if k["body"]["runId"] == run["id"]]
        resumed = c.post(
            f"/api/runners/{runner}/runs/{run['id']}/resume", json={"raiseBudgetTokens": 1000}
        )
        assert resumed.status_code == 200, resumed.text
        done = _ended(c, runner, run["id"])
        _check_notified(world, done, text)
        assert done["budget_warning"] is None  # under 80% of the raised limit
        again = c.post(f"/api/runners/{runner}/runs/{run['id']}/resume", json={})
        assert (again.status_code, again.json()["error"]) == (409, "RUN_NOT_PAUSED")

        # one token over what the run spends: every step starts, the last under the
        # limit; the run ends warned of its true share
        _ok(c.put(f"/api/runners/{runner}/budget", json={"maxTokensPerRun": spent + 1}))
        run2 = _ok(c.post(f"/api/runners/{runner}/runs", json={"input": {"text": text}}))
        through = _ended(c, runner, run2["id"], "paused", "failed", "succeeded")
        _check_notified(world, through, text)
        assert through["tokens"] == spent  # the same prompt, the same reply
        share = spent * 100 // (spent + 1)
        assert through["budget_warning"] == f"{share}% of max_tokens_per_run used"


def test_a_run_survives_a_killed_process(world: World) -> None:
    victim = world.start()
    with world.client(victim) as c:
        agent = _ok(c.post("/api/agents", json={"name": "slow", "defaultModel": "local"}))
        runner = _ok(
            c.post(
                "/api/runners",
                json={
                    "name": "long",
                    "steps": [
                        {
                            "id": "long",
                            "kind": "agent",
                            "agentId": agent["id"],
                            "prompt": "slowly " + "word " * 40,
                        },
                        {"id": "after", "kind": "agent", "agentId": agent["id"], "prompt": "done"},
                    ],
                },
            )
        )["id"]
        # the other processes take no job of this test: only the victim works...
        for s in world.services:
            if s is not victim:
                s.proc.send_signal(signal.SIGSTOP)
        try:
            run = _ok(c.post(f"/api/runners/{runner}/runs", json={}))
            deadline = time.monotonic() + 20
            while _ok(c.get(f"/api/runners/{runner}/runs/{run['id']}"))["steps"][0]["status"] != (
                "running"
            ):
                assert time.monotonic() < deadline
                time.sleep(0.05)
            time.sleep(0.5)  # the turn streams
            victim.proc.kill()  # SIGKILL: no shutdown, no grace
            victim.proc.wait()
        finally:
            for s in world.services:
                if s is not victim:
                    s.proc.send_signal(signal.SIGCONT)
    world.services.remove(victim)
    victim.stop()
    # ... and the process that is left picks the run up once the job's heartbeat is stale
    with world.client(world.services[0]) as c:
        done = _ended(c, runner, run["id"], timeout=60)
        assert done["status"] == "succeeded", done
        first = done["steps"][0]
        assert first["attempt"] == 2, first  # started again, once
        assert done["steps"][1]["status"] == "succeeded"
        # its events tell the same, each once, from both processes' writes
        events = _ok(c.get(f"/api/runners/{runner}/runs/{run['id']}/events"))["events"]
    told = [(e["type"], e["data"].get("step_id"), e["data"].get("attempt")) for e in events]
    assert told == [
        ("run.started", None, None),
        ("step.started", "long", 1),
        ("step.started", "long", 2),
        ("step.finished", "long", 2),
        ("step.started", "after", 1),
        ("step.finished", "after", 1),
        ("run.finished", None, None),
    ]
    assert [e["seq"] for e in events] == list(range(1, 8))


def _follow(svc: Service, key: str, path: str, last: int | None = None, until: str = "") -> Any:
    """A run's events over SSE from ``svc``: to the stream's end, or to the first
    event of type ``until`` (then the client hangs up)."""
    headers = {"Authorization": f"Bearer {key}", "Accept": "text/event-stream"}
    if last is not None:
        headers["Last-Event-ID"] = str(last)
    got: list[Event] = []
    with httpx.stream("GET", f"{svc.url}{path}", headers=headers, timeout=60) as r:
        assert r.status_code == 200, r.read()
        for item in parse_lines(r.iter_lines()):
            if isinstance(item, Event):
                got.append(item)
                if item.event == until:
                    break
    return got


def test_a_run_is_followed_live_from_a_process_that_does_not_run_it(world: World) -> None:
    """The run's job runs in the first process; a second, with no job worker,
    serves its followers: each event reaches them (PostgreSQL's NOTIFY carries the
    word), and a follower that hangs up mid-run and comes back with Last-Event-ID
    gets the rest, each event once."""
    reader = world.start(AGENTSVC_WORKER="false")
    try:
        with world.client(world.services[0]) as c:
            agent = _ok(c.post("/api/agents", json={"name": "slow", "defaultModel": "local"}))
            steps = [
                {
                    "id": "one",
                    "kind": "agent",
                    "agentId": agent["id"],
                    "prompt": "slowly " + "a " * 15,
                },
                {
                    "id": "two",
                    "kind": "agent",
                    "agentId": agent["id"],
                    "prompt": "slowly " + "b " * 15,
                },
            ]
            runner = _ok(c.post("/api/runners", json={"name": "followed", "steps": steps}))["id"]
            run = _ok(c.post(f"/api/runners/{runner}/runs", json={}))["id"]
        path = f"/api/runners/{runner}/runs/{run}/events"
        first = _follow(reader, world.key, path, until="step.finished")
        assert [(e.id, e.event) for e in first] == [
            (1, "run.started"),
            (2, "step.started"),
            (3, "step.finished"),
        ]
        rest = _follow(reader, world.key, path, last=first[-1].id)
        assert [(e.id, e.event) for e in rest] == [
            (4, "step.started"),
            (5, "step.finished"),
            (6, "run.finished"),
        ]
        assert rest[-1].data["data"]["status"] == "succeeded"
        assert rest[1].data["data"]["step_id"] == "two"
    finally:
        world.services.remove(reader)
        reader.stop()
