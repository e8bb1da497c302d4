"""``GitSkillSource``: skills from a git repository (smart HTTP) or one URL.

Every request goes through the outbound guard's client, and each URL is checked
by the guard's rules before it is requested (``https://`` only and no private
address, unless ``AGENTSVC_ALLOW_PRIVATE_NETWORK=true``): a refusal names the
rule, and nothing is sent. The client itself follows no redirect; this adapter
follows at most ``MAX_REDIRECTS`` on a GET (the discovery of a repository that
moved, a URL that points at another), checking each new URL as it checked the
first. The repository's base URL is then where discovery ended, as git does; the
POST that fetches the pack follows none.

Git's protocol is spoken here over the async client (``wire.py``), never
dulwich's own HTTP client nor the ``git`` program, which would bypass the guard;
dulwich reads the pkt-lines and the pack and walks the tree (``objects.py``, in a
worker thread).

Bounds, each a constructor argument, each enforced while reading:
``max_bytes`` of answers in all (discovery and pack, or the SKILL.md),
``max_unpacked_bytes`` of objects once inflated (checked before they are),
``max_files`` files and ``max_file_bytes`` for one, ``timeout`` seconds for the
whole fetch. Answers are asked for and read uncompressed (``identity``): there
is no decompression whose output could outgrow what was counted.

Errors are ``SkillSourceError`` and name the host, never the URL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.to_thread
import httpx

from agentsvc_adapters.git.objects import check_pack, commit_of, skill_files, unpack
from agentsvc_adapters.git.wire import (
    PackReceiver,
    ServerRefused,
    parse_advertisement,
    upload_request,
)
from agentsvc_adapters.outbound import OutboundGuard, failure, note_refusal
from agentsvc_core.ports.skill_sources import FetchedSkill, SkillSource, SkillSourceError

__all__ = ["MAX_REDIRECTS", "GitSkillSource"]

MAX_REDIRECTS = 5
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_DISCOVERY = "/info/refs?service=git-upload-pack"
_ADVERTISEMENT = "application/x-git-upload-pack-advertisement"
_RESULT = "application/x-git-upload-pack-result"
_MB = 1024 * 1024


def _host(url: str) -> str:
    """The host of a URL the guard accepted (so it has one)."""
    return str(urlsplit(url).hostname)


def _path_parts(path: str) -> tuple[str, ...]:
    """``path`` as its parts; an absolute path or one with a ``.``/``..`` part is
    refused (a trailing ``/`` is fine)."""
    if path.startswith("/"):
        raise SkillSourceError(f"path {path!r} must be relative to the repository's top")
    parts = tuple(part for part in path.split("/") if part)
    if any(part in (".", "..") for part in parts):
        raise SkillSourceError(f"path {path!r} may not hold a '.' or '..' part")
    return parts


class _Budget:
    """The bytes still allowed for one fetch's answers."""

    def __init__(self, limit: int, what: str) -> None:
        self.limit = limit
        self.left = limit
        self.what = what

    def take(self, n: int) -> None:
        self.left -= n
        if self.left < 0:
            raise SkillSourceError(f"{self.what} is larger than {self.limit} bytes")


