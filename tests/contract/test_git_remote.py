"""The git remote (agentsvc_core/ports/git_remotes.py, ``GitRemote``) over git's
smart HTTP, against dulwich's own server on loopback (tests/fakes/git.py): a
snapshot of the tree at a branch, a tag or a sha, within its bounds; one commit
pushed as a new branch, read back by the next fetch; a retried push answers as
the first did; credentials are needed, checked, and never shown; the outbound
guard refuses what it refuses."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from dulwich.objects import Commit

from agentsvc_adapters.git import GitHttpRemote, wire
from agentsvc_adapters.git import remote as module
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.git_remotes import GitRemoteError, PushResult, Snapshot
from tests.fakes.git import LINK, SUBMODULE, GitServer, serve_git
from tests.outbound import Listener, fake_dns

TOKEN = "ghs_fakePushToken0123456789abcdefABCDEF"
AUTHOR = "Code Agent <agent@example.com>"
EXEC = 0o100755
PLAIN = 0o100644


class Site:
    def __init__(self, server: GitServer, url: str) -> None:
        self.server = server
        self.url = url
        self.repo = f"{url}/acme/widgets.git"
        self.first = server.commit({"README.md": b"# widgets\n"})
        server.tag("v1", self.first, annotated=True)
        server.tag("light", self.first, annotated=False)
        self.tip = server.commit(
            {
                "README.md": b"# widgets v2\n",
                "src/app.py": b"print('hi')\n",
                "bin/run": (EXEC, b"#!/bin/sh\necho run\n"),
                "docs/guide/intro.md": b"intro\n",
                "latest": (LINK, b"README.md"),
                "vendor/lib": (SUBMODULE, b"1" * 40),
            }
        )


@pytest.fixture
def site() -> Iterator[Site]:
    server = GitServer(token=TOKEN)
    with serve_git(server) as url:
        yield Site(server, url)


@pytest.fixture
async def remote() -> AsyncIterator[GitHttpRemote]:
    """Private networks allowed: the server is on loopback."""
    made = GitHttpRemote(OutboundGuard(allow_private_network=True))
    yield made
    await made.aclose()


def _files(snapshot: Snapshot) -> dict[str, tuple[bytes, bool]]:
    return {f.path: (f.data, f.executable) for f in snapshot.files}


async def _refused(work: object) -> GitRemoteError:
    with pytest.raises(GitRemoteError) as caught:
        await work  # type: ignore[misc]
    return caught.value


async def test_the_default_branch_s_whole_tree_with_the_executable_bit(
    site: Site, remote: GitHttpRemote
) -> None:
    snap = await remote.fetch(site.repo, None, None)
    assert (snap.commit, snap.ref) == (site.tip, "main")
    assert _files(snap) == {
        "README.md": (b"# widgets v2\n", False),
        "src/app.py": (b"print('hi')\n", False),
        "bin/run": (b"#!/bin/sh\necho run\n", True),
        "docs/guide/intro.md": (b"intro\n", False),
    }
    assert snap.skipped == ("latest", "vendor/lib")


async def test_a_branch_a_tag_and_a_sha_each_name_their_commit(
    site: Site, remote: GitHttpRemote
) -> None:
    dev = site.server.commit({"dev.txt": b"dev"}, branch="dev")
    got = await remote.fetch(site.repo, "dev", None)
    assert (got.commit, got.ref, _files(got)) == (dev, "dev", {"dev.txt": (b"dev", False)})
    for ref in ("v1", "light", site.first):
        snap = await remote.fetch(site.repo, ref, None)
        assert (snap.commit, snap.ref, _files(snap)) == (
            site.first,
            ref,
            {"README.md": (b"# widgets\n", False)},
        )
    missing = await _refused(remote.fetch(site.repo, "nope", None))
    assert (missing.detail, missing.permanent) == ("ref 'nope' not found in the repository", True)


async def test_the_bounds_refuse_a_tree_past_them(site: Site) -> None:
    guard = OutboundGuard(allow_private_network=True)
    cases = [
        (GitHttpRemote(guard, max_files=3), "the repository holds more than 3 files"),
        (
            GitHttpRemote(guard, max_file_bytes=12),
            "README.md is larger than 12 bytes, the limit for one file",
        ),
        (GitHttpRemote(guard, max_bytes=300), "the download is larger than 300 bytes"),
        (
            GitHttpRemote(guard, max_unpacked_bytes=200),
            "the repository at that commit is too large: more than 200 bytes unpacked",
        ),
    ]
    for remote, detail in cases:
        error = await _refused(remote.fetch(site.repo, None, None))
        assert (error.detail, error.permanent) == (detail, True)
        await remote.aclose()


async def test_a_pushed_commit_changes_adds_and_deletes_and_is_fetched_back(
    site: Site, remote: GitHttpRemote
) -> None:
    pushed = await remote.push(
        site.repo,
        TOKEN,
        base=site.tip,
        branch="agent/readme",
        changes={
            "README.md": b"# widgets v3\n",
            "bin/run": b"#!/bin/sh\necho faster\n",
            "src/new/mod.py": b"x = 1\n",
            "docs/guide/intro.md": None,
        },
        message="Update the readme",
        author=AUTHOR,
    )
    assert pushed.branch == "agent/readme"
    assert site.server.repo.refs[b"refs/heads/agent/readme"] == pushed.commit.encode()
    assert site.server.repo.refs[b"refs/heads/main"] == site.tip.encode()  # untouched
    back = await remote.fetch(site.repo, "agent/readme", None)
    assert back.commit == pushed.commit
    assert _files(back) == {
        "README.md": (b"# widgets v3\n", False),
        "src/app.py": (b"print('hi')\n", False),
        "bin/run": (b"#!/bin/sh\necho faster\n", True),  # the executable bit is kept
        "src/new/mod.py": (b"x = 1\n", False),
    }
    assert back.skipped == ("latest", "vendor/lib")  # links and submodules stay
    commit = site.server.repo[pushed.commit.encode()]
    assert isinstance(commit, Commit)
    assert commit.parents == [site.tip.encode()]
    assert (commit.author, commit.message) == (AUTHOR.encode(), b"Update the readme\n")


async def test_the_credential_goes_as_basic_and_a_wrong_one_is_refused_unshown(
    site: Site, remote: GitHttpRemote
) -> None:
    kwargs = {"base": site.tip, "branch": "b", "changes": {"a": b"a"}, "message": "m"}
    wrong = "ghs_wrongToken987654321"
    error = await _refused(remote.push(site.repo, wrong, author=AUTHOR, **kwargs))  # type: ignore[arg-type]
    assert (error.detail, error.permanent) == ("127.0.0.1 refused the credential (HTTP 401)", True)
    assert wrong not in str(error)
    assert base64.b64encode(wrong.encode()).decode() not in str(error)
    anonymous = await _refused(remote.push(site.repo, None, author=AUTHOR, **kwargs))  # type: ignore[arg-type]
    assert "answered HTTP 401" in anonymous.detail
    assert b"refs/heads/b" not in site.server.repo.refs
    expected = "Basic " + base64.b64encode(f"x-access-token:{wrong}".encode()).decode()
    assert expected in site.server.authorizations


async def test_a_private_repository_is_fetched_with_its_credential_only(
    remote: GitHttpRemote,
) -> None:
    server = GitServer(token=TOKEN, private=True)
    sha = server.commit({"a.txt": b"a"})
    with serve_git(server) as url:
        assert (await remote.fetch(f"{url}/r.git", None, TOKEN)).commit == sha
        error = await _refused(remote.fetch(f"{url}/r.git", None, None))
        assert error.detail.startswith("not a git repository, or one that needs credentials")
        error = await _refused(remote.fetch(f"{url}/r.git", None, "nope"))
        assert error.detail == "127.0.0.1 refused the credential (HTTP 401)"


async def test_a_push_to_a_branch_that_exists_is_refused(site: Site, remote: GitHttpRemote) -> None:
    other = site.server.commit({"x": b"x"}, branch="taken")
    error = await _refused(
        remote.push(
            site.repo,
            TOKEN,
            base=site.tip,
            branch="taken",
            changes={"a": b"a"},
            message="m",
            author=AUTHOR,
        )
    )
    assert (error.detail, error.permanent) == ("branch 'taken' already exists on 127.0.0.1", True)
    assert site.server.repo.refs[b"refs/heads/taken"] == other.encode()


async def test_a_retried_push_answers_as_the_first_did(site: Site) -> None:
    clock = iter([1_800_000_000.0, 1_800_000_500.0, 1_800_000_900.0])
    remote = GitHttpRemote(OutboundGuard(allow_private_network=True), now=lambda: next(clock))
    args = {
        "base": site.tip,
        "branch": "agent/fix",
        "changes": {"src/app.py": b"print('fixed')\n"},
        "message": "Fix it",
        "author": AUTHOR,
    }
    first = await remote.push(site.repo, TOKEN, **args)  # type: ignore[arg-type]
    again = await remote.push(site.repo, TOKEN, **args)  # type: ignore[arg-type]
    assert again == first  # made later, the same change: the first push's answer
    other = await _refused(remote.push(site.repo, TOKEN, **{**args, "message": "Another"}))  # type: ignore[arg-type]
    assert other.detail == "branch 'agent/fix' already exists on 127.0.0.1"
    await remote.aclose()


async def test_the_server_s_refusal_of_a_ref_is_the_error(
    site: Site, remote: GitHttpRemote, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The branch appears between the check and the push (another pusher): the
    server answers ``ng`` and that is the error."""
    made_late = site.server.commit({"late": b"late"}, branch="elsewhere")
    real = wire.receive_request

    def racing(new: bytes, ref: bytes, caps: frozenset[bytes], pack: bytes) -> bytes:
        site.server.repo.refs[ref] = made_late.encode()
        return real(new, ref, caps, pack)

    monkeypatch.setattr(module, "receive_request", racing)
    error = await _refused(
        remote.push(
            site.repo,
            TOKEN,
            base=site.tip,
            branch="race",
            changes={"a": b"a"},
            message="m",
            author=AUTHOR,
        )
    )
    assert (error.detail, error.permanent) == (
        "127.0.0.1 refused the push: failed to update ref",
        True,
    )


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"base": "main"}, "the base must be a full commit sha, not 'main'"),
        ({"branch": "bad name"}, "'bad name' is not a valid branch name"),
        ({"branch": "a..b"}, "'a..b' is not a valid branch name"),
        ({"author": "nobody"}, "the author must read \"Name <email>\", not 'nobody'"),
        ({"changes": {"../x": b"x"}}, "cannot commit the path '../x'"),
        ({"changes": {".git/config": b"x"}}, "cannot commit the path '.git/config'"),
        ({"changes": {"/etc/x": b"x"}}, "cannot commit the path '/etc/x'"),
        ({"changes": {"README.md/x": b"x"}}, "'README.md' would be both a file and a folder"),
    ],
)
async def test_a_push_that_cannot_be_made_is_refused_before_anything_is_sent(
    site: Site, remote: GitHttpRemote, change: dict[str, object], detail: str
) -> None:
    args: dict[str, object] = {
        "base": site.tip,
        "branch": "ok",
        "changes": {"a": b"a"},
        "message": "m",
        "author": AUTHOR,
        **change,
    }
    error = await _refused(remote.push(site.repo, TOKEN, **args))  # type: ignore[arg-type]
    assert (error.detail, error.permanent) == (detail, True)
    assert not any("receive-pack" in p for p in site.server.paths)


