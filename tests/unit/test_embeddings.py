"""The OpenAI-compatible embeddings adapter against a loopback fake of the API
(tests/fakes/embeddings.py), and its settings."""

from __future__ import annotations

import asyncio
import logging
import math
import socket
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsvc_adapters.embeddings import MAX_RETRY_AFTER_S, OpenAIEmbedder
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.errors import Upstream
from agentsvc_web.settings import Settings, SettingsError
from tests.fakes.embeddings import EMBEDDINGS_KEY, FakeEmbeddings, hash_vector
from tests.outbound import fake_dns
from tests.web.live import serve

OPEN = OutboundGuard(allow_private_network=True)  # the fake is on loopback
DIMS = 32


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[FakeEmbeddings, str]]:
    fake = FakeEmbeddings(dimensions=DIMS)
    with serve(fake) as url:
        yield fake, url + "/v1"


@pytest.fixture
def api(server: tuple[FakeEmbeddings, str]) -> Iterator[tuple[FakeEmbeddings, str]]:
    """The shared fake, its steering reset and its record emptied for each test."""
    fake, url = server
    fake.reset()
    yield fake, url
    fake.reset()


class Sleeps:
    """Records the waits between attempts instead of waiting."""

    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def embedder(
    url: str,
    key: str | None = EMBEDDINGS_KEY,
    *,
    sleep: Sleeps | None = None,
    batch: int = 64,
    max_chars: int = 8000,
    send_dimensions: bool = False,
    backoff_s: float = 0.5,
    timeout_s: float = 30.0,
    max_answer_bytes: int = 64 * 1024 * 1024,
) -> OpenAIEmbedder:
    """The adapter on the fake, recording its waits instead of waiting."""
    return OpenAIEmbedder(
        url,
        key,
        "text-embedding-3-small",
        DIMS,
        OPEN,
        batch=batch,
        max_chars=max_chars,
        send_dimensions=send_dimensions,
        backoff_s=backoff_s,
        timeout_s=timeout_s,
        max_answer_bytes=max_answer_bytes,
        sleep=sleep or Sleeps(),
    )


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True)) / (
        math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    )


async def test_vectors_in_order_in_batches_with_the_key(api: tuple[FakeEmbeddings, str]) -> None:
    fake, url = api
    fake.shuffle = True  # data listed in reverse: the adapter sorts by index
    texts = [f"text number {i} about tea" for i in range(7)]
    e = embedder(url, batch=3)
    try:
        vectors = await e.embed(texts)
    finally:
        await e.aclose()
    assert vectors == [hash_vector(t, DIMS) for t in texts]
    assert [c.inputs for c in fake.calls] == [texts[0:3], texts[3:6], texts[6:7]]
    assert {c.authorization for c in fake.calls} == {f"Bearer {EMBEDDINGS_KEY}"}
    assert fake.calls[0].path == "/v1/embeddings"
    # dimensions are not sent unless configured explicitly
    assert fake.calls[0].body == {
        "model": "text-embedding-3-small",
        "input": texts[0:3],
        "encoding_format": "float",
    }


async def test_the_fake_s_vectors_put_texts_that_share_words_close(
    api: tuple[FakeEmbeddings, str],
) -> None:
    _, url = api
    e = embedder(url)
    try:
        tea, green, cars = await e.embed(
            ["how to brew green tea", "green tea brewing temperature", "fast sports cars"]
        )
    finally:
        await e.aclose()
    assert cosine(tea, green) > cosine(tea, cars)
    assert math.isclose(sum(x * x for x in tea), 1.0)


async def test_explicit_dimensions_are_sent(api: tuple[FakeEmbeddings, str]) -> None:
    fake, url = api
    e = embedder(url, send_dimensions=True)
    try:
        (vector,) = await e.embed(["tea"])
    finally:
        await e.aclose()
    assert len(vector) == DIMS
    assert fake.calls[-1].body["dimensions"] == DIMS


async def test_no_texts_no_request(api: tuple[FakeEmbeddings, str]) -> None:
    fake, url = api
    e = embedder(url)
    try:
        assert await e.embed([]) == []
    finally:
        await e.aclose()
    assert fake.calls == []


