"""The real ``agentsvc serve``: a request must arrive within the read time limit
(slowloris), and the access log never shows OAuth codes and states."""

from __future__ import annotations

import contextlib
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.service import Service, running
from tests.sse import names, parse

pytestmark = pytest.mark.e2e

KEY = "ask_e2e_limits_0123456789abcdefghijklmnop"
BOUND_S = 1  # AGENTSVC_REQUEST_READ_TIMEOUT_S for this module's service
CLOSED_WITHIN_S = BOUND_S + 1.5  # the bound, and slack for a busy machine


@pytest.fixture(scope="module")
def svc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    tmp: Path = tmp_path_factory.mktemp("limits")
    with running(
        {
            "AGENTSVC_STORAGE": "memory",
            "AGENTSVC_BOOTSTRAP_API_KEY": KEY,
            "AGENTSVC_DATA_DIR": str(tmp / "data"),
            "AGENTSVC_REQUEST_READ_TIMEOUT_S": str(BOUND_S),
            "AGENTSVC_LOCAL_SLOW_DELAY_MS": "40",  # a 65-word reply takes about 2.6 s
        },
        args=("--access-log",),
        log=tmp / "service.log",
    ) as service:
        yield service


def connect(svc: Service) -> socket.socket:
    return socket.create_connection(("127.0.0.1", svc.port), timeout=5)


def closed_after(sock: socket.socket, drip: bytes = b"", limit_s: float = 6.0) -> float:
    """Send ``drip`` a byte every 0.2 s (or nothing) and read whatever comes back,
    until the server closes the connection: the seconds that took (infinity if
    it was still open after ``limit_s``)."""
    start = time.monotonic()
    sock.settimeout(0.2)
    while time.monotonic() - start < limit_s:
        try:
            if drip:
                sock.sendall(drip[:1])
                drip = drip[1:]
            if sock.recv(65536) == b"":
                return time.monotonic() - start
        except TimeoutError:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - start
    return float("inf")


def test_a_connection_that_sends_nothing_is_closed(svc: Service) -> None:
    with connect(svc) as s:
        took = closed_after(s)
    assert took < CLOSED_WITHIN_S


def test_a_head_sent_a_byte_at_a_time_is_cut_off(svc: Service) -> None:
    head = b"GET /api/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 200
    with connect(svc) as s:
        took = closed_after(s, drip=head)
    assert took < CLOSED_WITHIN_S


def test_a_body_that_stops_arriving_is_408_and_the_connection_closed(svc: Service) -> None:
    head = (
        "POST /api/agents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {KEY}\r\nContent-Type: application/json\r\n"
        "Content-Length: 200\r\n\r\n"
    )
    with connect(svc) as s:
        s.sendall(head.encode() + b'{"name": "slo')
        start = time.monotonic()
        s.settimeout(CLOSED_WITHIN_S + 1)
        answer = b""
        while chunk := s.recv(65536):
            answer += chunk
        took = time.monotonic() - start
    assert answer.startswith(b"HTTP/1.1 408 "), answer
    assert b'"error":"REQUEST_TIMEOUT"' in answer
    assert b"connection: close" in answer.lower()
    assert BOUND_S * 0.9 <= took < CLOSED_WITHIN_S


def test_a_body_left_unread_after_the_answer_must_still_arrive_in_time(svc: Service) -> None:
    """Refused (401) before its body was read: the rest of the body may not trickle for ever."""
    head = b"POST /api/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 200\r\n\r\n{"
    with connect(svc) as s:
        s.sendall(head)
        took = closed_after(s, drip=b" " * 100)
    assert took < CLOSED_WITHIN_S


def test_requests_on_a_kept_alive_connection_are_unaffected(svc: Service) -> None:
    request = f"GET /api/agents HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {KEY}"
    with connect(svc) as s:
        for _ in range(2):
            s.sendall(f"{request}\r\n\r\n".encode())
            answer = s.recv(65536)
            while not answer.endswith(b"[]"):  # the head and the body may come apart
                answer += s.recv(65536)
            assert answer.startswith(b"HTTP/1.1 200 ")
            time.sleep(BOUND_S + 0.5)  # idle between requests is keep-alive's (5 s), not ours