async def test_the_outbound_guard_refuses_private_addresses_and_plain_http() -> None:
    guard = OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"git.internal": ["10.0.0.7"]})
    )
    remote = GitHttpRemote(guard)
    error = await _refused(remote.fetch("https://git.internal/acme/w.git", None, TOKEN))
    assert (error.detail, error.permanent) == (
        "refused by the outbound guard: git.internal resolves to a private address",
        True,
    )
    error = await _refused(
        remote.push(
            "http://127.0.0.1:9/acme/w.git",
            TOKEN,
            base="a" * 40,
            branch="b",
            changes={},
            message="m",
            author=AUTHOR,
        )
    )
    assert error.detail.startswith("refused by the outbound guard: plain http:// is refused")
    assert TOKEN not in error.detail
    await remote.aclose()


async def test_the_credential_goes_to_the_repository_s_own_origin_only(
    remote: GitHttpRemote,
) -> None:
    """A repository that moved to another server (another port) is followed, as
    git follows it, but the token stays behind: the other server sees none."""
    here, there = GitServer(token=TOKEN), GitServer(token=TOKEN, private=True)
    there.commit({"a.txt": b"a"})
    with serve_git(here) as here_url, serve_git(there) as there_url:
        here.away = there_url
        error = await _refused(remote.fetch(f"{here_url}/away.git", None, TOKEN))
        assert error.detail.startswith("not a git repository, or one that needs credentials")
        assert here.authorizations[0] is not None
        assert there.authorizations == [None]


