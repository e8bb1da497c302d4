"""A loopback git server: repositories made with dulwich's object API, served over
git's smart HTTP by dulwich's own WSGI application (``dulwich.web``), the server
side of the protocol nobody here wrote, plus a few plain pages.

Repositories are under ``/<name>.git/`` (``GitServer._git_route`` says which
misbehave how). Pages: ``/skill.md`` (a SKILL.md; ``/gzipped.md`` the same, always
gzipped; ``/untyped.md`` without a content type), ``/big.md?n=`` (``n`` bytes),
``/index.html`` and ``/page.xhtml`` (HTML pages), ``/to?url=`` (a 302 to ``url``),
``/hops?n=`` (``n`` redirects, then the SKILL.md), ``/loop`` (a 302 to itself),
``/nowhere`` (a 302 without a Location); anything else is a 404 page. Every answer
is gzipped when the client accepts gzip, as web servers and git hosts do.
``paths``: every request's path, in order.

Pushes (``git-receive-pack``) are taken, as GitHub takes them, only with the
credential ``GitServer(token=...)`` names, sent as HTTP Basic
``x-access-token:<token>`` (anything else, or none: 401 with a Basic
challenge); ``private=True`` asks for it to fetch too. The receive-pack is
dulwich's, made as strict as git's own (``_StrictReceivePack``): a command whose
old sha is not the ref's is refused (``ng <ref> failed to update ref``), and so
is a commit whose objects the repository does not all hold after the pack
(``ng <ref> missing necessary objects``). ``authorizations``: the
``Authorization`` header of every request (None when absent)."""

from __future__ import annotations

import base64
import gzip
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from dulwich.index import commit_tree
from dulwich.objects import Blob, Commit, Tag, Tree
from dulwich.protocol import ZERO_SHA, pkt_line
from dulwich.repo import MemoryRepo
from dulwich.server import DictBackend, ReceivePackHandler, UploadPackHandler
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


class _StrictReceivePack(ReceivePackHandler):
    """dulwich's receive-pack, refusing what git's own refuses (module docstring)."""

    def _apply_pack(self, refs: Any) -> Any:
        if any(new != ZERO_SHA for _, new, _ in refs):
            try:
                recv = getattr(self.proto, "recv", None)
                self.repo.object_store.add_thin_pack(self.proto.read, recv)  # type: ignore[attr-defined]
            except Exception as exc:  # noqa: BLE001 - reported as dulwich reports it
                yield (b"unpack", str(exc).replace("\n", "").encode())
                return
        yield (b"unpack", b"ok")
        for old, new, ref in refs:
            current = self.repo.refs[ref] if ref in self.repo.refs else ZERO_SHA  # noqa: SIM401
            if current != old:
                yield (ref, b"failed to update ref")
            elif new != ZERO_SHA and not self._connected(new):
                yield (ref, b"missing necessary objects")
            elif new == ZERO_SHA:
                self.repo.refs.remove_if_equals(ref, old)
                yield (ref, b"ok")
            else:
                self.repo.refs.set_if_equals(ref, old, new)
                yield (ref, b"ok")

    def _connected(self, sha: bytes) -> bool:
        """The commit, its parents and every object of its tree are here."""
        store = self.repo.object_store
        if sha not in store:
            return False
        commit = store[sha]
        if not isinstance(commit, Commit) or any(p not in store for p in commit.parents):
            return False
        trees = [commit.tree]
        while trees:
            tree_sha = trees.pop()
            if tree_sha not in store:
                return False
            tree = store[tree_sha]
            assert isinstance(tree, Tree)
            for entry in tree.iteritems():
                if stat.S_ISDIR(entry.mode):
                    trees.append(entry.sha)
                elif entry.mode != SUBMODULE and entry.sha not in store:
                    return False
        return True