class GitSkillSource(SkillSource):
    """The ``SkillSource`` over one pooled guarded client (``aclose`` at shutdown);
    ``client`` replaces the guard's own (tests route a name to loopback with it)."""

    def __init__(
        self,
        guard: OutboundGuard,
        *,
        max_bytes: int = 20 * _MB,
        max_unpacked_bytes: int = 100 * _MB,
        max_files: int = 200,
        max_file_bytes: int = 1 * _MB,
        timeout: float = 30.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._guard = guard
        self.max_bytes = max_bytes
        self.max_unpacked_bytes = max_unpacked_bytes
        self.max_files = max_files
        self.max_file_bytes = max_file_bytes
        self.timeout = timeout
        self._http = client or guard.http_client(timeout=timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def fetch_git(self, url: str, path: str, ref: str | None) -> FetchedSkill:
        parts = _path_parts(path)
        self._check(url)
        split = urlsplit(url)
        if split.query or split.fragment:
            raise SkillSourceError("a git repository's URL has no query or fragment")
        return await self._within(url, self._fetch_git(url.removesuffix("/"), parts, ref))

    async def fetch_url(self, url: str) -> FetchedSkill:
        self._check(url)
        return await self._within(url, self._fetch_url(url))

    async def _within(self, url: str, work: Awaitable[FetchedSkill]) -> FetchedSkill:
        try:
            with anyio.fail_after(self.timeout):
                return await work
        except TimeoutError:
            raise SkillSourceError(
                f"fetching from {_host(url)} did not finish within {self.timeout:g} s"
            ) from None

    async def _fetch_git(self, url: str, parts: tuple[str, ...], ref: str | None) -> FetchedSkill:
        budget = _Budget(self.max_bytes, "the download")
        body = bytearray()
        found, content_type = await self._get(url + _DISCOVERY, budget, body.extend, git=True)
        host = _host(found)
        if content_type != _ADVERTISEMENT or not found.endswith(_DISCOVERY):
            raise SkillSourceError(
                f"not a git repository: {host} does not serve one at that URL over smart HTTP"
            )
        base = found[: -len(_DISCOVERY)]
        adv = parse_advertisement(bytes(body), host)
        want = adv.want(ref)
        receiver = PackReceiver()
        try:
            await self._post(
                base + "/git-upload-pack",
                upload_request(want, adv.capabilities),
                budget,
                receiver.feed,
            )
            pack = receiver.finish(host)
        except ServerRefused:
            if adv.advertises(want):
                raise
            raise SkillSourceError(
                f"commit {want.decode()} not found: {host} does not have it, or does not "
                "serve a commit that no branch or tag points at"
            ) from None

        def work() -> FetchedSkill:
            check_pack(pack, max_unpacked=self.max_unpacked_bytes)
            store = unpack(pack)
            commit = commit_of(store, want)
            files = skill_files(
                store, commit, parts, max_files=self.max_files, max_file_bytes=self.max_file_bytes
            )
            return FetchedSkill(files=files, resolved_ref=commit.decode())

        # abandoned on a timeout: the fetch fails on time, and the work, bounded by
        # the sizes above, ends in its thread
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)

    async def _fetch_url(self, url: str) -> FetchedSkill:
        budget = _Budget(self.max_file_bytes, "the SKILL.md")
        body = bytearray()
        found, content_type = await self._get(url, budget, body.extend, git=False)
        if content_type in ("text/html", "application/xhtml+xml"):
            raise SkillSourceError(
                f"{_host(found)} answered an HTML page, not a SKILL.md (on a git host, "
                "use the file's raw URL)"
            )
        digest = hashlib.sha256(body).hexdigest()
        return FetchedSkill(files={"SKILL.md": bytes(body)}, resolved_ref=f"sha256:{digest}")

    def _check(self, url: str) -> None:
        why = self._guard.refusal(url)
        if why:
            note_refusal(f"skill source: {why}")
            raise SkillSourceError(f"refused by the outbound guard: {why}")

    async def _get(
        self, url: str, budget: _Budget, sink: Callable[[bytes], object], *, git: bool
    ) -> tuple[str, str]:
        """GET ``url``, following redirects (module docstring), its body into
        ``sink``; the URL it was found at and its media type."""
        headers = {"Accept-Encoding": "identity"}
        for _ in range(MAX_REDIRECTS + 1):
            self._check(url)
            try:
                async with self._http.stream("GET", url, headers=headers) as resp:
                    if resp.status_code in _REDIRECTS:
                        location = resp.headers.get("location", "").strip()
                        if not location:
                            raise SkillSourceError(
                                f"{_host(url)} answered a redirect without a Location"
                            )
                        url = urljoin(url, location)
                        continue
                    if resp.status_code != 200:
                        answered = f"{_host(url)} answered HTTP {resp.status_code}"
                        if git:
                            answered = (
                                f"not a git repository, or one that needs credentials: {answered}"
                            )
                        raise SkillSourceError(answered)
                    await _read(resp, budget, sink)
                    return url, _media_type(resp)
            except httpx.HTTPError as exc:
                raise SkillSourceError(failure(exc, url)) from None
        raise SkillSourceError(f"more than {MAX_REDIRECTS} redirects")

    async def _post(
        self, url: str, body: bytes, budget: _Budget, sink: Callable[[bytes], object]
    ) -> None:
        self._check(url)
        headers = {
            "Accept-Encoding": "identity",
            "Content-Type": "application/x-git-upload-pack-request",
        }
        try:
            async with self._http.stream("POST", url, content=body, headers=headers) as resp:
                if resp.status_code != 200 or _media_type(resp) != _RESULT:
                    raise ServerRefused(
                        f"{_host(url)} answered HTTP {resp.status_code} to the fetch"
                    )
                await _read(resp, budget, sink)
        except httpx.HTTPError as exc:
            raise SkillSourceError(failure(exc, url)) from None


def _media_type(resp: httpx.Response) -> str:
    header: str = resp.headers.get("content-type", "")
    return header.partition(";")[0].strip().lower()


async def _read(resp: httpx.Response, budget: _Budget, sink: Callable[[bytes], object]) -> None:
    """The raw body into ``sink``, counted against ``budget`` as it arrives."""
    encoding = resp.headers.get("content-encoding", "identity")
    if encoding != "identity":
        raise SkillSourceError(f"{_host(str(resp.url))} answered in {encoding!r}, not as asked")
    async for chunk in resp.aiter_raw():
        budget.take(len(chunk))
        sink(chunk)
