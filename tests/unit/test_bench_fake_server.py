"""The benchmark's provider (bench/fake_server.py), run as the harness runs it: the same
bytes as the test fake's ``beta`` stream, parsed by the service's adapter, refusing
what a provider refuses, paced as asked."""

from __future__ import annotations

import re
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from bench.fake_server import API_KEY, tokens
from bench.provider_parse import request

from agentsvc_adapters.llm.beta import BetaModel
from agentsvc_core.entities import Usage
from agentsvc_core.ports import Finished, ModelEvent, TextDelta, UsageReport
from tests.fakes.providers import FakeProvider, Reply

ROOT = Path(__file__).resolve().parents[2]
AUTH = {"authorization": f"Bearer {API_KEY}"}
BODY = {
    "model": "gpt-bench",
    "stream": True,
    "stream_options": {"include_usage": True},
    "messages": [{"role": "user", "content": "Hello"}],
}


def _serve(*args: str) -> Iterator[str]:
    with subprocess.Popen(
        [sys.executable, "-m", "bench.fake_server", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        try:
            assert proc.stdout is not None
            ready, _, _ = select.select([proc.stdout], [], [], 30)
            assert ready, "the fake printed no URL within 30 s"
            line = proc.stdout.readline()
            assert line.startswith("URL "), line
            yield line.split()[1]
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture(scope="module")
def instant() -> Iterator[str]:
    yield from _serve("--tokens", "5")


@pytest.fixture(scope="module")
def paced() -> Iterator[str]:
    yield from _serve("--tokens", "4", "--first-token-delay", "0.3", "--token-delay", "0.1")


def _normalized(raw: bytes) -> bytes:
    """A stream with its per-request parts (id, created) blanked."""
    raw = re.sub(rb'"id":"chatcmpl-[0-9a-f]{24}"', b'"id":"ID"', raw)
    return re.sub(rb'"created":\d+', b'"created":0', raw)


def test_streams_the_test_fakes_bytes(instant: str) -> None:
    reference = FakeProvider("beta", api_key=API_KEY)
    reference.default = Reply(tokens=tokens(5))
    with reference, httpx.Client(timeout=10) as http:
        want = http.post(reference.base_url + "/v1/chat/completions", json=BODY, headers=AUTH)
        got = http.post(instant + "/v1/chat/completions", json=BODY, headers=AUTH)
    assert got.status_code == want.status_code == 200
    assert got.headers["content-type"] == want.headers["content-type"]
    assert _normalized(got.content) == _normalized(want.content)
    assert got.content.count(b"data: ") == 5 + 4  # role, 5 deltas, finish, usage, [DONE]


async def test_the_service_adapter_reads_the_reply(instant: str) -> None:
    model = BetaModel(instant + "/v1", API_KEY)
    try:
        events: list[ModelEvent] = [e async for e in model.stream(request())]
    finally:
        await model.aclose()
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == " t0 t1 t2 t3 t4"
    usage = [e.usage for e in events if isinstance(e, UsageReport)]
    assert usage[-1] == Usage(input_tokens=12, output_tokens=5, cached_input_tokens=0)
    assert [e.reason for e in events if isinstance(e, Finished)] == ["stop"]


@pytest.mark.parametrize(
    ("path", "headers", "body", "status", "message"),
    [
        ("/v1/chat/completions", {}, BODY, 401, "Incorrect API key"),
        ("/v1/chat/completions", {"authorization": "Bearer sk-other"}, BODY, 401, "API key"),
        ("/v1/chat/completions", AUTH, {**BODY, "stream": False}, 400, "stream: true"),
        ("/v1/chat/completions", AUTH, {"model": "m", "stream": True}, 400, "messages"),
        ("/v1/chat/completions", AUTH, {**BODY, "messages": []}, 400, "messages"),
        ("/v1/completions", AUTH, BODY, 404, "Unknown request URL"),
    ],
)
def test_refuses_what_a_provider_refuses(
    instant: str, path: str, headers: dict[str, str], body: object, status: int, message: str
) -> None:
    response = httpx.post(instant + path, json=body, headers=headers, timeout=10)
    assert response.status_code == status
    error = response.json()["error"]
    assert message in error["message"]
    assert error["type"] == "invalid_request_error"


def test_not_json_is_a_400(instant: str) -> None:
    response = httpx.post(
        instant + "/v1/chat/completions", content=b"{not json", headers=AUTH, timeout=10
    )
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]


def test_paces_the_tokens(paced: str) -> None:
    with httpx.stream(
        "POST", paced + "/v1/chat/completions", json=BODY, headers=AUTH, timeout=10
    ) as response:
        start = time.perf_counter()
        arrivals = [
            time.perf_counter() - start for line in response.iter_lines() if '"content":" t' in line
        ]
    assert len(arrivals) == 4
    # on a fixed schedule: token i not before 0.3 + 0.1 i s (a stall may make it later,
    # and the next ones catch up, so only the lower bounds are sure)
    for i, at in enumerate(arrivals):
        assert at >= 0.3 + 0.1 * i - 0.05, (i, arrivals)