async def test_a_server_that_never_answers_runs_into_the_time_bound() -> None:
    remote = GitHttpRemote(OutboundGuard(allow_private_network=True), timeout=0.3)
    async with Listener(silent=True) as listener:
        repo = f"http://127.0.0.1:{listener.port}/acme/w.git"
        error = await _refused(
            remote.push(
                repo, TOKEN, base="a" * 40, branch="b", changes={}, message="m", author=AUTHOR
            )
        )
    assert (error.detail, error.permanent) == (
        "pushing to 127.0.0.1 did not finish within 0.3 s",
        False,
    )
    await remote.aclose()


async def test_a_url_with_a_query_and_changes_past_the_bounds_are_refused(site: Site) -> None:
    remote = GitHttpRemote(OutboundGuard(allow_private_network=True), max_file_bytes=4, max_bytes=6)
    error = await _refused(remote.fetch(site.repo + "?x=1", None, None))
    assert (error.detail, error.permanent) == (
        "a git repository's URL has no query or fragment",
        True,
    )
    cases: list[tuple[dict[str, bytes | None], str]] = [
        ({"a": b"12345"}, "a is larger than 4 bytes, the limit for one file"),
        ({"a": b"1234", "b": b"123"}, "the changes are larger than 6 bytes"),
    ]
    for changes, detail in cases:
        error = await _refused(_push(remote, site, changes))
        assert (error.detail, error.permanent) == (detail, True)
    await remote.aclose()
    # a file at the bound is taken, and a deletion counts nothing
    remote = GitHttpRemote(OutboundGuard(allow_private_network=True), max_file_bytes=4)
    done = await _push(remote, site, {"a": b"1234", "README.md": None}, site.repo + "/")
    assert site.server.repo.refs[b"refs/heads/b"] == done.commit.encode()
    await remote.aclose()