async def test_long_texts_are_cut_and_empty_ones_sent_as_a_space(
    api: tuple[FakeEmbeddings, str],
) -> None:
    fake, url = api
    e = embedder(url, max_chars=10)
    try:
        vectors = await e.embed(["green tea leaves steeped", ""])
    finally:
        await e.aclose()
    assert fake.calls[-1].inputs == ["green tea ", " "]  # OpenAI refuses ""
    assert vectors == [hash_vector("green tea ", DIMS), [0.0] * DIMS]


async def test_a_base64_answer_is_read(api: tuple[FakeEmbeddings, str]) -> None:
    fake, url = api
    fake.base64 = True
    e = embedder(url)
    try:
        (vector,) = await e.embed(["oolong tea"])
    finally:
        await e.aclose()
    assert vector == pytest.approx(hash_vector("oolong tea", DIMS), abs=1e-6)


@pytest.mark.parametrize("status", [429, 500, 503])
async def test_retries_then_success(api: tuple[FakeEmbeddings, str], status: int) -> None:
    fake, url = api
    fake.fail(2, status)
    sleeps = Sleeps()
    e = embedder(url, sleep=sleeps, backoff_s=1.0)
    try:
        assert await e.embed(["tea"]) == [hash_vector("tea", DIMS)]
    finally:
        await e.aclose()
    assert len(fake.calls) == 3
    # exponential backoff with jitter: half to all of 1 s, then of 2 s
    first, second = sleeps.waits
    assert 0.5 <= first <= 1.0
    assert 1.0 <= second <= 2.0


async def test_retry_after_is_honoured_up_to_a_cap(api: tuple[FakeEmbeddings, str]) -> None:
    fake, url = api
    fake.fail(1, 429, retry_after="7")
    fake.fail(1, 503, retry_after="3600")
    sleeps = Sleeps()
    e = embedder(url, sleep=sleeps)
    try:
        await e.embed(["tea"])
    finally:
        await e.aclose()
    assert sleeps.waits == [7.0, MAX_RETRY_AFTER_S]


async def test_retries_exhausted_is_upstream_without_the_key_or_texts(
    api: tuple[FakeEmbeddings, str], caplog: pytest.LogCaptureFixture
) -> None:
    fake, url = api
    fake.fail(3, 500)
    secret_text = "my private diary entry"
    caplog.set_level(logging.DEBUG)
    e = embedder(url)
    try:
        with pytest.raises(Upstream, match=r"HTTP 500 \(after 3 attempts\)") as failed:
            await e.embed([secret_text])
    finally:
        await e.aclose()
    assert len(fake.calls) == 3
    assert fake.calls[-1].authorization == f"Bearer {EMBEDDINGS_KEY}"  # it was sent
    for shown in (failed.value.detail, str(failed.value), caplog.text):
        assert EMBEDDINGS_KEY not in shown
        assert secret_text not in shown
    assert "the embeddings API: HTTP 500; attempt 1 of 3" in caplog.text


async def test_a_refused_key_fails_at_once_without_the_key(
    api: tuple[FakeEmbeddings, str], caplog: pytest.LogCaptureFixture
) -> None:
    fake, url = api
    wrong = "sk-not-the-key-0123456789abcdef0123"
    caplog.set_level(logging.DEBUG)
    e = embedder(url, key=wrong)
    try:
        with pytest.raises(Upstream, match=r"refused the key \(HTTP 401\)") as failed:
            await e.embed(["tea"])
    finally:
        await e.aclose()
    assert len(fake.calls) == 1  # not retried
    assert fake.calls[0].authorization == f"Bearer {wrong}"
    assert wrong not in failed.value.detail
    assert wrong not in caplog.text


async def test_no_key_no_authorization_header(api: tuple[FakeEmbeddings, str]) -> None:
    fake, url = api
    fake.key = None  # a local server without keys
    e = embedder(url, key=None)
    try:
        await e.embed(["tea"])
    finally:
        await e.aclose()
    assert fake.calls[-1].authorization is None


