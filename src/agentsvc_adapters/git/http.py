"""Git's smart HTTP over the outbound guard's client: what the skill source
(``source.py``) and the git remote (``remote.py``) both speak.

Each URL is checked by the guard's rules before it is requested (``https://``
only and no private address, unless ``AGENTSVC_ALLOW_PRIVATE_NETWORK=true``): a
refusal names the rule, and nothing is sent. The client itself follows no
redirect; ``GitHttp.get`` follows at most ``MAX_REDIRECTS`` (the discovery of a
repository that moved, a URL that points at another), checking each new URL as
it checked the first. The repository's base URL is then where discovery ended,
as git does; a POST follows none.

A credential (``Auth``) is sent as ``Authorization`` only to the origin (scheme,
host and port) it was given for, as curl does under git: a redirect to another
host does not carry it. It is never part of an error's text.

Answers are asked for and read uncompressed (``identity``) and counted against
a ``Budget`` as they arrive: there is no decompression whose output could
outgrow what was counted.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from typing import TypeVar
from urllib.parse import urljoin, urlsplit

import anyio
import httpx

from agentsvc_adapters.git.errors import GitFailure, ServerRefused
from agentsvc_adapters.git.wire import (
    Advertisement,
    PackReceiver,
    parse_advertisement,
    upload_request,
)
from agentsvc_adapters.outbound import OutboundGuard, failure, note_refusal, refusal_of

__all__ = ["MAX_REDIRECTS", "Auth", "Budget", "GitHttp", "host_of", "within"]

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_T = TypeVar("_T")


def host_of(url: str) -> str:
    """The host of a URL the guard accepted (so it has one)."""
    return str(urlsplit(url).hostname)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port


class Auth:
    """A token sent as HTTP Basic (``x-access-token`` and the token, as GitHub
    and GitLab take it), to ``url``'s origin only."""

    def __init__(self, url: str, token: str) -> None:
        self._origin = _origin(url)
        raw = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        self._header = f"Basic {raw}"

    def headers(self, url: str) -> dict[str, str]:
        return {"Authorization": self._header} if _origin(url) == self._origin else {}


class Budget:
    """The bytes still allowed for one exchange's answers."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.left = limit
        self.what = what

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise GitFailure(f"{self.what} is larger than {self.limit} bytes")


async def within(timeout: float, doing: str, work: Awaitable[_T]) -> _T:  # noqa: ASYNC109
    """``work``, or ``GitFailure`` (not permanent) once ``timeout`` seconds have
    passed: "<doing> did not finish within <timeout> s"."""
    try:
        with anyio.fail_after(timeout):
            return await work
    except TimeoutError:
        raise GitFailure(f"{doing} did not finish within {timeout:g} s", permanent=False) from None


def _media_type(resp: httpx.Response) -> str:
    header: str = resp.headers.get("content-type", "")
    return header.partition(";")[0].strip().lower()


async def _read(resp: httpx.Response, budget: Budget, sink: Callable[[bytes], object]) -> None:
    """The raw body into ``sink``, counted against ``budget`` as it arrives."""
    encoding = resp.headers.get("content-encoding", "identity")
    if encoding != "identity":
        raise GitFailure(f"{host_of(str(resp.url))} answered in {encoding!r}, not as asked")
    async for chunk in resp.aiter_raw():
        budget.take(len(chunk))
        sink(chunk)


def _network(exc: httpx.HTTPError, url: str) -> GitFailure:
    """A failed request: the guard's refusal (permanent) or ``could not reach``."""
    return GitFailure(failure(exc, url), permanent=refusal_of(exc) is not None)


def _status(host: str, status: int, sent: bool, *, git: bool, to: str = "") -> GitFailure:
    """An answer that is not the one asked for (``sent``: with a credential)."""
    answered = f"{host} answered HTTP {status}{to}"
    if status in (401, 403) and sent:
        return GitFailure(f"{host} refused the credential (HTTP {status}{to})")
    if git and not to:
        answered = f"not a git repository, or one that needs credentials: {answered}"
    return GitFailure(answered, permanent=status < 500 and status != 429)


