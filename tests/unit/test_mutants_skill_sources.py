"""The skill source's answers to servers that misbehave, its bounds and its error
texts, pinned. Only loopback is contacted (tests/fakes/git.py). Written to kill
the mutants `make mutation` found alive in ``agentsvc_adapters.git``
(docs/development.md); docs/skills.md says what a user is promised."""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Iterator

import pytest

from agentsvc_adapters.git import GitSkillSource
from agentsvc_adapters.git import source as source_module
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.skill_sources import SkillSourceError
from tests.fakes.git import SKILL, GitServer, serve_git
from tests.outbound import Listener, closed_port, fake_dns


@pytest.fixture(scope="module")
def site() -> Iterator[tuple[GitServer, str, str]]:
    server = GitServer()
    tip = server.commit({"SKILL.md": SKILL})
    with serve_git(server) as url:
        yield server, url, tip


@pytest.fixture
async def source() -> AsyncIterator[GitSkillSource]:
    s = GitSkillSource(OutboundGuard(allow_private_network=True))
    yield s
    await s.aclose()


async def failure(work: object) -> str:
    with pytest.raises(SkillSourceError) as caught:
        await work  # type: ignore[misc]
    return caught.value.detail


def test_the_default_bounds_are_the_documented_ones() -> None:
    s = GitSkillSource(OutboundGuard(allow_private_network=False))
    mb = 1024 * 1024
    assert (s.max_bytes, s.max_unpacked_bytes, s.max_files, s.max_file_bytes, s.timeout) == (
        20 * mb,
        100 * mb,
        200,
        mb,
        30.0,
    )


async def test_a_repository_url_with_a_trailing_slash_is_the_same_repository(
    site: tuple[GitServer, str, str], source: GitSkillSource
) -> None:
    _, url, tip = site
    assert (await source.fetch_git(f"{url}/repo.git/", "", None)).resolved_ref == tip


async def test_servers_that_do_not_speak_git_are_named(
    site: tuple[GitServer, str, str], source: GitSkillSource
) -> None:
    _, url, _ = site
    assert await failure(source.fetch_git(f"{url}/static.git", "", None)) == (
        "not a git repository: 127.0.0.1 does not serve one at that URL over smart HTTP"
    )
    assert await failure(source.fetch_git(f"{url}/garbage.git", "", None)) == (
        "127.0.0.1 answered something that is not git's smart HTTP protocol"
    )
    assert await failure(source.fetch_git(f"{url}/repo.git#main", "", None)) == (
        "a git repository's URL has no query or fragment"
    )


async def test_a_fetch_the_server_answers_badly_says_how(
    site: tuple[GitServer, str, str], source: GitSkillSource
) -> None:
    _, url, _ = site
    assert await failure(source.fetch_git(f"{url}/err.git", "", None)) == (
        "127.0.0.1 refused the fetch: out of disk space"
    )
    assert await failure(source.fetch_git(f"{url}/text.git", "", None)) == (
        "127.0.0.1 answered HTTP 200 to the fetch"
    )
    assert await failure(source.fetch_git(f"{url}/cut.git", "", None)) == (
        "could not reach 127.0.0.1"
    )


async def test_a_commit_the_server_does_not_advertise_is_reported_as_not_found(
    site: tuple[GitServer, str, str], source: GitSkillSource
) -> None:
    _, url, _ = site
    sha = "0123456789abcdef0123456789abcdef01234567"
    assert await failure(source.fetch_git(f"{url}/repo.git", "", sha)) == (
        f"commit {sha} not found: 127.0.0.1 does not have it, or does not serve a commit "
        "that no branch or tag points at"
    )


async def test_answers_are_read_uncompressed(
    site: tuple[GitServer, str, str], source: GitSkillSource
) -> None:
    _, url, _ = site
    # the server gzips whenever it may: the source asks it not to (and reads no gzip)
    assert (await source.fetch_url(f"{url}/skill.md")).files == {"SKILL.md": SKILL}
    assert await failure(source.fetch_url(f"{url}/gzipped.md")) == (
        "127.0.0.1 answered in 'gzip', not as asked"
    )


async def test_five_redirects_are_followed_and_a_sixth_is_not(
    site: tuple[GitServer, str, str], source: GitSkillSource
) -> None:
    server, url, _ = site
    seen = len(server.paths)
    assert (await source.fetch_url(f"{url}/hops?n=4")).files == {"SKILL.md": SKILL}
    assert server.paths[seen:] == ["/hops"] * 5 + ["/skill.md"]
    assert await failure(source.fetch_url(f"{url}/hops?n=5")) == "more than 5 redirects"
    assert await failure(source.fetch_url(f"{url}/nowhere")) == (
        "127.0.0.1 answered a redirect without a Location"
    )


async def test_pages_are_told_apart_by_their_media_type(
    site: tuple[GitServer, str, str], source: GitSkillSource
) -> None:
    _, url, _ = site
    html = "127.0.0.1 answered an HTML page, not a SKILL.md (on a git host, use the file's raw URL)"
    assert await failure(source.fetch_url(f"{url}/index.html")) == html
    assert await failure(source.fetch_url(f"{url}/page.xhtml")) == html
    assert (await source.fetch_url(f"{url}/untyped.md")).files == {"SKILL.md": SKILL}


async def test_a_host_that_cannot_be_reached_is_named(source: GitSkillSource) -> None:
    with closed_port() as port:
        assert await failure(source.fetch_url(f"http://127.0.0.1:{port}/SKILL.md")) == (
            "could not reach 127.0.0.1"
        )
        assert await failure(source.fetch_git(f"http://127.0.0.1:{port}/r.git", "", None)) == (
            "could not reach 127.0.0.1"
        )


async def test_a_name_that_resolves_to_loopback_is_refused_when_connecting() -> None:
    """The URL passes the early check (a name, not an address); the guard refuses
    when it resolves the name, before any connection, and the error says so."""
    guard = OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"internal.test": ["127.0.0.1"]})
    )
    source = GitSkillSource(guard)
    refused = "refused by the outbound guard: internal.test resolves to a loopback address"
    assert await failure(source.fetch_url("https://internal.test/SKILL.md")) == refused
    assert await failure(source.fetch_git("https://internal.test/r.git", "", None)) == refused
    await source.aclose()


async def test_a_skill_md_url_that_never_answers_runs_into_the_time_bound() -> None:
    source = GitSkillSource(OutboundGuard(allow_private_network=True), timeout=0.25)
    async with Listener(silent=True) as listener:
        detail = await failure(source.fetch_url(f"http://127.0.0.1:{listener.port}/SKILL.md"))
    assert detail == "fetching from 127.0.0.1 did not finish within 0.25 s"
    await source.aclose()


async def test_the_time_bound_holds_while_the_pack_is_read(
    site: tuple[GitServer, str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pack is read in a worker thread; a fetch whose time runs out then fails
    on time and leaves that (bounded) work to end in its thread."""
    _, url, _ = site
    gate, finished = threading.Event(), threading.Event()

    def slow_check(pack: bytes, *, max_unpacked: int) -> None:
        gate.wait(10)
        finished.set()

    monkeypatch.setattr(source_module, "check_pack", slow_check)
    source = GitSkillSource(OutboundGuard(allow_private_network=True), timeout=0.5)
    detail = await failure(source.fetch_git(f"{url}/repo.git", "", None))
    assert not finished.is_set()  # the fetch did not wait for the thread
    gate.set()
    assert detail == "fetching from 127.0.0.1 did not finish within 0.5 s"
    await source.aclose()
