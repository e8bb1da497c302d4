"""A loopback git server: repositories made with dulwich's object API, served over
git's smart HTTP by dulwich's own WSGI application (``dulwich.web``), the server
side of the protocol nobody here wrote, plus a few plain pages.

Routes (``GitServer.url``): ``/repo.git`` (the repository), ``/moved.git`` (its
discovery redirects to ``/repo.git``'s, as a renamed repository's does),
``/page`` (a plain 404 page), ``/skill.md`` (a SKILL.md), ``/big.md?n=`` (``n``
bytes), ``/index.html`` (an HTML page), ``/to?url=`` (a 302 to ``url``), ``/loop``
(a 302 to itself).
``paths``: every request's path, in order."""

from __future__ import annotations

import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from dulwich.index import commit_tree
from dulwich.objects import Blob, Commit, Tag
from dulwich.repo import MemoryRepo
from dulwich.server import DictBackend
from dulwich.web import make_wsgi_chain

SKILL = b"---\nname: brewing\ndescription: Brews tea.\n---\n\n# Brewing\n\nSteep briefly.\n"
LINK = 0o120000
SUBMODULE = 0o160000


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Threaded(WSGIServer):
    daemon_threads = True

    def process_request(self, request: Any, client_address: Any) -> None:
        threading.Thread(
            target=self._serve_one, args=(request, client_address), daemon=True
        ).start()

    def _serve_one(self, request: Any, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        finally:
            self.shutdown_request(request)


class GitServer:
    """One repository (``repo``) and its helpers to add commits and tags."""

    def __init__(self) -> None:
        self.repo = MemoryRepo.init_bare([], {})
        self.paths: list[str] = []
        # (dulwich's BackendRepo protocol is stricter than its own MemoryRepo's types)
        backend = DictBackend({"/repo.git": self.repo})  # type: ignore[arg-type]
        self._git = make_wsgi_chain(backend)
        self.url = ""
        self._when = 1_700_000_000

    def commit(self, files: dict[str, bytes | tuple[int, bytes]], branch: str = "main") -> str:
        """A commit of exactly ``files`` (path -> content, or (mode, content or the
        sha of a submodule's commit)) on ``branch``, whose tip it becomes; HEAD
        follows ``main``. Returns its sha."""
        entries = []
        for path, value in files.items():
            mode, content = value if isinstance(value, tuple) else (stat.S_IFREG | 0o644, value)
            if mode == SUBMODULE:
                entries.append((path.encode(), content, mode))
                continue
            blob = Blob.from_string(content)
            self.repo.object_store.add_object(blob)
            entries.append((path.encode(), blob.id, mode))
        ref = f"refs/heads/{branch}".encode()
        commit = Commit()
        commit.tree = commit_tree(self.repo.object_store, entries)
        commit.parents = [self.repo.refs[ref]] if ref in self.repo.refs else []
        commit.author = commit.committer = b"Test <test@example.com>"
        self._when += 60
        commit.author_time = commit.commit_time = self._when
        commit.author_timezone = commit.commit_timezone = 0
        commit.message = b"a commit\n"
        self.repo.object_store.add_object(commit)
        self.repo.refs[ref] = commit.id
        if branch == "main":
            self.repo.refs.set_symbolic_ref(b"HEAD", b"refs/heads/main")
        return commit.id.decode()

    def tag(self, name: str, sha: str, *, annotated: bool) -> None:
        target = sha.encode()
        if annotated:
            tag = Tag()
            tag.name = name.encode()
            tag.object = (Commit, target)
            tag.tagger = b"Test <test@example.com>"
            tag.tag_time = self._when
            tag.tag_timezone = 0
            tag.message = b"a release\n"
            self.repo.object_store.add_object(tag)
            target = tag.id
        self.repo.refs[f"refs/tags/{name}".encode()] = target

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        path = environ["PATH_INFO"]
        self.paths.append(path)
        query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        if path.startswith("/repo.git/"):
            return self._git(environ, start_response)
        if path == "/moved.git/info/refs":
            return _answer(
                start_response,
                "301 Moved Permanently",
                [("Location", "/repo.git/info/refs?service=git-upload-pack")],
                b"",
            )
        if path == "/skill.md":
            return _answer(start_response, "200 OK", [("Content-Type", "text/markdown")], SKILL)
        if path == "/big.md":
            return _answer(
                start_response, "200 OK", [("Content-Type", "text/plain")], b"x" * int(query["n"])
            )
        if path == "/index.html":
            return _answer(
                start_response, "200 OK", [("Content-Type", "text/html")], b"<html></html>"
            )
        if path == "/loop":
            return _answer(start_response, "302 Found", [("Location", "/loop")], b"")
        if path == "/to":
            return _answer(start_response, "302 Found", [("Location", query["url"])], b"")
        return _answer(
            start_response, "404 Not Found", [("Content-Type", "text/html")], b"<h1>Not Found</h1>"
        )


def _answer(
    start_response: Any, status: str, headers: list[tuple[str, str]], body: bytes
) -> list[bytes]:
    start_response(status, [*headers, ("Content-Length", str(len(body)))])
    return [body]


@contextmanager
def serve_git(server: GitServer) -> Iterator[str]:
    """``server`` on a free loopback port, in a thread; yields its base URL."""
    httpd = make_server("127.0.0.1", 0, server, server_class=_Threaded, handler_class=_Quiet)
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
    )
    thread.start()
    server.url = f"http://127.0.0.1:{httpd.server_port}"
    try:
        yield server.url
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)
