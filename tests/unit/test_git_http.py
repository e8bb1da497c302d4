"""agentsvc_adapters/git/http.py on its own, over an httpx transport that records
each request and answers as told (no network at all): what a request asks for,
where a credential goes, and how each failure reads and whether it is worth
trying again. The exchanges with a real git server are in
tests/contract/test_git_remote.py and tests/unit/test_skill_sources*.py."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable

import httpx
import pytest

from agentsvc_adapters.git.errors import GitFailure, ServerRefused
from agentsvc_adapters.git.http import Auth, Budget, GitHttp
from agentsvc_adapters.outbound import OutboundGuard, Refused

BASE = "http://127.0.0.1:9/team/skills.git"
Handler = Callable[[httpx.Request], httpx.Response]


class Body(httpx.AsyncByteStream):
    """An answer's body as a server streams it (bytes given as ``content`` would be
    read at once, and the adapter reads the raw stream)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    async def __aiter__(self) -> AsyncIterator[bytes]:
        yield self.data


def git_http(handler: Handler, *, allow_private: bool = True, who: str = "git test") -> GitHttp:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return GitHttp(OutboundGuard(allow_private_network=allow_private), client, who)


def answer(status: int, service: str = "git-upload-pack", body: bytes = b"") -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        kind = f"application/x-{service}-result"
        return httpx.Response(status, headers={"content-type": kind}, stream=Body(body))

    return handle


async def post(http: GitHttp, service: str, auth: Auth | None = None) -> bytes:
    got = bytearray()
    await http.post(BASE, b"0000", service, Budget(1000, "the answer"), got.extend, auth=auth)
    return bytes(got)


def test_a_credential_goes_to_its_own_origin_only() -> None:
    auth = Auth(BASE, "tok")
    sent = auth.headers("http://127.0.0.1:9/another/repo.git")
    assert list(sent) == ["Authorization"]
    assert sent["Authorization"].startswith("Basic ")
    assert auth.headers("HTTP://127.0.0.1:9/x") == sent  # the scheme in any case
    assert auth.headers("http://127.0.0.2:9/team/skills.git") == {}  # another host
    assert auth.headers("http://127.0.0.1:10/team/skills.git") == {}  # another port
    assert auth.headers("https://127.0.0.1:9/team/skills.git") == {}  # another scheme


async def test_requests_ask_for_an_uncompressed_answer_of_the_service() -> None:
    seen: list[httpx.Request] = []
    bodies: list[bytes] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        bodies.append(request.read())
        kind = "text/plain" if request.method == "GET" else "application/x-git-upload-pack-result"
        return httpx.Response(200, headers={"content-type": kind}, stream=Body(b"ok"))

    http = git_http(handle)
    got = bytearray()
    assert await http.get(BASE, Budget(100, "it"), got.extend, git=False) == (BASE, "text/plain")
    assert await post(http, "git-upload-pack") == b"ok"
    fetched, posted = seen
    assert fetched.headers["accept-encoding"] == "identity"
    assert "authorization" not in fetched.headers
    assert (posted.method, str(posted.url)) == ("POST", f"{BASE}/git-upload-pack")
    assert posted.headers["accept-encoding"] == "identity"
    assert posted.headers["accept"] == "application/x-git-upload-pack-result"
    assert posted.headers["content-type"] == "application/x-git-upload-pack-request"
    assert bodies == [b"", b"0000"]


def connect_error(refused: bool) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        if refused:  # as the guard's transport fails a connection it will not make
            raise httpx.ConnectError("refused") from Refused("127.0.0.1 is a private address")
        raise httpx.ConnectError("[Errno 111] Connection refused")

    return handle


@pytest.mark.parametrize("method", ["get", "post"])
async def test_a_network_failure_may_be_tried_again_and_the_guards_refusal_not(
    method: str,
) -> None:
    for refused, text, permanent in [
        (False, "could not reach 127.0.0.1", False),
        (True, "127.0.0.1 is a private address", True),
    ]:
        http = git_http(connect_error(refused))
        with pytest.raises(GitFailure) as exc:
            await (
                http.get(BASE, Budget(100, "it"), bytearray().extend, git=True)
                if method == "get"
                else post(http, "git-upload-pack")
            )
        assert (exc.value.detail, exc.value.permanent) == (text, permanent)


def test_a_url_the_guard_refuses_is_logged_under_the_adapters_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    http = git_http(answer(200), allow_private=False, who="skill source")
    with caplog.at_level(logging.WARNING), pytest.raises(GitFailure) as exc:
        http.check(BASE)
    assert exc.value.detail.startswith("refused by the outbound guard: ")
    assert exc.value.permanent
    (line,) = [r.getMessage() for r in caplog.records if "outbound guard" in r.getMessage()]
    assert "refused by the outbound guard: skill source: " in line


@pytest.mark.parametrize(
    ("status", "credential", "text", "permanent"),
    [
        (403, True, "127.0.0.1 refused the credential (HTTP 403 to the push)", True),
        (401, True, "127.0.0.1 refused the credential (HTTP 401 to the push)", True),
        (403, False, "127.0.0.1 answered HTTP 403 to the push", True),
        (404, True, "127.0.0.1 answered HTTP 404 to the push", True),
        (503, False, "127.0.0.1 answered HTTP 503 to the push", False),
        (429, False, "127.0.0.1 answered HTTP 429 to the push", False),
    ],
)
async def test_a_push_the_server_refuses_says_so(
    status: int, credential: bool, text: str, permanent: bool
) -> None:
    http = git_http(answer(status, "git-receive-pack"))
    auth = Auth(BASE, "tok") if credential else None
    with pytest.raises(GitFailure) as exc:
        await post(http, "git-receive-pack", auth)
    assert type(exc.value) is GitFailure  # only a fetch's refusal is ServerRefused
    assert (exc.value.detail, exc.value.permanent) == (text, permanent)


@pytest.mark.parametrize(
    ("status", "permanent"), [(404, True), (403, True), (500, False), (429, False)]
)
async def test_a_fetch_the_server_refuses_says_so(status: int, permanent: bool) -> None:
    http = git_http(answer(status))
    with pytest.raises(ServerRefused) as exc:
        await post(http, "git-upload-pack", Auth(BASE, "tok"))
    assert exc.value.permanent is permanent
    if status in (401, 403):
        assert exc.value.detail == f"127.0.0.1 refused the credential (HTTP {status} to the fetch)"
    else:
        assert exc.value.detail == f"127.0.0.1 answered HTTP {status} to the fetch"


async def test_a_fetch_answered_as_something_else_is_refused() -> None:
    http = git_http(answer(200, "git-receive-pack"))  # the wrong media type
    with pytest.raises(ServerRefused) as exc:
        await post(http, "git-upload-pack")
    assert (exc.value.detail, exc.value.permanent) == (
        "127.0.0.1 answered HTTP 200 to the fetch",
        True,
    )