class GitHttp:
    """Requests for one adapter over its guarded client; ``who`` names the
    adapter in the guard's log line."""

    def __init__(self, guard: OutboundGuard, client: httpx.AsyncClient, who: str) -> None:
        self._guard = guard
        self._http = client
        self._who = who

    def check(self, url: str) -> None:
        why = self._guard.refusal(url)
        if why:
            note_refusal(f"{self._who}: {why}")
            raise GitFailure(f"refused by the outbound guard: {why}")

    async def get(
        self,
        url: str,
        budget: Budget,
        sink: Callable[[bytes], object],
        *,
        git: bool,
        auth: Auth | None = None,
    ) -> tuple[str, str]:
        """GET ``url``, following redirects (module docstring), its body into
        ``sink``; the URL it was found at and its media type."""
        for _ in range(MAX_REDIRECTS + 1):
            self.check(url)
            credential = auth.headers(url) if auth else {}
            headers = {"Accept-Encoding": "identity", **credential}
            try:
                async with self._http.stream("GET", url, headers=headers) as resp:
                    if resp.status_code in _REDIRECTS:
                        location = resp.headers.get("location", "").strip()
                        if not location:
                            raise GitFailure(
                                f"{host_of(url)} answered a redirect without a Location"
                            )
                        url = urljoin(url, location)
                        continue
                    if resp.status_code != 200:
                        raise _status(host_of(url), resp.status_code, bool(credential), git=git)
                    await _read(resp, budget, sink)
                    return url, _media_type(resp)
            except httpx.HTTPError as exc:
                raise _network(exc, url) from None
        raise GitFailure(f"more than {MAX_REDIRECTS} redirects")

    async def post(
        self,
        url: str,
        body: bytes,
        service: str,
        budget: Budget,
        sink: Callable[[bytes], object],
        *,
        auth: Auth | None = None,
    ) -> None:
        """POST ``body`` to ``<url>/<service>``, the answer into ``sink``."""
        url = f"{url}/{service}"
        self.check(url)
        credential = auth.headers(url) if auth else {}
        headers = {
            "Accept-Encoding": "identity",
            "Accept": f"application/x-{service}-result",
            "Content-Type": f"application/x-{service}-request",
            **credential,
        }
        to = " to the fetch" if service == "git-upload-pack" else " to the push"
        try:
            async with self._http.stream("POST", url, content=body, headers=headers) as resp:
                if (
                    resp.status_code != 200
                    or _media_type(resp) != f"application/x-{service}-result"
                ):
                    status, sent = resp.status_code, bool(credential)
                    refused = _status(host_of(url), status, sent, git=True, to=to)
                    if service == "git-upload-pack":
                        raise ServerRefused(str(refused), permanent=refused.permanent)
                    raise refused
                await _read(resp, budget, sink)
        except httpx.HTTPError as exc:
            raise _network(exc, url) from None

    async def discover(
        self, url: str, service: str, budget: Budget, auth: Auth | None = None
    ) -> tuple[str, Advertisement]:
        """The repository's base URL (where discovery ended) and its refs for
        ``service``; ``GitFailure`` when the URL serves no git repository."""
        suffix = f"/info/refs?service={service}"
        body = bytearray()
        found, content_type = await self.get(url + suffix, budget, body.extend, git=True, auth=auth)
        host = host_of(found)
        if content_type != f"application/x-{service}-advertisement" or not found.endswith(suffix):
            raise GitFailure(
                f"not a git repository: {host} does not serve one at that URL over smart HTTP"
            )
        return found[: -len(suffix)], parse_advertisement(bytes(body), host, service.encode())

    async def fetch_pack(
        self,
        base: str,
        adv: Advertisement,
        want: bytes,
        budget: Budget,
        *,
        also: tuple[bytes, ...] = (),
        auth: Auth | None = None,
    ) -> bytes:
        """The pack of ``want`` (and ``also``), shallow when the server can."""
        host = host_of(base)
        receiver = PackReceiver()
        try:
            request = upload_request(want, adv.capabilities, also)
            await self.post(base, request, "git-upload-pack", budget, receiver.feed, auth=auth)
            return receiver.finish(host)
        except ServerRefused:
            if adv.advertises(want):
                raise
            raise GitFailure(
                f"commit {want.decode()} not found: {host} does not have it, or does not "
                "serve a commit that no branch or tag points at"
            ) from None
