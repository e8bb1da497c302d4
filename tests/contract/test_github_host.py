"""The GitHub host (agentsvc_core/ports/git_remotes.py, ``GitHost``) against a
loopback fake of GitHub's pull requests API (tests/fakes/github.py) whose
branches are the fake git server's: which repository URLs it serves, a pull
request opened from a pushed branch, a retried open answering the same pull
request, GitHub's refusals as errors that never show the token, the outbound
guard's refusals."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest

from agentsvc_adapters.git_hosts import GitHubHost, github_from_env
from agentsvc_adapters.outbound import OutboundGuard
from agentsvc_core.ports.git_remotes import GitHostError, PullRequest
from tests.fakes.git import GitServer, serve_git
from tests.fakes.github import TOKEN, FakeGitHub
from tests.outbound import Listener, fake_dns
from tests.web.live import serve

OPEN = OutboundGuard(allow_private_network=True)  # the fakes are on loopback


class Site:
    def __init__(self, git: GitServer, git_url: str, fake: FakeGitHub, api_url: str) -> None:
        self.git, self.fake, self.api_url = git, fake, api_url
        self.web_host = git_url.removeprefix("http://")
        self.repo = f"{git_url}/acme/widgets.git"


@pytest.fixture
def site() -> Iterator[Site]:
    git = GitServer()
    git.commit({"README.md": b"# widgets\n"})
    git.commit({"README.md": b"# widgets, fixed\n"}, branch="agent/fix")
    with serve_git(git) as git_url:
        fake = FakeGitHub(git, web_url=git_url)
        with serve(fake) as api_url:
            yield Site(git, git_url, fake, api_url)


@pytest.fixture
async def host(site: Site) -> AsyncIterator[GitHubHost]:
    made = github_from_env(
        OPEN,
        {"AGENTSVC_GITHUB_API_URL": f" {site.api_url}/ ", "AGENTSVC_GITHUB_HOST": site.web_host},
    )
    yield made
    await made.aclose()


async def _refused(work: object) -> GitHostError:
    with pytest.raises(GitHostError) as caught:
        await work  # type: ignore[misc]
    return caught.value


def test_it_serves_repositories_on_its_own_host_only() -> None:
    host = GitHubHost(OPEN)
    for url in (
        "https://github.com/acme/widgets.git",
        "https://github.com/acme/widgets",
        "https://GitHub.com/acme/widgets/",
        "http://github.com/acme/widgets.git",
    ):
        assert host.serves(url), url
    for url in (
        "https://gitlab.com/acme/widgets.git",
        "https://github.com/acme",
        "https://github.com/acme/widgets/tree/main",
        "https://github.com:8443/acme/widgets",
        "https://user:pw@github.com/acme/widgets",
        "https://github.com/acme/widgets?x=1",
        "ssh://github.com/acme/widgets",
        "https://github.com/acme/..",
        "https://github.com/acme/.",
        "https://github.com/ac%20me/widgets",
        "https://github.com/acme/wid%20gets",
        "https://github.com/acme/widgets#readme",
        "https://[::1/acme/widgets",
        "not a url",
    ):
        assert not host.serves(url), url
    enterprise = github_from_env(OPEN, {"AGENTSVC_GITHUB_HOST": "git.corp.example"})
    assert enterprise.serves("https://git.corp.example/acme/widgets.git")
    assert not enterprise.serves("https://github.com/acme/widgets.git")


def test_the_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    unset = github_from_env(OPEN, {"AGENTSVC_GITHUB_API_URL": " ", "AGENTSVC_GITHUB_HOST": ""})
    assert (unset.api_url, unset.web_host) == ("https://api.github.com", "github.com")
    assert (github_from_env(OPEN, {}).api_url, github_from_env(OPEN, {}).web_host) == (
        "https://api.github.com",
        "github.com",
    )
    monkeypatch.setenv("AGENTSVC_GITHUB_API_URL", "https://ghe.example/api/v3/")
    monkeypatch.setenv("AGENTSVC_GITHUB_HOST", "GHE.example")
    process = github_from_env(OPEN)
    assert (process.api_url, process.web_host) == ("https://ghe.example/api/v3", "ghe.example")


async def test_a_repository_elsewhere_or_no_token_is_refused_before_any_call() -> None:
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(500)

    host = GitHubHost(OPEN, client=httpx.AsyncClient(transport=httpx.MockTransport(record)))
    args = {"head": "h", "base": "main", "title": "t", "body": "b"}
    error = await _refused(host.open_pull_request("https://gitlab.com/a/b.git", TOKEN, **args))
    assert (error.detail, error.permanent) == ("not a repository on github.com", True)
    error = await _refused(host.open_pull_request("https://github.com/a/b.git", "", **args))
    assert (error.detail, error.permanent) == ("GitHub needs a token to open a pull request", True)
    assert seen == []
    await host.aclose()


async def test_a_pull_request_is_opened_and_a_retry_answers_the_same(
    site: Site, host: GitHubHost
) -> None:
    args = {"head": "agent/fix", "base": "main", "title": "Fix the readme", "body": "Done."}
    opened = await host.open_pull_request(site.repo, TOKEN, **args)
    assert opened == PullRequest(url=f"http://{site.web_host}/acme/widgets/pull/1", number=1)
    [pull] = site.fake.pulls
    assert (pull["title"], pull["body"], pull["head"]["ref"], pull["base"]["ref"]) == (
        "Fix the readme",
        "Done.",
        "agent/fix",
        "main",
    )
    again = await host.open_pull_request(site.repo, TOKEN, **args)
    assert again == opened
    assert len(site.fake.pulls) == 1
    assert site.fake.calls[-2:] == [
        ("POST", "/repos/acme/widgets/pulls"),
        ("GET", "/repos/acme/widgets/pulls"),
    ]


async def test_github_s_refusals_are_errors_without_the_token(site: Site, host: GitHubHost) -> None:
    args = {"base": "main", "title": "t", "body": "b"}
    wrong = "ghp_notTheRightToken000000000000000000"
    cases = [
        (wrong, "agent/fix", "GitHub refused the token (HTTP 401): Bad credentials"),
        (
            TOKEN,
            "no-such-branch",
            "GitHub refused the pull request (HTTP 422): Validation Failed: head invalid",
        ),
        (
            TOKEN,
            "main",
            "GitHub refused the pull request (HTTP 422): Validation Failed: "
            "No commits between main and acme:main",
        ),
    ]
    for token, head, detail in cases:
        error = await _refused(host.open_pull_request(site.repo, token, head=head, **args))
        assert (error.detail, error.permanent) == (detail, True)
        assert wrong not in str(error)
        assert TOKEN not in str(error)
    missing = await _refused(host.open_pull_request(site.repo, None, head="agent/fix", **args))
    assert missing.detail == "GitHub needs a token to open a pull request"
    elsewhere = await _refused(
        host.open_pull_request(
            f"http://{site.web_host}/acme/other.git", TOKEN, head="agent/fix", **args
        )
    )
    assert elsewhere.detail == "GitHub refused the pull request (HTTP 404): Not Found"
    assert not site.fake.pulls


async def test_github_s_own_trouble_is_worth_a_retry(site: Site, host: GitHubHost) -> None:
    site.fake.fail_next(502)
    args = {"head": "agent/fix", "base": "main", "title": "t", "body": "b"}
    error = await _refused(host.open_pull_request(site.repo, TOKEN, **args))
    assert (error.detail, error.permanent) == (
        "GitHub refused the pull request (HTTP 502): Server Error",
        False,
    )
    assert (await host.open_pull_request(site.repo, TOKEN, **args)).number == 1


async def test_the_request_is_as_github_documents_it(site: Site) -> None:
    seen: list[httpx.Request] = []

    async def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(201, json={"html_url": "https://github.com/a/b/pull/7", "number": 7})

    client = httpx.AsyncClient(transport=httpx.MockTransport(record))
    host = GitHubHost(OPEN, client=client)
    pull = await host.open_pull_request(
        "https://github.com/acme/widgets.git", TOKEN, head="h", base="main", title="t", body="b"
    )
    assert pull == PullRequest(url="https://github.com/a/b/pull/7", number=7)
    [request] = seen
    assert (request.method, str(request.url)) == (
        "POST",
        "https://api.github.com/repos/acme/widgets/pulls",
    )
    assert request.headers["authorization"] == f"Bearer {TOKEN}"
    assert request.headers["accept"] == "application/vnd.github+json"
    assert request.headers["x-github-api-version"] == "2022-11-28"
    assert request.headers["user-agent"] == "agentsvc"
    assert request.read() == b'{"title":"t","head":"h","base":"main","body":"b"}'
    await host.aclose()


async def test_the_outbound_guard_refuses_a_private_api() -> None:
    guard = OutboundGuard(
        allow_private_network=False, resolver=fake_dns({"gh.internal": ["10.1.2.3"]})
    )
    host = GitHubHost(guard, api_url="https://gh.internal/api/v3", web_host="gh.internal")
    error = await _refused(
        host.open_pull_request(
            "https://gh.internal/acme/widgets.git",
            TOKEN,
            head="h",
            base="main",
            title="t",
            body="b",
        )
    )
    assert (error.detail, error.permanent) == (
        "refused by the outbound guard: gh.internal resolves to a private address",
        True,
    )
    plain = GitHubHost(guard, api_url="http://127.0.0.1:9")
    error = await _refused(
        plain.open_pull_request(
            "https://github.com/acme/widgets", TOKEN, head="h", base="main", title="t", body="b"
        )
    )
    assert error.detail.startswith("refused by the outbound guard: plain http:// is refused")
    assert error.permanent
    await host.aclose()
    await plain.aclose()


EXISTS = {
    "message": "Validation Failed",
    "errors": [
        {
            "resource": "PullRequest",
            "code": "custom",
            "message": "A pull request already exists for acme:h.",
        }
    ],
}
REFUSED = "GitHub refused the pull request (HTTP "
NONE_OPEN = "GitHub says a pull request from that branch exists, but lists none open"
NO_ACCESS = "Resource not accessible by personal access token"
ODD = {"message": "Validation Failed", "errors": ["head is odd", {"code": "missing"}]}


@pytest.mark.parametrize(
    ("answers", "detail", "permanent"),
    [
        (
            [(403, {"message": "API rate limit exceeded for user."})],
            REFUSED + "403): API rate limit exceeded for user.",
            False,
        ),
        ([(403, {"message": NO_ACCESS})], REFUSED + f"403): {NO_ACCESS}", True),
        ([(429, {"message": "slow down"})], REFUSED + "429): slow down", False),
        ([(500, {})], REFUSED + "500): no reason given", False),
        ([(422, ODD)], REFUSED + "422): Validation Failed: head is odd: missing", True),
        ([(422, [])], REFUSED + "422): no reason given", True),
        ([(422, {"message": "x" * 600})], REFUSED + "422): " + "x" * 500, True),
        (
            [(422, {"errors": [{"field": "base", "code": "invalid"}]})],
            REFUSED + "422): no reason given: base invalid",
            True,
        ),
        (
            [(502, b"<html>Bad gateway</html>")],
            "GitHub answered HTTP 502 without a JSON body",
            False,
        ),
        ([(201, {"number": 3})], "GitHub answered a pull request without its address", False),
        ([(422, EXISTS), (200, [])], NONE_OPEN, False),
        ([(422, EXISTS), (200, {})], NONE_OPEN, False),
        (
            [(422, EXISTS), (401, {"message": "Bad credentials"})],
            "GitHub refused the token (HTTP 401): Bad credentials",
            True,
        ),
    ],
)
async def test_every_answer_github_may_give_is_named(
    answers: list[tuple[int, object]], detail: str, permanent: bool
) -> None:
    seen: list[httpx.Request] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        status, body = answers[len(seen) - 1]
        if isinstance(body, bytes):
            return httpx.Response(status, content=body)
        return httpx.Response(status, json=body)

    host = GitHubHost(OPEN, client=httpx.AsyncClient(transport=httpx.MockTransport(answer)))
    error = await _refused(
        host.open_pull_request(
            "https://github.com/acme/widgets", TOKEN, head="h", base="main", title="t", body="b"
        )
    )
    assert (error.detail, error.permanent) == (detail, permanent)
    assert len(seen) == len(answers)
    if len(seen) == 2:
        listed = seen[1]
        assert (listed.method, listed.url.path) == ("GET", "/repos/acme/widgets/pulls")
        assert dict(listed.url.params) == {"head": "acme:h", "base": "main", "state": "open"}
        assert listed.headers["authorization"] == f"Bearer {TOKEN}"
    await host.aclose()


async def test_a_github_that_cannot_be_reached_is_worth_a_retry() -> None:
    async with Listener() as listener:
        port = listener.port
    host = GitHubHost(OPEN, api_url=f"http://127.0.0.1:{port}")  # closed now
    error = await _refused(
        host.open_pull_request(
            "https://github.com/acme/widgets", TOKEN, head="h", base="main", title="t", body="b"
        )
    )
    assert (error.detail, error.permanent) == ("could not reach 127.0.0.1", False)
    await host.aclose()


def test_the_fake_is_as_strict_as_github() -> None:
    """What the adapter never sends wrong is still refused as GitHub refuses it."""
    git = GitServer()
    git.commit({"a": b"a"})
    git.commit({"a": b"b"}, branch="topic")
    fake = FakeGitHub(git)
    good = {"user-agent": "t", "authorization": f"Bearer {TOKEN}"}
    pulls = "/repos/acme/widgets/pulls"

    def post(fields: object, headers: dict[str, str] = good) -> tuple[int, str]:
        status, answer = fake.answer("POST", pulls, headers, {}, json.dumps(fields).encode())
        return status, answer.get("message", "") if isinstance(answer, dict) else ""

    fields = {"title": "t", "head": "topic", "base": "main"}
    assert post(fields, {"authorization": f"Bearer {TOKEN}"})[0] == 403  # no User-Agent
    assert post(fields, {**good, "x-github-api-version": "2020-01-01"})[0] == 400
    assert post(fields, {"user-agent": "t"}) == (401, "Requires authentication")
    assert post(fields, {**good, "authorization": "Bearer nope"}) == (401, "Bad credentials")
    assert post({"head": "topic", "base": "main"}) == (
        422,
        'Invalid request.\n\n"title" wasn\'t supplied.',
    )
    assert post({**fields, "head": "other:topic"}) == (422, "Validation Failed")
    assert post({**fields, "base": "nope"}) == (422, "Validation Failed")
    assert fake.answer("POST", pulls, good, {}, b"{")[0] == 400
    assert fake.answer("GET", "/repos/acme/other/pulls", good, {}, b"")[0] == 404
    assert post(fields)[0] == 201
    status, answer = fake.answer("POST", pulls, good, {}, json.dumps(fields).encode())
    assert (status, answer["errors"][0]["message"]) == (
        422,
        "A pull request already exists for acme:topic.",
    )
    listed = fake.answer("GET", pulls, good, {"head": "acme:topic", "state": "open"}, b"")
    assert [p["number"] for p in listed[1]] == [1]
    assert fake.answer("GET", pulls, good, {"head": "topic"}, b"")[1] == []
