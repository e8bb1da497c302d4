"""Apps that many web tests share: each started once per configuration and process.

Building an app costs about 0.35 s of CPU (Litestar reads the signature of every
route handler) and starting it on PostgreSQL opens a pool; the web tests did both
for every test. Now the ``client`` and ``harness`` fixtures (conftest.py) hand out
clients of an app started on first use and kept until the end of the session (per
pytest-xdist worker, or per run without it), one per configuration: the settings
without the bootstrap key and organization, which are each test's own.

What keeps a test apart from the others on the same app:

- its own organization with its own API key, made on the running app the way the
  bootstrap key is (``api_keys.ensure``): everything it reads is its organization's;
- its own client address (``10.x.y.z`` through the test client; a ``127.x.y.z``
  source address against a live server), so the per-address request budget and the
  failed-authentication budget start full;
- when it ends, the replies it started finish or are interrupted as when its own
  app stopped (``conversation.shutdown``, after which the service takes sends
  again), and the test doubles' records are cleared before the next test.

What stays the process's: ``/metrics`` counters (tests on a shared app compare them
before and after), and whatever a test changes on the app, its services or its
doubles; a test that does that builds its own app (``create_app``, ``Harness``).
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Coroutine, Hashable, Iterator
from contextlib import ExitStack, contextmanager
from typing import Any, TypeVar, cast

import httpx
import msgspec
import pytest
from httpx import Request
from litestar import Litestar
from litestar.testing import TestClient
from litestar.testing.transport import TestClientTransport

from agentsvc_web.app import create_app
from agentsvc_web.bootstrap import Services, build_services
from agentsvc_web.settings import Settings
from tests.web.live import serve

T = TypeVar("T")

_numbers = itertools.count(1)


def own_address(first: int) -> str:
    """A client address no other test of this process has (``first.x.y.z``)."""
    n = next(_numbers)
    return f"{first}.{n >> 16 & 255}.{n >> 8 & 255}.{n & 255}"


def configuration(settings: Settings) -> Settings:
    """What an app shares with the tests of the same configuration: the settings
    without the bootstrap key and organization (each test makes its own)."""
    return msgspec.structs.replace(settings, bootstrap_api_key=None, bootstrap_org="default")


class _FromAddress(TestClientTransport[Any]):
    """The test client's transport, its requests coming from ``address``."""

    def __init__(self, client: Any, address: str) -> None:
        super().__init__(client=client, raise_server_exceptions=True)
        self.address = address

    def parse_request(self, request: Request) -> dict[str, Any]:
        scope = super().parse_request(request)
        scope["client"] = (self.address, 50000)
        return scope


class SharedClient(TestClient[Litestar]):
    """A test client of an app already started by another one (its lifespan
    running in that one's event loop), from an address of its own. Entering and
    leaving it neither starts nor stops the app."""

    def __init__(self, started: TestClient[Litestar], address: str) -> None:
        super().__init__(started.app, timeout=30)
        # (httpx types its transport as its own base class; Litestar's is not one)
        self._transport = _FromAddress(self, address)  # type: ignore[assignment]
        self.blocking_portal = started.blocking_portal

    def __enter__(self) -> SharedClient:
        return self

    def __exit__(self, *args: object) -> None:
        return None  # (Litestar's transport has nothing to close)


class Started:
    """One app, started: through a test client's event loop, or (``live``) on a
    real server in a thread. ``call`` runs a coroutine function of its services on
    the app's own event loop (a PostgreSQL pool belongs to the loop that opened it)."""

    def __init__(self, app: Litestar, services: Services, *, live: bool = False) -> None:
        self.services = services
        self._stack = ExitStack()
        self._loop: asyncio.AbstractEventLoop | None = None
        self.url = ""
        self._outer: TestClient[Litestar] | None = None
        if live:

            def keep_loop() -> None:
                self._loop = asyncio.get_running_loop()

            app.on_startup.append(keep_loop)
            self.url = self._stack.enter_context(serve(app))
        else:
            self._outer = self._stack.enter_context(TestClient(app, timeout=30))

    def call(self, fn: Callable[..., Coroutine[Any, Any, T]], *args: Any) -> T:
        if self._outer is not None:
            return cast("T", self._outer.blocking_portal.call(fn, *args))
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(fn(*args), self._loop).result(timeout=60)

    def begin(self, org_id: str, key: str) -> None:
        """The test's organization and its API key, as the bootstrap key is made."""
        self.call(self.services.api_keys.ensure, org_id, key)

    def settle(self) -> None:
        """The replies the test started finish (or are interrupted), as when its own
        app stopped; then the service takes sends again."""
        self.call(self.services.conversation.shutdown, self.services.settings.shutdown_grace_s)

    def client(self) -> SharedClient:
        assert self._outer is not None, "a live app has no test client: use http()"
        return SharedClient(self._outer, own_address(10))

    def http(self, headers: dict[str, str]) -> httpx.Client:
        """An HTTP client of the live server, from a loopback address of its own."""
        transport = httpx.HTTPTransport(local_address=own_address(127))
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, transport=transport)

    def close(self) -> None:
        self._stack.close()


class Apps:
    """The started apps of this process, by key; each stops at the end of the
    session, before the session's database is dropped (it was made first)."""

    def __init__(self) -> None:
        self._started: dict[Hashable, Started] = {}

    def get(
        self, request: pytest.FixtureRequest, key: Hashable, start: Callable[[], Started]
    ) -> Started:
        if key not in self._started:
            started = self._started[key] = start()
            # finalizers of the session run last in, first out: this one before the
            # one of ``pg_url`` (set up before this app's settings could name it)
            request.session.addfinalizer(started.close)
        return self._started[key]


APPS = Apps()


def started_app(request: pytest.FixtureRequest, settings: Settings) -> Started:
    """The started app (no test doubles) of ``settings``' configuration."""
    config = configuration(settings)

    def start() -> Started:
        services = build_services(config)
        return Started(create_app(config, services), services)

    return APPS.get(request, ("app", config), start)


@contextmanager
def shared_client(request: pytest.FixtureRequest, settings: Settings) -> Iterator[SharedClient]:
    """For one test: a client of the started app of ``settings``' configuration,
    from an address of its own, with ``settings``' bootstrap key and organization
    made on the app (``auth``, ``org_id``)."""
    assert settings.bootstrap_api_key is not None
    started = started_app(request, settings)
    with (
        one_test(started, settings.bootstrap_org, settings.bootstrap_api_key),
        started.client() as c,
    ):
        yield c


@contextmanager
def one_test(started: Started, org_id: str, key: str) -> Iterator[Started]:
    """The app for one test: its organization made before, its replies settled after."""
    started.begin(org_id, key)
    try:
        yield started
    finally:
        started.settle()
