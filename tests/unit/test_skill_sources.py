"""Skills fetched from git repositories and URLs (docs/skills.md, "Where a skill
comes from"), against dulwich's own smart-HTTP server on loopback
(tests/fakes/git.py)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from agentsvc_adapters.git import GitSkillSource
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.skill_sources import SkillSourceError
from tests.fakes.git import LINK, SKILL, SUBMODULE, GitServer, serve_git
from tests.outbound import Listener

NOTES = b"Steep green tea for one minute.\n"
TEA = b"---\nname: tea\ndescription: Tea.\n---\n"


class Site:
    """The module's server and the shas of its commits."""

    def __init__(self, server: GitServer, url: str, first: str, dev: str, tip: str) -> None:
        self.server, self.url, self.first, self.dev, self.tip = server, url, first, dev, tip
        self.repo = f"{url}/repo.git"


@pytest.fixture(scope="module")
def site() -> Iterator[Site]:
    server = GitServer()
    first = server.commit({"SKILL.md": b"# first\n"})
    server.tag("v1", first, annotated=True)
    server.tag("light", first, annotated=False)
    dev = server.commit({"SKILL.md": b"# dev\n", "dev.txt": b"dev"}, branch="dev")
    server.tag("dev", first, annotated=False)  # a tag named like a branch
    tip = server.commit(
        {
            "SKILL.md": SKILL,
            "scripts/brew.sh": b"#!/bin/sh\necho brew\n",
            "skills/tea/SKILL.md": TEA,
            "skills/tea/notes/steep.md": NOTES,
            "skills/heavy/SKILL.md": TEA,
            "skills/heavy/kettle.bin": b"k" * 2000,
            "linked.md": (LINK, b"SKILL.md"),
            "vendor": (SUBMODULE, b"1" * 40),
        }
    )
    with serve_git(server) as url:
        yield Site(server, url, first, dev, tip)


@pytest.fixture
async def source() -> AsyncIterator[GitSkillSource]:
    """Private networks allowed: the server is on loopback."""
    s = GitSkillSource(OutboundGuard(allow_private_network=True))
    yield s
    await s.aclose()


async def test_head_brings_the_default_branch_regular_files_only(
    site: Site, source: GitSkillSource
) -> None:
    skill = await source.fetch_git(site.repo, "", None)
    assert skill.resolved_ref == site.tip
    # the symbolic link and the submodule are left out
    assert skill.files == {
        "SKILL.md": SKILL,
        "scripts/brew.sh": b"#!/bin/sh\necho brew\n",
        "skills/tea/SKILL.md": TEA,
        "skills/tea/notes/steep.md": NOTES,
        "skills/heavy/SKILL.md": TEA,
        "skills/heavy/kettle.bin": b"k" * 2000,
    }


async def test_a_branch_a_tag_and_a_sha_each_name_their_commit(
    site: Site, source: GitSkillSource
) -> None:
    dev = await source.fetch_git(site.repo, "", "dev")  # the branch, not the tag named dev
    assert (dev.resolved_ref, dev.files) == (site.dev, {"SKILL.md": b"# dev\n", "dev.txt": b"dev"})
    for ref in ("v1", "light", "refs/tags/v1", site.first):
        skill = await source.fetch_git(site.repo, "", ref)
        assert (ref, skill.resolved_ref, skill.files) == (
            ref,
            site.first,
            {"SKILL.md": b"# first\n"},
        )
    main = await source.fetch_git(site.repo, "", "refs/heads/main")
    assert main.resolved_ref == site.tip
    assert (await source.fetch_git(site.repo, "", site.dev)).resolved_ref == site.dev
    assert (await source.fetch_git(site.repo, "", "HEAD")).resolved_ref == site.tip


async def test_a_new_commit_is_picked_up_on_the_next_fetch(source: GitSkillSource) -> None:
    server = GitServer()
    before = server.commit({"SKILL.md": b"# one\n", "a.md": b"a"})
    with serve_git(server) as url:
        first = await source.fetch_git(f"{url}/repo.git", "", None)
        after = server.commit({"SKILL.md": b"# two\n", "b.md": b"b"})
        second = await source.fetch_git(f"{url}/repo.git", "", "main")
    assert (first.resolved_ref, first.files) == (before, {"SKILL.md": b"# one\n", "a.md": b"a"})
    assert (second.resolved_ref, second.files) == (after, {"SKILL.md": b"# two\n", "b.md": b"b"})