async def test_wrong_dimensions_are_upstream(api: tuple[FakeEmbeddings, str]) -> None:
    fake, url = api
    fake.wrong_dimensions = True
    e = embedder(url)
    try:
        with pytest.raises(Upstream, match=f"vectors of {DIMS - 1} dimensions where {DIMS}"):
            await e.embed(["tea"])
    finally:
        await e.aclose()
    assert len(fake.calls) == 1


@pytest.mark.parametrize(
    ("status", "words"),
    [(400, "answered HTTP 400: check"), (307, r"a redirect \(HTTP 307\)")],
)
async def test_other_statuses_fail_at_once(
    api: tuple[FakeEmbeddings, str], status: int, words: str
) -> None:
    fake, url = api
    fake.fail(1, status)
    e = embedder(url)
    try:
        with pytest.raises(Upstream, match=words):
            await e.embed(["tea"])
    finally:
        await e.aclose()
    assert len(fake.calls) == 1


async def test_no_answer_in_time_is_tried_again(api: tuple[FakeEmbeddings, str]) -> None:
    fake, url = api
    fake.stall_s = 2.0  # the first request only
    sleeps = Sleeps()
    e = embedder(url, sleep=sleeps, timeout_s=0.3)
    try:
        assert await e.embed(["tea"]) == [hash_vector("tea", DIMS)]
    finally:
        await e.aclose()
    assert len(fake.calls) == 2
    assert len(sleeps.waits) == 1


async def test_an_answer_over_the_cap_is_refused(api: tuple[FakeEmbeddings, str]) -> None:
    fake, url = api
    e = embedder(url, max_answer_bytes=200)
    try:
        with pytest.raises(Upstream, match="answered more than 200 bytes"):
            await e.embed(["tea"])  # 32 floats, 2 objects: about 300 bytes
    finally:
        await e.aclose()
    assert len(fake.calls) == 1


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (b"<html>gateway</html>", "answered something that is not embeddings"),
        (b'{"data": [{"index": 0, "embedding": [0.5]}]}', "answered 1 embeddings for 2 texts"),
        (
            b'{"data": [{"index": 0, "embedding": [0.5]}, {"index": 0, "embedding": [0.5]}]}',
            "answered 2 embeddings for 2 texts",
        ),
        (
            b'{"data": [{"index": 0, "embedding": "!!"}, {"index": 1, "embedding": "AAAA"}]}',
            "not base64",
        ),
    ],
)
async def test_an_answer_of_the_wrong_shape_is_upstream(
    api: tuple[FakeEmbeddings, str], raw: bytes, words: str
) -> None:
    fake, url = api
    fake.raw = raw
    e = embedder(url)
    try:
        with pytest.raises(Upstream, match=words):
            await e.embed(["green tea", "black tea"])
    finally:
        await e.aclose()
    assert len(fake.calls) == 1


async def test_a_server_that_is_not_there_is_retried_then_upstream() -> None:
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sleeps = Sleeps()
    e = embedder(f"http://127.0.0.1:{port}/v1", sleep=sleeps)
    try:
        with pytest.raises(Upstream, match=r"could not reach 127.0.0.1 \(after 3 attempts\)"):
            await e.embed(["tea"])
    finally:
        await e.aclose()
    assert len(sleeps.waits) == 2


