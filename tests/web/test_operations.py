"""Operations (docs/operations.md): /readyz, /metrics, X-Request-Id and log lines; and CORS
(docs/api.md, "Errors")."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from typing import Any

import msgspec
import pytest
from litestar.testing import TestClient
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from agentsvc_adapters.llm import LocalModel
from agentsvc_core.ports import ChatModel, ModelEvent, ModelRequest
from agentsvc_web.app import create_app
from agentsvc_web.bootstrap import build_services
from agentsvc_web.logs import RequestIdFilter
from agentsvc_web.settings import Settings
from tests.sse import Event, parse_lines
from tests.web.conftest import memory_only
from tests.web.harness import Harness, SharedHarness
from tests.web.shared import shared_client
from tests.web.test_turn import send, setup

H = dict[str, str]
ORIGIN = "https://app.example.com"
TOKEN = "metrics-token-0123456789abcdef"


def with_settings(settings: Settings, **changes: Any) -> Settings:
    return msgspec.structs.replace(settings, **changes)


def scrape(c: Any, **headers: str) -> dict[str, Any]:
    r = c.get("/metrics", headers=headers)
    assert r.status_code == 200, r.text
    return {f.name: f for f in text_string_to_metric_families(r.text)}


def samples(families: dict[str, Any], name: str) -> list[Sample]:
    return list(families[name].samples)


# --- /readyz --------------------------------------------------------------------------


def test_readyz_answers_ok_on_working_storage(client: TestClient[Any]) -> None:
    r = client.get("/readyz")
    assert (r.status_code, r.json()) == (200, {"ok": True})


def test_readyz_is_503_not_ready_while_the_process_drains(settings: Settings) -> None:
    services = build_services(settings)
    with TestClient(create_app(settings, services)) as c:
        assert c.get("/readyz").status_code == 200
        services.readiness.drain()  # what SIGTERM does first (agentsvc_web.shutdown)
        r = c.get("/readyz")
        assert r.status_code == 503
        assert r.json() == {"error": "NOT_READY", "detail": "the service is shutting down"}
        assert c.get("/healthz").status_code == 200  # alive all the same


def test_readyz_is_503_when_the_database_is_not_migrated(pg_admin_url: str) -> None:
    from tests.pg import fresh_database  # noqa: PLC0415

    with fresh_database(pg_admin_url) as url:
        settings = Settings(storage="postgres", database_url=url, migrate_on_start=False)
        with TestClient(create_app(settings)) as c:
            r = c.get("/readyz")
            assert r.status_code == 503
            assert r.json()["error"] == "NOT_READY"
            assert url not in r.text


@memory_only
def test_probes_need_no_credentials_and_cost_no_rate_limit_budget(settings: Settings) -> None:
    tight = with_settings(settings, rate_limit_per_address_per_min=2)
    with TestClient(create_app(tight)) as c:
        for _ in range(6):
            assert c.get("/readyz").status_code == 200
            assert c.get("/healthz").status_code == 200


@memory_only
def test_readyz_is_public_in_the_openapi_document_and_metrics_is_not_in_it(
    client: TestClient[Any],
) -> None:
    doc = client.get("/schema/openapi.json").json()
    readyz = doc["paths"]["/readyz"]["get"]
    assert readyz["security"] == []
    assert "503" in readyz["responses"]
    assert "/metrics" not in doc["paths"]


# --- /metrics -------------------------------------------------------------------------


def request_counts(families: dict[str, Any]) -> Counter[tuple[str, str, str]]:
    return Counter(
        {
            (s.labels["route"], s.labels["method"], s.labels["status"]): s.value
            for s in samples(families, "agentsvc_http_requests")
        }
    )


@memory_only
def test_requests_are_counted_by_route_template_method_and_status(
    client: TestClient[Any], auth: H
) -> None:
    # the app is shared with other tests (tests/web/shared.py): count what this one adds
    before = request_counts(scrape(client))
    a = client.post("/api/agents", json={"name": "M"}, headers=auth).json()
    for _ in range(2):
        assert client.get(f"/api/agents/{a['id']}", headers=auth).status_code == 200
    client.get("/api/agents/00000000-0000-0000-0000-000000000000", headers=auth)
    client.get("/no/such/route")
    families = scrape(client)
    counts = request_counts(families)
    counts.subtract(before)
    assert counts[("/api/agents/{agent_id}", "GET", "200")] == 2
    assert counts[("/api/agents/{agent_id}", "GET", "404")] == 1
    assert counts[("/api/agents", "POST", "201")] == 1
    assert counts[("unmatched", "GET", "404")] == 1
    text = client.get("/metrics").text
    assert a["id"] not in text  # never the raw path
    assert a["org_id"] not in text
    durations = {
        s.labels["route"]
        for s in samples(families, "agentsvc_http_request_duration_seconds")
        if s.name.endswith("_count")
    }
    assert "/api/agents/{agent_id}" in durations


@memory_only
def test_an_unknown_method_is_one_label(client: TestClient[Any]) -> None:
    def others(families: dict[str, Any]) -> float:
        counted = samples(families, "agentsvc_http_requests")
        return float(sum(s.value for s in counted if s.labels["method"] == "other"))

    before = others(scrape(client))  # the app is shared with other tests
    for method in ("BREW", "WHEN"):
        client.request(method, "/healthz")
    families = scrape(client)
    methods = {s.labels["method"] for s in samples(families, "agentsvc_http_requests")}
    assert "BREW" not in methods
    assert "WHEN" not in methods
    assert others(families) == before + 2


@memory_only
def test_each_app_has_its_own_registry(settings: Settings) -> None:
    with TestClient(create_app(settings)) as first, TestClient(create_app(settings)) as second:
        first.get("/healthz")
        first.get("/healthz")
        counted = [
            s.value
            for s in samples(scrape(second), "agentsvc_http_requests")
            if s.labels["route"] == "/healthz"
        ]
        assert counted == []


@memory_only
def test_metrics_token_is_required_when_set(settings: Settings) -> None:
    with TestClient(create_app(with_settings(settings, metrics_token=TOKEN))) as c:
        for headers in (
            {},
            {"Authorization": "Bearer wrong"},
            {"Authorization": f"Basic {TOKEN}"},
            {"Authorization": f"Bearer {TOKEN}x"},
        ):
            r = c.get("/metrics", headers=headers)
            assert r.status_code == 401, headers
            assert r.json()["error"] == "UNAUTHORIZED"
            assert TOKEN not in r.text
        r = c.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
        assert r.status_code == 200
        assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"


@memory_only
def test_an_api_key_does_not_open_a_protected_metrics(settings: Settings, auth: H) -> None:
    with TestClient(create_app(with_settings(settings, metrics_token=TOKEN))) as c:
        assert c.get("/metrics", headers=auth).status_code == 401


def test_the_metrics_token_is_hidden_from_reprs() -> None:
    s = Settings.from_env({"AGENTSVC_METRICS_TOKEN": TOKEN})
    assert s.metrics_token == TOKEN
    assert TOKEN not in repr(s)


def test_database_pool_use_is_read_at_scrape_time(
    client: TestClient[Any], settings: Settings
) -> None:
    families = scrape(client)
    if settings.storage == "memory":
        assert not [n for n in families if n.startswith("agentsvc_db_pool")]
        return
    assert samples(families, "agentsvc_db_pool_max")[0].value == settings.db_pool_max
    assert samples(families, "agentsvc_db_pool_size")[0].value >= 1
    assert samples(families, "agentsvc_db_pool_requests")[0].value >= 1


def test_outbound_refusals_are_counted_by_reason_and_logged_once(
    settings: Settings, auth: H, caplog: pytest.LogCaptureFixture
) -> None:
    """A registry on loopback without AGENTSVC_ALLOW_PRIVATE_NETWORK: the guard
    refuses the connection (nothing is sent), counts it and logs it once."""
    caplog.set_level(logging.INFO, "agentsvc")
    guarded = with_settings(settings, mcp_registry_url="https://127.0.0.1:1")
    with TestClient(create_app(guarded)) as c:

        def refused() -> float:
            return sum(
                s.value
                for s in samples(scrape(c), "agentsvc_outbound_failures")
                if s.labels["reason"] == "loopback"
            )

        before = refused()
        r = c.get("/api/mcp-registry/search", params={"q": "x"}, headers=auth)
        assert r.json()["error"] == "REGISTRY_UNAVAILABLE"
        assert refused() == before + 1
    lines = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert lines[0].levelno == logging.WARNING
    assert lines[0].name == "agentsvc.outbound"
    assert "127.0.0.1 resolves to a loopback address" in lines[0].getMessage()


def test_open_streams_are_a_gauge(harness: SharedHarness, auth: H) -> None:
    with harness.live(auth) as c:
        # the server is shared with other tests, whose streams have ended
        before = samples(scrape(c), "agentsvc_sse_streams_open")[0].value
        _, t = setup(c)
        with c.stream("POST", f"/api/threads/{t['id']}/messages", json={"content": "slowly"}) as r:
            lines = r.iter_lines()
            for item in parse_lines(lines):
                if isinstance(item, Event) and item.event == "token":
                    break
            during = samples(scrape(c), "agentsvc_sse_streams_open")[0].value
            c.post(f"/api/threads/{t['id']}/stop")
            for _ in lines:
                pass
        assert during == before + 1
        assert samples(scrape(c), "agentsvc_sse_streams_open")[0].value == before


# --- X-Request-Id and log lines ---------------------------------------------------------


@memory_only
@pytest.mark.parametrize(
    "sent",
    ["abc", "req-42", "a.b_c:d-e", "x" * 128, "0123456789ABCDEFabcdef"],
)
def test_a_valid_client_request_id_comes_back(client: TestClient[Any], sent: str) -> None:
    assert client.get("/healthz", headers={"X-Request-Id": sent}).headers["x-request-id"] == sent


@memory_only
@pytest.mark.parametrize(
    "sent", ["", "x" * 129, "has space", "semi;colon", "ünïcode".encode(), "a/b", "<script>"]
)
def test_an_invalid_client_request_id_is_replaced(
    client: TestClient[Any], sent: str | bytes
) -> None:
    # bytes (non-ASCII, which a str value cannot carry) under a str name: httpx takes
    # the mix, its types do not
    headers = {"X-Request-Id": sent}
    got = client.get("/healthz", headers=headers).headers["x-request-id"]  # type: ignore[arg-type]
    assert got != (sent.decode("latin-1") if isinstance(sent, bytes) else sent)
    assert len(got) == 24
    int(got, 16)


@memory_only
def test_every_answer_has_a_fresh_request_id(client: TestClient[Any], auth: H) -> None:
    answers = [
        client.get("/healthz"),
        client.get("/healthz"),
        client.get("/api/agents"),  # 401
        client.get("/no/such/route"),  # 404
        client.delete("/healthz"),  # 405
        client.get("/schema/openapi.json"),
        client.options("/api/agents", headers=auth),
    ]
    ids = [r.headers["x-request-id"] for r in answers]
    assert all(ids)
    assert len(set(ids)) == len(ids)


class LoggingModel(ChatModel):
    """The local model, logging a line when the reply task calls it."""

    provider = "local"

    def __init__(self) -> None:
        self.inner = LocalModel(0.0)

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        logging.getLogger("agentsvc.test.model").warning("the model was called")
        async for event in self.inner.stream(request):
            yield event


class Kept(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.addFilter(RequestIdFilter())
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def kept() -> Iterator[Kept]:
    handler = Kept()
    logger = logging.getLogger("agentsvc")
    logger.addHandler(handler)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)


def test_log_lines_of_the_reply_task_name_the_request(
    settings: Settings, auth: H, kept: Kept
) -> None:
    harness = Harness(settings)  # its own: it changes the model, and reads start-up's lines
    harness.model.inner = LoggingModel()  # type: ignore[assignment]
    with harness.client() as c:
        c.headers.update(auth)
        _, t = setup(c)
        r = c.post(
            f"/api/threads/{t['id']}/messages",
            json={"content": "hi"},
            headers={"X-Request-Id": "turn-req-1"},
        )
        assert r.headers["x-request-id"] == "turn-req-1"
        send(c, t["id"], content="again")  # another request, another id
    called = [rec for rec in kept.records if rec.name == "agentsvc.test.model"]
    assert len(called) == 2
    assert called[0].request_id == "turn-req-1"  # type: ignore[attr-defined]
    assert called[1].request_id not in (None, "turn-req-1")  # type: ignore[attr-defined]
    outside = [rec for rec in kept.records if rec.getMessage().startswith("bootstrap API key")]
    assert outside
    assert outside[0].request_id is None  # type: ignore[attr-defined]


# --- CORS -------------------------------------------------------------------------------


def cors_headers(r: Any) -> dict[str, str]:
    return {k.lower(): v for k, v in r.headers.items() if k.lower().startswith("access-control-")}


@pytest.fixture
def cors(request: pytest.FixtureRequest, settings: Settings) -> Iterator[TestClient[Any]]:
    allowed = with_settings(settings, cors_origins=(ORIGIN, "http://localhost:3000"))
    with shared_client(request, allowed) as c:
        yield c


@memory_only
def test_no_cors_headers_without_configured_origins(client: TestClient[Any], auth: H) -> None:
    preflight = client.options(
        "/api/agents", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"}
    )
    assert cors_headers(preflight) == {}
    assert preflight.headers["allow"] == "GET, OPTIONS, POST"
    assert cors_headers(client.get("/api/agents", headers={**auth, "Origin": ORIGIN})) == {}


@memory_only
def test_a_preflight_from_an_allowed_origin_needs_no_credentials(
    cors: TestClient[Any],
) -> None:
    r = cors.options(
        "/api/threads/00000000-0000-0000-0000-000000000000/messages",
        headers={
            "Origin": ORIGIN,
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization, content-type, idempotency-key",
        },
    )
    assert r.status_code == 204
    assert cors_headers(r) == {
        "access-control-allow-origin": ORIGIN,
        "access-control-allow-methods": "DELETE, GET, PATCH, POST, PUT",
        "access-control-allow-headers": (
            "Authorization, Content-Type, Idempotency-Key, Last-Event-ID, X-Request-Id"
        ),
        "access-control-max-age": "600",
    }
    assert r.headers["vary"] == "Origin"
    assert r.headers["x-request-id"]


@memory_only
def test_preflights_cost_no_rate_limit_budget(settings: Settings) -> None:
    tight = with_settings(settings, cors_origins=(ORIGIN,), rate_limit_per_address_per_min=1)
    with TestClient(create_app(tight)) as c:
        for _ in range(4):
            r = c.options(
                "/api/agents", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "GET"}
            )
            assert r.status_code == 204


@memory_only
def test_answers_to_an_allowed_origin_carry_cors_headers(cors: TestClient[Any], auth: H) -> None:
    for r in (
        cors.get("/api/agents", headers={**auth, "Origin": ORIGIN}),
        cors.get("/api/agents", headers={"Origin": ORIGIN}),  # 401
        cors.get("/nowhere", headers={"Origin": ORIGIN}),  # 404
    ):
        assert cors_headers(r) == {
            "access-control-allow-origin": ORIGIN,
            "access-control-expose-headers": "X-Request-Id, Idempotent-Replayed",
        }, r.status_code
        assert r.headers["vary"] == "Origin"


@memory_only
def test_a_streamed_reply_carries_cors_headers(settings: Settings, auth: H) -> None:
    harness = Harness(with_settings(settings, cors_origins=(ORIGIN,)))
    with harness.live({**auth, "Origin": ORIGIN}) as c:
        _, t = setup(c)
        r = c.post(f"/api/threads/{t['id']}/messages", json={"content": "hi"})
        assert r.headers["content-type"].startswith("text/event-stream")
        assert r.headers["access-control-allow-origin"] == ORIGIN
        assert r.headers["access-control-expose-headers"] == "X-Request-Id, Idempotent-Replayed"


@memory_only
def test_a_disallowed_origin_gets_no_cors_headers(cors: TestClient[Any], auth: H) -> None:
    evil = "https://evil.example"
    preflight = cors.options(
        "/api/agents", headers={"Origin": evil, "Access-Control-Request-Method": "POST"}
    )
    assert cors_headers(preflight) == {}
    assert preflight.headers["allow"] == "GET, OPTIONS, POST"  # our OPTIONS answer
    assert cors_headers(cors.get("/api/agents", headers={**auth, "Origin": evil})) == {}
    assert cors_headers(cors.get("/api/agents", headers={**auth, "Origin": "null"})) == {}


@memory_only
def test_an_options_request_that_is_no_preflight_keeps_its_allow(cors: TestClient[Any]) -> None:
    r = cors.options("/api/agents", headers={"Origin": ORIGIN})
    assert r.headers["allow"] == "GET, OPTIONS, POST"
    assert r.headers["access-control-allow-origin"] == ORIGIN


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ()),
        ("https://a.example", ("https://a.example",)),
        (
            " https://A.example/ , http://localhost:3000 ",
            ("https://a.example", "http://localhost:3000"),
        ),
        ("*", ("*",)),
    ],
)
def test_cors_origins_setting(raw: str, expected: tuple[str, ...]) -> None:
    assert Settings.from_env({"AGENTSVC_CORS_ORIGINS": raw}).cors_origins == expected


@pytest.mark.parametrize(
    "raw", ["https://a.example/app", "a.example", "ftp://a.example", "https://"]
)
def test_bad_cors_origins_are_a_clear_error(raw: str) -> None:
    from agentsvc_web.settings import SettingsError  # noqa: PLC0415

    with pytest.raises(SettingsError, match="AGENTSVC_CORS_ORIGINS"):
        Settings.from_env({"AGENTSVC_CORS_ORIGINS": raw})


def test_log_format_setting() -> None:
    from agentsvc_web.settings import SettingsError  # noqa: PLC0415

    assert Settings.from_env({}).log_format == "text"
    assert Settings.from_env({"AGENTSVC_LOG_FORMAT": "json"}).log_format == "json"
    with pytest.raises(SettingsError, match="AGENTSVC_LOG_FORMAT"):
        Settings.from_env({"AGENTSVC_LOG_FORMAT": "xml"})