async def test_a_path_names_a_directory_whose_files_come_relative_to_it(
    site: Site, source: GitSkillSource
) -> None:
    for path in ("skills/tea", "skills/tea/", "skills//tea"):
        skill = await source.fetch_git(site.repo, path, None)
        assert skill.files == {"SKILL.md": TEA, "notes/steep.md": NOTES}
        assert skill.resolved_ref == site.tip


async def test_a_missing_ref_path_or_skill_md_is_named(site: Site, source: GitSkillSource) -> None:
    cases = [
        ("", "nope", "ref 'nope' not found in the repository"),
        ("skills/coffee", None, "path 'skills/coffee' not found at that commit"),
        ("skills/tea/notes/steep.md", None, "path 'skills/tea/notes/steep.md' is not a directory"),
        ("scripts", None, "no SKILL.md in scripts"),
        ("", "0123456789abcdef0123456789abcdef01234567", "commit 0123456789abcdef0123456789"),
    ]
    for path, ref, detail in cases:
        with pytest.raises(SkillSourceError) as caught:
            await source.fetch_git(site.repo, path, ref)
        assert caught.value.detail.startswith(detail), (path, ref, caught.value.detail)


async def test_a_path_that_leaves_the_repository_is_refused_before_any_request(
    site: Site, source: GitSkillSource
) -> None:
    seen = len(site.server.paths)
    for path, why in (
        ("../etc", "may not hold a '.' or '..' part"),
        ("skills/../..", "may not hold a '.' or '..' part"),
        ("./skills", "may not hold a '.' or '..' part"),
        ("/etc", "must be relative to the repository's top"),
    ):
        with pytest.raises(SkillSourceError, match=f"path '{path}' {why}"):
            await source.fetch_git(site.repo, path, None)
    assert len(site.server.paths) == seen


async def test_a_url_that_is_not_a_git_repository_says_so(
    site: Site, source: GitSkillSource
) -> None:
    with pytest.raises(SkillSourceError) as caught:
        await source.fetch_git(f"{site.url}/page", "", None)
    assert caught.value.detail == (
        "not a git repository, or one that needs credentials: 127.0.0.1 answered HTTP 404"
    )
    with pytest.raises(SkillSourceError, match="has no query or fragment"):
        await source.fetch_git(f"{site.repo}?token=x", "", None)


async def test_a_file_over_its_bound_is_refused(site: Site) -> None:
    guard = OutboundGuard(allow_private_network=True)
    tight = GitSkillSource(guard, max_file_bytes=1999)
    with pytest.raises(SkillSourceError) as caught:
        await tight.fetch_git(site.repo, "skills/heavy", None)
    assert caught.value.detail == "kettle.bin is larger than 1999 bytes, the limit for one file"
    roomy = GitSkillSource(guard, max_file_bytes=2000)
    assert (await roomy.fetch_git(site.repo, "skills/heavy", None)).files[
        "kettle.bin"
    ] == b"k" * 2000
    await tight.aclose()
    await roomy.aclose()


async def test_more_files_than_the_bound_are_refused(site: Site) -> None:
    guard = OutboundGuard(allow_private_network=True)
    five = GitSkillSource(guard, max_files=5)
    with pytest.raises(SkillSourceError) as caught:
        await five.fetch_git(site.repo, "", None)
    assert caught.value.detail == "the top of the repository holds more than 5 files"
    six = GitSkillSource(guard, max_files=6)
    assert len((await six.fetch_git(site.repo, "", None)).files) == 6
    await five.aclose()
    await six.aclose()


async def test_a_download_over_its_bound_is_refused_while_it_is_read(site: Site) -> None:
    small = GitSkillSource(OutboundGuard(allow_private_network=True), max_bytes=300)
    with pytest.raises(SkillSourceError, match="the download is larger than 300 bytes"):
        await small.fetch_git(site.repo, "", None)
    await small.aclose()


async def test_a_moved_repository_is_followed_and_fetched_where_it_now_is(
    site: Site, source: GitSkillSource
) -> None:
    seen = len(site.server.paths)
    skill = await source.fetch_git(f"{site.url}/moved.git", "skills/tea", None)
    assert skill.files == {"SKILL.md": TEA, "notes/steep.md": NOTES}
    assert site.server.paths[seen:] == [
        "/moved.git/info/refs",
        "/repo.git/info/refs",
        "/repo.git/git-upload-pack",
    ]


