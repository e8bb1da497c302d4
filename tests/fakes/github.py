"""A loopback fake of GitHub's pull requests API (REST, version 2022-11-28), as
strict as GitHub where the git host adapter can get it wrong. Serve
``FakeGitHub`` with ``tests.web.live.serve``; its base URL is the adapter's
``api_url``. Branches are the fake git server's (tests/fakes/git.py).

Routes: ``POST /repos/{owner}/{repo}/pulls`` and ``GET`` the same (``state``,
``head`` as ``owner:branch``, ``base``). Every request needs a ``User-Agent``
(403 otherwise, as GitHub) and the token as ``Authorization: Bearer`` or
``token`` (none: 401 ``Requires authentication``; another: 401 ``Bad
credentials``); an ``X-GitHub-Api-Version`` GitHub does not know is 400; another
repository is 404. A pull request needs ``title``, ``head`` and ``base`` as
strings (422 ``Invalid request``), a head branch that exists in the git
repository, in this owner's repository (422 ``Validation Failed``, field
``head``, code ``invalid``), a base that exists (field ``base``), commits
between them (``No commits between ...``), and no open pull request from the
same head to the same base (``A pull request already exists for
owner:branch.``). ``pulls`` records them; ``fail_next(status)`` makes the next
request answer that status; ``calls``: every (method, path).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs

from tests.fakes.git import GitServer

TOKEN = "ghp_fakeGitHubToken0123456789abcdefABCD"
VERSIONS = frozenset({"2022-11-28"})
DOCS = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request"


def _error(message: str, status: int, **extra: Any) -> tuple[int, Any]:
    return status, {
        "message": message,
        **extra,
        "documentation_url": DOCS,
        "status": str(status),
    }


def _invalid(field: str) -> tuple[int, Any]:
    errors = [{"resource": "PullRequest", "field": field, "code": "invalid"}]
    return _error("Validation Failed", 422, errors=errors)


def _custom(message: str) -> tuple[int, Any]:
    errors = [{"resource": "PullRequest", "code": "custom", "message": message}]
    return _error("Validation Failed", 422, errors=errors)


class FakeGitHub:
    """One repository, ``owner/repo``, whose branches are ``git``'s."""

    def __init__(
        self,
        git: GitServer,
        owner: str = "acme",
        repo: str = "widgets",
        token: str = TOKEN,
        web_url: str = "https://github.com",
    ) -> None:
        self.git = git
        self.owner, self.repo, self.token, self.web_url = owner, repo, token, web_url
        self.pulls: list[dict[str, Any]] = []
        self.calls: list[tuple[str, str]] = []
        self._failures: list[int] = []

    def fail_next(self, status: int) -> None:
        self._failures.append(status)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        while True:
            event = await receive()
            body += event.get("body", b"")
            if not event.get("more_body"):
                break
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        query = {k: v[0] for k, v in parse_qs(scope["query_string"].decode()).items()}
        status, answer = self.answer(scope["method"], scope["path"], headers, query, body)
        out = json.dumps(answer).encode()
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(b"content-type", b"application/json; charset=utf-8")],
            }
        )
        await send({"type": "http.response.body", "body": out})

    def answer(
        self, method: str, path: str, headers: dict[str, str], query: dict[str, str], body: bytes
    ) -> tuple[int, Any]:
        self.calls.append((method, path))
        if self._failures:
            return _error("Server Error", self._failures.pop(0))
        if not headers.get("user-agent"):
            message = (
                "Request forbidden by administrative rules. "
                "Please make sure your request has a User-Agent header"
            )
            return _error(message, 403)
        version = headers.get("x-github-api-version")
        if version is not None and version not in VERSIONS:
            return _error(f"API version '{version}' is not supported.", 400)
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if not given:
            return _error("Requires authentication", 401)
        if scheme.lower() not in ("bearer", "token") or given != self.token:
            return _error("Bad credentials", 401)
        if path != f"/repos/{self.owner}/{self.repo}/pulls":
            return _error("Not Found", 404)
        if method == "GET":
            return 200, self._list(query)
        if method == "POST":
            return self._create(body)
        return _error("Not Found", 404)

    def _branch(self, name: str) -> bytes | None:
        ref = f"refs/heads/{name}".encode()
        return self.git.repo.refs[ref] if ref in self.git.repo.refs else None  # noqa: SIM401

    def _list(self, query: dict[str, str]) -> list[dict[str, Any]]:
        state = query.get("state", "open")
        found = [p for p in self.pulls if state == "all" or p["state"] == state]
        if "head" in query:
            found = [p for p in found if p["head"]["label"] == query["head"]]
        if "base" in query:
            found = [p for p in found if p["base"]["ref"] == query["base"]]
        return found

    def _create(self, body: bytes) -> tuple[int, Any]:
        try:
            fields = json.loads(body)
        except ValueError:
            return _error("Problems parsing JSON", 400)
        if not isinstance(fields, dict):
            return _error("Problems parsing JSON", 400)
        for name in ("title", "head", "base"):
            if not isinstance(fields.get(name), str):
                return _error(f'Invalid request.\n\n"{name}" wasn\'t supplied.', 422)
        if not isinstance(fields.get("body", ""), str | None):
            return _error("Invalid request.\n\nFor 'properties/body', it is not a string.", 422)
        owner, _, branch = fields["head"].rpartition(":")
        head_sha = self._branch(branch)
        if owner not in ("", self.owner) or head_sha is None:
            return _invalid("head")
        base_sha = self._branch(fields["base"])
        if base_sha is None:
            return _invalid("base")
        label = f"{self.owner}:{branch}"
        if head_sha == base_sha:
            return _custom(f"No commits between {fields['base']} and {label}")
        if any(
            p["head"]["label"] == label and p["base"]["ref"] == fields["base"]
            for p in self._list({})
        ):
            return _custom(f"A pull request already exists for {label}.")
        number = len(self.pulls) + 1
        pull = {
            "url": f"/repos/{self.owner}/{self.repo}/pulls/{number}",
            "id": 1000 + number,
            "number": number,
            "state": "open",
            "html_url": f"{self.web_url}/{self.owner}/{self.repo}/pull/{number}",
            "title": fields["title"],
            "body": fields.get("body"),
            "head": {"label": label, "ref": branch, "sha": head_sha.decode()},
            "base": {
                "label": f"{self.owner}:{fields['base']}",
                "ref": fields["base"],
                "sha": base_sha.decode(),
            },
        }
        self.pulls.append(pull)
        return 201, pull