async def test_the_guard_refuses_a_name_that_resolves_to_loopback_without_contact(
    api: tuple[FakeEmbeddings, str], caplog: pytest.LogCaptureFixture
) -> None:
    fake, url = api
    port = url.rsplit(":", 1)[1].split("/")[0]
    guard = OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"emb.example.test": ["127.0.0.1"]})
    )
    sleeps = Sleeps()
    e = OpenAIEmbedder(
        f"https://emb.example.test:{port}/v1", EMBEDDINGS_KEY, "m", DIMS, guard, sleep=sleeps
    )
    try:
        with pytest.raises(Upstream, match="refused by the outbound guard") as failed:
            await e.embed(["tea"])
    finally:
        await e.aclose()
    assert fake.calls == []  # refused before connecting
    assert sleeps.waits == []  # a refusal is not retried
    assert "emb.example.test resolves to a loopback address" in failed.value.detail
    assert EMBEDDINGS_KEY not in caplog.text


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("https://10.0.0.1/v1", "10.0.0.1 is a private address"),
        ("http://api.example.test/v1", "plain http:// is refused"),
    ],
)
async def test_the_guard_refuses_a_private_or_plain_url_before_any_connection(
    url: str, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    # the early check is pure (no DNS, no connection): nothing is listening on
    # these addresses and the test does not wait for a connect timeout
    guard = OutboundGuard(allow_private_network=False, resolver=fake_dns({}))
    e = OpenAIEmbedder(url, EMBEDDINGS_KEY, "m", DIMS, guard)
    try:
        with pytest.raises(Upstream, match="refused by the outbound guard") as failed:
            await e.embed(["tea"])
    finally:
        await e.aclose()
    assert reason in failed.value.detail
    assert "outbound call refused by the outbound guard" in caplog.text


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    texts=st.lists(st.text(max_size=40), max_size=12),
    batch=st.integers(1, 5),
)
def test_any_texts_any_batch_one_vector_each_in_order(
    server: tuple[FakeEmbeddings, str], texts: list[str], batch: int
) -> None:
    fake, url = server
    fake.reset()

    async def run() -> list[list[float]]:
        e = embedder(url, batch=batch)
        try:
            return await e.embed(texts)
        finally:
            await e.aclose()

    vectors = asyncio.run(run())
    assert vectors == [hash_vector(t or " ", DIMS) for t in texts]
    assert [len(c.inputs) for c in fake.calls] == [
        min(batch, len(texts) - i) for i in range(0, len(texts), batch)
    ]


# --- the operator's settings ------------------------------------------------------


def test_embeddings_are_configured_by_their_url() -> None:
    assert Settings.from_env({}).embeddings_url is None
    key = "sk-embeddings-key-from-the-environment-0123"
    s = Settings.from_env(
        {"AGENTSVC_EMBEDDINGS_URL": "https://api.openai.com/v1", "AGENTSVC_EMBEDDINGS_API_KEY": key}
    )
    assert (s.embeddings_url, s.embeddings_api_key, s.embeddings_model) == (
        "https://api.openai.com/v1",
        key,
        "text-embedding-3-small",
    )
    assert (s.embeddings_dimensions, s.embeddings_send_dimensions) == (1536, False)
    assert key not in repr(s)
    s = Settings.from_env(
        {
            "AGENTSVC_EMBEDDINGS_URL": "http://127.0.0.1:11434/v1",
            "AGENTSVC_EMBEDDINGS_MODEL": "nomic-embed-text",
            "AGENTSVC_EMBEDDINGS_DIMENSIONS": "768",
        }
    )
    assert (s.embeddings_model, s.embeddings_dimensions, s.embeddings_send_dimensions) == (
        "nomic-embed-text",
        768,
        True,
    )
    large = {"AGENTSVC_EMBEDDINGS_URL": "https://x.example/v1"}
    large["AGENTSVC_EMBEDDINGS_MODEL"] = "text-embedding-3-large"
    assert Settings.from_env(large).embeddings_dimensions == 3072


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"AGENTSVC_EMBEDDINGS_DIMENSIONS": "0"}, "AGENTSVC_EMBEDDINGS_DIMENSIONS must be between"),
        ({"AGENTSVC_EMBEDDINGS_DIMENSIONS": "4001"}, "AGENTSVC_EMBEDDINGS_DIMENSIONS must be"),
        ({"AGENTSVC_EMBEDDINGS_DIMENSIONS": "many"}, "AGENTSVC_EMBEDDINGS_DIMENSIONS must be"),
        ({"AGENTSVC_EMBEDDINGS_URL": "api.example/v1"}, "AGENTSVC_EMBEDDINGS_URL must be"),
        (
            {"AGENTSVC_EMBEDDINGS_URL": "https://x.example/v1", "AGENTSVC_EMBEDDINGS_MODEL": "m"},
            "AGENTSVC_EMBEDDINGS_MODEL=m needs AGENTSVC_EMBEDDINGS_DIMENSIONS",
        ),
    ],
)
def test_embeddings_settings_that_cannot_work_stop_start_up(
    env: dict[str, str], named: str
) -> None:
    with pytest.raises(SettingsError) as stopped:
        Settings.from_env(env)
    assert named in str(stopped.value)