class GitServer:
    """One repository (``repo``) and its helpers to add commits and tags;
    ``token``: the credential pushes need (none: no push is taken)."""

    def __init__(self, *, token: str | None = None, private: bool = False) -> None:
        self.repo = MemoryRepo.init_bare([], {})
        self.paths: list[str] = []
        self.authorizations: list[str | None] = []
        self.token = token
        self.private = private
        self.away: str | None = None  # where ``/away.git/`` redirects (another server)
        # (dulwich's BackendRepo protocol is stricter than its own MemoryRepo's types)
        backend = DictBackend({"/repo.git": self.repo})  # type: ignore[arg-type]
        handlers: dict[bytes, Any] = {
            b"git-upload-pack": UploadPackHandler,
            b"git-receive-pack": _StrictReceivePack,
        }
        self._git = make_wsgi_chain(backend, handlers=handlers)
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
        path: str = environ["PATH_INFO"]
        self.paths.append(path)
        self.authorizations.append(environ.get("HTTP_AUTHORIZATION"))
        query = {k: v[0] for k, v in parse_qs(environ.get("QUERY_STRING", "")).items()}
        gzip_ok = "gzip" in environ.get("HTTP_ACCEPT_ENCODING", "")
        repo, _, rest = path[1:].partition(".git/")
        if "//" in path:  # an empty path segment names nothing here
            rest, repo = "", ""
        if repo == "cut" and environ["REQUEST_METHOD"] == "POST":
            start_response("200 OK", [("Content-Type", RESULT), ("Content-Length", "1000")])
            return _cut_off()
        if rest:
            status, headers, body = self._git_route(environ, repo, rest)
        else:
            status, headers, body = _page(path, query)
        if gzip_ok or path == "/gzipped.md":  # as hosts do when the client accepts it
            body = gzip.compress(body)
            headers = [*headers, ("Content-Encoding", "gzip")]
        start_response(status, [*headers, ("Content-Length", str(len(body)))])
        return [body]

    def _git_route(self, environ: dict[str, Any], repo: str, rest: str) -> Answer:
        """``/repo.git``: dulwich's server (a POST must say what it carries, as
        git's own server requires); ``moved``: a redirect to it; ``away``: a
        redirect to the server ``away`` names; ``static``: a web
        server's plain file; ``garbage``: not pkt-lines; ``err``, ``text`` and
        ``cut``: the repository's refs, then a fetch answered with git's ``ERR``,
        with plain text, or cut off in the middle."""
        post = environ["REQUEST_METHOD"] == "POST"
        if repo == "moved":
            return "301 Moved", [("Location", f"/repo.git/{rest}?service=git-upload-pack")], b""
        if repo == "away" and self.away is not None:
            query = environ.get("QUERY_STRING", "")
            return "301 Moved", [("Location", f"{self.away}/repo.git/{rest}?{query}")], b""
        if repo == "static":
            return "200 OK", [("Content-Type", "text/plain")], b"ref: refs/heads/main\n"
        if repo == "garbage":
            return "200 OK", [("Content-Type", ADVERTISEMENT)], b"hello, this is not git\n"
        if post and repo == "err":
            return "200 OK", [("Content-Type", RESULT)], pkt_line(b"ERR out of disk space\n")
        if post and repo == "text":
            return "200 OK", [("Content-Type", "text/plain")], b"PACK"
        pushing = rest == "git-receive-pack" or "service=git-receive-pack" in environ.get(
            "QUERY_STRING", ""
        )
        if (pushing or self.private) and not self._authorized(environ):
            challenge = [
                ("WWW-Authenticate", 'Basic realm="GitHub"'),
                ("Content-Type", "text/plain"),
            ]
            return "401 Unauthorized", challenge, b"Invalid username or token.\n"
        service = "git-receive-pack" if pushing else "git-upload-pack"
        if post and environ.get("CONTENT_TYPE") != f"application/x-{service}-request":
            return "415 Unsupported Media Type", [], b""
        return self._dulwich({**environ, "PATH_INFO": f"/repo.git/{rest}"})

    def _authorized(self, environ: dict[str, Any]) -> bool:
        if self.token is None:
            return False
        expected = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        return environ.get("HTTP_AUTHORIZATION") == f"Basic {expected}"

    def files(self, ref: str) -> dict[str, tuple[int, bytes]]:
        """The tree at ``ref`` (a branch name), as path -> (mode, content)."""
        store = self.repo.object_store
        commit = store[self.repo.refs[f"refs/heads/{ref}".encode()]]
        assert isinstance(commit, Commit)
        found: dict[str, tuple[int, bytes]] = {}
        trees = [("", commit.tree)]
        while trees:
            prefix, sha = trees.pop()
            tree = store[sha]
            assert isinstance(tree, Tree)
            for entry in tree.iteritems():
                path = prefix + entry.path.decode()
                if stat.S_ISDIR(entry.mode):
                    trees.append((path + "/", entry.sha))
                elif entry.mode == SUBMODULE:
                    found[path] = (entry.mode, entry.sha)
                else:
                    blob = store[entry.sha]
                    assert isinstance(blob, Blob)
                    found[path] = (entry.mode, blob.data)
        return found

    def _dulwich(self, environ: dict[str, Any]) -> Answer:
        answer: list[Any] = []
        written: list[bytes] = []  # what the app writes through start_response's writer

        def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            answer[:] = [status, headers]
            return written.append

        returned = b"".join(self._git(environ, start))
        status, headers = answer
        kept = [(k, v) for k, v in headers if k.lower() != "content-length"]
        return status, kept, b"".join(written) + returned


Answer = tuple[str, list[tuple[str, str]], bytes]
ADVERTISEMENT = "application/x-git-upload-pack-advertisement"
RESULT = "application/x-git-upload-pack-result"


def _cut_off() -> Iterator[bytes]:
    """A body that ends after 12 of its 1000 bytes: wsgiref drops the connection."""
    yield pkt_line(b"NAK\n")
    raise ConnectionAbortedError("the answer is cut off")


def _page(path: str, query: dict[str, str]) -> Answer:
    match path:
        case "/skill.md" | "/gzipped.md":
            return "200 OK", [("Content-Type", "text/markdown; charset=utf-8")], SKILL
        case "/untyped.md":
            return "200 OK", [], SKILL
        case "/big.md":
            return "200 OK", [("Content-Type", "text/plain")], b"x" * int(query["n"])
        case "/index.html":
            return "200 OK", [("Content-Type", "text/html; charset=utf-8")], b"<html></html>"
        case "/page.xhtml":
            xhtml = "application/xhtml+xml; charset=utf-8; version=1.1"
            return "200 OK", [("Content-Type", xhtml)], b"<html></html>"
        case "/loop":
            return "302 Found", [("Location", "/loop")], b""
        case "/nowhere":
            return "302 Found", [], b""
        case "/to":
            return "302 Found", [("Location", query["url"])], b""
        case "/hops":
            n = int(query["n"])
            to = f"/hops?n={n - 1}" if n else "/skill.md"
            return "302 Found", [("Location", to)], b""
    return "404 Not Found", [("Content-Type", "text/html")], b"<h1>Not Found</h1>"


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