async def _push(
    remote: GitHttpRemote, site: Site, changes: dict[str, bytes | None], url: str = ""
) -> PushResult:
    return await remote.push(
        url or site.repo,
        TOKEN,
        base=site.tip,
        branch="b",
        changes=changes,
        message="m",
        author=AUTHOR,
    )


NOT_GIT = "not a git repository, or one that needs credentials: git.test answered HTTP "


@pytest.mark.parametrize(
    ("status", "detail", "permanent"),
    [
        (404, NOT_GIT + "404", True),
        (403, "git.test refused the credential (HTTP 403)", True),
        (401, "git.test refused the credential (HTTP 401)", True),
        (429, NOT_GIT + "429", False),
        (500, NOT_GIT + "500", False),
        (503, NOT_GIT + "503", False),
        (499, NOT_GIT + "499", True),
    ],
)
async def test_a_server_s_answer_says_whether_a_retry_may_help(
    status: int, detail: str, permanent: bool
) -> None:
    client = httpx.AsyncClient(transport=httpx.MockTransport(lambda _: httpx.Response(status)))
    remote = GitHttpRemote(OutboundGuard(allow_private_network=True), client=client)
    error = await _refused(remote.fetch("https://git.test/acme/w.git", None, TOKEN))
    assert (error.detail, error.permanent) == (detail, permanent)
    await remote.aclose()


async def test_a_private_repository_takes_a_push_with_its_credential(remote: GitHttpRemote) -> None:
    server = GitServer(token=TOKEN, private=True)
    base = server.commit({"a.txt": b"a"})
    with serve_git(server) as url:
        pushed = await remote.push(
            f"{url}/r.git",
            TOKEN,
            base=base,
            branch="b",
            changes={"a.txt": b"b"},
            message="m",
            author=AUTHOR,
        )
    assert server.repo.refs[b"refs/heads/b"] == pushed.commit.encode()
    assert None not in server.authorizations  # every request carried it


async def test_changes_at_the_bound_are_taken_and_past_it_refused(site: Site) -> None:
    remote = GitHttpRemote(OutboundGuard(allow_private_network=True), max_bytes=3000)
    error = await _refused(_push(remote, site, {"a": b"x" * 1500, "b": b"y" * 1501}))
    assert error.detail == "the changes are larger than 3000 bytes"
    done = await _push(remote, site, {"a": b"x" * 1500, "b": b"y" * 1500})
    assert site.server.repo.refs[b"refs/heads/b"] == done.commit.encode()
    small = GitHttpRemote(OutboundGuard(allow_private_network=True), max_bytes=100)
    error = await _refused(_push(small, site, {"a": b"x"}))
    assert error.detail == "the download is larger than 100 bytes"
    await remote.aclose()
    await small.aclose()


async def test_a_fetch_from_a_server_that_never_answers_runs_into_the_time_bound() -> None:
    remote = GitHttpRemote(OutboundGuard(allow_private_network=True), timeout=0.3)
    async with Listener(silent=True) as listener:
        error = await _refused(
            remote.fetch(f"http://127.0.0.1:{listener.port}/acme/w.git", None, None)
        )
    assert (error.detail, error.permanent) == (
        "fetching from 127.0.0.1 did not finish within 0.3 s",
        False,
    )
    await remote.aclose()