def test_a_reply_streamed_for_longer_than_the_bound_is_not_cut(svc: Service) -> None:
    with httpx.Client(base_url=svc.url, headers={"Authorization": f"Bearer {KEY}"}) as c:
        agent = c.post("/api/agents", json={"name": "Slow"}).json()
        tid = c.post("/api/threads", json={"agentId": agent["id"]}).json()["id"]
        start = time.monotonic()
        r = c.post(f"/api/threads/{tid}/messages", json={"content": "slowly"}, timeout=30)
        took = time.monotonic() - start
    assert r.status_code == 200
    assert names(parse(r.text))[-1] == "done"
    assert took > BOUND_S * 1.5


def test_the_access_log_never_shows_oauth_codes_or_states(svc: Service) -> None:
    path = f"/api/mcps/{uuid.uuid4()}/oauth/callback"
    query = "code=SECRETCODE&state=SECRETSTATE&error_description=SECRETDESC&x=1"
    httpx.get(f"{svc.url}{path}?{query}", timeout=10)
    httpx.get(f"{svc.url}/healthz?access_token=SECRETTOKEN&api_key=SECRETKEY", timeout=10)
    deadline = time.monotonic() + 5
    while "SECRETKEY" not in svc.output() and "api_key=REDACTED" not in svc.output():
        assert time.monotonic() < deadline, svc.output()
        time.sleep(0.05)
    log = svc.output()
    assert f"{path}?code=REDACTED&state=REDACTED&error_description=REDACTED&x=1" in log
    for secret in ("SECRETCODE", "SECRETSTATE", "SECRETDESC", "SECRETTOKEN", "SECRETKEY"):
        assert secret not in log


def test_the_access_log_never_shows_tokens_under_any_name(svc: Service) -> None:
    """Tokens are found by their shape, not only under the parameter names the log
    knows: a malformed ``token%3D=`` (answered 422), another name, an encoded form."""
    body = "Ab3-dE_fGhIjKlMnOpQr" + uuid.uuid4().hex  # what follows a token's prefix
    runner = uuid.uuid4()
    paths = [
        f"/api/runners/{runner}/button?token%3D=rt_{body}",
        f"/api/runners/{runner}/embed.js?t=rt%5F{body}&token=",
        f"/healthz?x=%61sk_{body}",
    ]
    for path in paths:
        # raw: httpx would normalise the escapes of a URL given as a string
        url = httpx.URL(svc.url).copy_with(raw_path=path.encode())
        assert httpx.get(url, timeout=10).status_code in (200, 404, 422)
    deadline = time.monotonic() + 5
    while svc.output().count(f"/api/runners/{runner}/") < 2 or "/healthz?x=" not in svc.output():
        assert time.monotonic() < deadline, svc.output()
        time.sleep(0.05)
    log = svc.output()
    assert body not in log
    assert f"/api/runners/{runner}/button?token%3D=REDACTED" in log


def test_a_head_larger_than_the_bound_is_431_and_closed(svc: Service) -> None:
    line = b"X-Padding: " + b"a" * 1000 + b"\r\n"
    with connect(svc) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n" + line * 20 + b"\r\n")
        first = s.recv(65536)
        while not first.endswith(b'{"ok":true}'):
            first += s.recv(65536)
        assert first.startswith(b"HTTP/1.1 200 ")  # 20 KB of headers: fine
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        answer = b""
        with contextlib.suppress(ConnectionResetError, BrokenPipeError):
            for _ in range(200):  # 200 KB: refused past 64 KB
                s.sendall(line)
        s.settimeout(5)
        with contextlib.suppress(ConnectionResetError):
            while chunk := s.recv(65536):
                answer += chunk
    assert answer.startswith(b"HTTP/1.1 431 "), answer
    assert b'"error":"HEADERS_TOO_LARGE"' in answer