async def test_the_guard_refuses_loopback_and_plain_http_before_connecting(site: Site) -> None:
    strict = GitSkillSource(OutboundGuard(allow_private_network=False))
    seen = len(site.server.paths)
    port = site.url.rsplit(":", 1)[1]
    with pytest.raises(SkillSourceError) as plain:
        await strict.fetch_git(site.repo, "", None)
    assert plain.value.detail.startswith(
        "refused by the outbound guard: plain http:// is refused, use https://"
    )
    with pytest.raises(SkillSourceError) as loopback:
        await strict.fetch_url(f"https://127.0.0.1:{port}/skill.md")
    assert loopback.value.detail == "refused by the outbound guard: 127.0.0.1 is a loopback address"
    assert len(site.server.paths) == seen
    await strict.aclose()


class PublicHost(httpx.AsyncBaseTransport):
    """A guarded client in which the made-up public name ``public.test`` reaches
    the loopback server directly, as a public host would be reached; every other
    request goes through the guarded client, whose guard allows no private address."""

    def __init__(self, guarded: httpx.AsyncClient, port: int) -> None:
        self.guarded = guarded
        self.direct = httpx.AsyncClient()
        self.port = port

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.host == "public.test":
            url = request.url.copy_with(scheme="http", host="127.0.0.1", port=self.port)
            inner = httpx.Request(request.method, url, headers=request.headers)
            answer = await self.direct.send(inner, stream=True)
        else:
            answer = await self.guarded.send(request, stream=True)
        return httpx.Response(answer.status_code, headers=answer.headers, stream=answer.stream)

    async def aclose(self) -> None:
        await self.direct.aclose()
        await self.guarded.aclose()


async def test_a_redirect_is_checked_by_the_guard_like_the_first_url(site: Site) -> None:
    guard = OutboundGuard(allow_private_network=False)
    port = int(site.url.rsplit(":", 1)[1])
    client = httpx.AsyncClient(transport=PublicHost(guard.http_client(timeout=5.0), port))
    public = GitSkillSource(guard, client=client)
    seen = len(site.server.paths)
    fine = await public.fetch_url("https://public.test/to?url=/skill.md")
    assert fine.files == {"SKILL.md": SKILL}
    with pytest.raises(SkillSourceError) as caught:
        await public.fetch_url(f"https://public.test/to?url=https://127.0.0.1:{port}/skill.md")
    assert caught.value.detail == "refused by the outbound guard: 127.0.0.1 is a loopback address"
    with pytest.raises(SkillSourceError, match="plain http:// is refused"):
        await public.fetch_url("https://public.test/to?url=http://public.test/skill.md")
    assert site.server.paths[seen:] == ["/to", "/skill.md", "/to", "/to"]
    await public.aclose()


async def test_a_skill_md_url_gives_its_body_and_a_digest(
    site: Site, source: GitSkillSource
) -> None:
    skill = await source.fetch_url(f"{site.url}/skill.md")
    assert skill.files == {"SKILL.md": SKILL}
    assert skill.resolved_ref == "sha256:" + hashlib.sha256(SKILL).hexdigest()
    moved = await source.fetch_url(f"{site.url}/to?url=/skill.md")
    assert moved == skill


async def test_a_skill_md_url_that_fails_says_why(site: Site) -> None:
    source = GitSkillSource(OutboundGuard(allow_private_network=True), max_file_bytes=1000)
    assert len((await source.fetch_url(f"{site.url}/big.md?n=1000")).files["SKILL.md"]) == 1000
    cases = [
        ("/big.md?n=1001", "the SKILL.md is larger than 1000 bytes"),
        ("/page", "127.0.0.1 answered HTTP 404"),
        ("/index.html", "127.0.0.1 answered an HTML page, not a SKILL.md"),
        ("/loop", "more than 5 redirects"),
    ]
    for path, detail in cases:
        with pytest.raises(SkillSourceError) as caught:
            await source.fetch_url(site.url + path)
        assert caught.value.detail.startswith(detail), (path, caught.value.detail)
    await source.aclose()


async def test_a_server_that_never_answers_runs_into_the_time_bound() -> None:
    source = GitSkillSource(OutboundGuard(allow_private_network=True), timeout=0.5)
    async with Listener(silent=True) as listener:
        with pytest.raises(SkillSourceError) as caught:
            await source.fetch_git(f"http://127.0.0.1:{listener.port}/repo.git", "", None)
    assert caught.value.detail == "fetching from 127.0.0.1 did not finish within 0.5 s"
    assert listener.connections == 1
    await source.aclose()
