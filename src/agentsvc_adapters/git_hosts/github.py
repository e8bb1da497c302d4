"""``GitHubHost``: pull requests through GitHub's REST API, through the outbound
guard's client.

``POST {AGENTSVC_GITHUB_API_URL}/repos/{owner}/{repo}/pulls`` with ``title``,
``head`` (the pushed branch), ``base`` and ``body``, the token as
``Authorization: Bearer``, ``Accept: application/vnd.github+json`` and
``X-GitHub-Api-Version``; 201 answers the pull request (``html_url``,
``number``). A retry finds the one it opened before: GitHub answers 422
``Validation Failed`` with the error ``A pull request already exists for
owner:branch.``, and ``GET .../pulls?head=owner:branch&base=...&state=open``
lists it.

``serves`` takes a repository URL on the git host GitHub's web answers on
(``AGENTSVC_GITHUB_HOST``, ``github.com`` by default; a GitHub Enterprise
server's host, or a loopback fake's ``host:port``): ``<host>/<owner>/<repo>``,
with or without ``.git``.

Errors are ``GitHostError`` with GitHub's own message, never the token;
``permanent`` unless the network, a rate limit or GitHub's own trouble (5xx)
was the cause.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from agentsvc_adapters.outbound import OutboundGuard, failure, note_refusal, refusal_of
from agentsvc_core.ports.git_remotes import GitHost, GitHostError, PullRequest

__all__ = ["API_VERSION", "GITHUB_API_URL", "GITHUB_HOST", "GitHubHost", "github_from_env"]

GITHUB_API_URL = "https://api.github.com"
GITHUB_HOST = "github.com"
API_VERSION = "2022-11-28"
_TIMEOUT_S = 15.0
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
_EXISTS = "A pull request already exists"


def github_from_env(guard: OutboundGuard, env: Mapping[str, str] | None = None) -> GitHubHost:
    """The host from ``AGENTSVC_GITHUB_API_URL`` and ``AGENTSVC_GITHUB_HOST``
    (None: the process's environment)."""
    env = os.environ if env is None else env
    api_url = env.get("AGENTSVC_GITHUB_API_URL", "").strip() or GITHUB_API_URL
    web_host = env.get("AGENTSVC_GITHUB_HOST", "").strip() or GITHUB_HOST
    return GitHubHost(guard, api_url=api_url, web_host=web_host)


def _message(answer: Any) -> str:
    """GitHub's reason: its ``message`` and each error's, or its field and code."""
    if not isinstance(answer, dict):
        return "no reason given"
    parts = [str(answer.get("message") or "no reason given")]
    for error in answer.get("errors") or []:
        if isinstance(error, dict):
            said = error.get("message") or " ".join(
                str(error[k]) for k in ("field", "code") if error.get(k)
            )
            parts.append(str(said))
        else:
            parts.append(str(error))
    return ": ".join(p for p in parts if p)[:500]


def _exists(answer: Any) -> bool:
    errors = answer.get("errors") if isinstance(answer, dict) else None
    return any(
        isinstance(e, dict) and str(e.get("message", "")).startswith(_EXISTS) for e in errors or []
    )


def _pull(answer: Any) -> PullRequest:
    if (
        isinstance(answer, dict)
        and isinstance(answer.get("html_url"), str)
        and isinstance(answer.get("number"), int)
    ):
        return PullRequest(url=answer["html_url"], number=answer["number"])
    raise GitHostError("GitHub answered a pull request without its address", permanent=False)


class GitHubHost(GitHost):
    """Over one pooled guarded client (``aclose`` at shutdown); ``client``
    replaces the guard's own."""

    def __init__(
        self,
        guard: OutboundGuard,
        *,
        api_url: str = GITHUB_API_URL,
        web_host: str = GITHUB_HOST,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._guard = guard
        self.api_url = api_url.rstrip("/")
        self.web_host = web_host.lower()
        self._http = client or guard.http_client(timeout=_TIMEOUT_S)

    async def aclose(self) -> None:
        await self._http.aclose()

    def _repo_of(self, repo_url: str) -> tuple[str, str] | None:
        try:
            parts = urlsplit(repo_url)
            host = (parts.hostname or "").lower()
            port = parts.port
        except ValueError:
            return None
        where = host if port is None else f"{host}:{port}"
        if parts.scheme not in ("http", "https") or "@" in parts.netloc or where != self.web_host:
            return None
        names = parts.path.strip("/").split("/")
        if len(names) != 2 or parts.query or parts.fragment:
            return None
        owner, repo = names[0], names[1].removesuffix(".git")
        if not (_NAME.fullmatch(owner) and _NAME.fullmatch(repo)) or repo in (".", ".."):
            return None
        return owner, repo

    def serves(self, repo_url: str) -> bool:
        return self._repo_of(repo_url) is not None

    async def open_pull_request(
        self, repo_url: str, token: str | None, *, head: str, base: str, title: str, body: str
    ) -> PullRequest:
        found = self._repo_of(repo_url)
        if found is None:
            raise GitHostError(f"not a repository on {self.web_host}", permanent=True)
        if not token:
            raise GitHostError("GitHub needs a token to open a pull request", permanent=True)
        owner, repo = found
        pulls = f"{self.api_url}/repos/{owner}/{repo}/pulls"
        fields = {"title": title, "head": head, "base": base, "body": body}
        status, answer = await self._call("POST", pulls, token, json=fields)
        if status == 201:
            return _pull(answer)
        if status != 422 or not _exists(answer):
            raise _refused(status, answer)
        query = {"head": f"{owner}:{head}", "base": base, "state": "open"}
        status, listed = await self._call("GET", pulls, token, params=query)
        if status != 200:
            raise _refused(status, listed)
        if not isinstance(listed, list) or not listed:
            raise GitHostError(
                "GitHub says a pull request from that branch exists, but lists none open",
                permanent=False,
            )
        return _pull(listed[0])

    async def _call(self, method: str, url: str, token: str, **kwargs: Any) -> tuple[int, Any]:
        why = self._guard.refusal(url)
        if why:
            note_refusal(f"git host: {why}")
            raise GitHostError(f"refused by the outbound guard: {why}", permanent=True)
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION,
            "User-Agent": "agentsvc",
        }
        try:
            resp = await self._http.request(method, url, headers=headers, **kwargs)
        except httpx.HTTPError as exc:
            permanent = refusal_of(exc) is not None
            raise GitHostError(failure(exc, url), permanent=permanent) from None
        try:
            return resp.status_code, resp.json()
        except ValueError:
            raise GitHostError(
                f"GitHub answered HTTP {resp.status_code} without a JSON body", permanent=False
            ) from None


def _refused(status: int, answer: Any) -> GitHostError:
    limited = status == 429 or (status == 403 and "rate limit" in _message(answer).lower())
    what = "the token" if status == 401 else "the pull request"
    return GitHostError(
        f"GitHub refused {what} (HTTP {status}): {_message(answer)}",
        permanent=not limited and status < 500,
    )
