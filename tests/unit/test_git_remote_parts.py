"""The git remote's pure parts: the receive-pack request and its report
(``git/wire.py``), the default branch an advertisement names, and the commit a
push makes (``git/commits.py``). The whole exchange against a real server is in
tests/contract/test_git_remote.py."""

from __future__ import annotations

from io import BytesIO

import pytest
from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Blob, Commit
from dulwich.pack import PackData, PackInflater
from dulwich.protocol import pkt_line

from agentsvc_adapters.git.commits import (
    build,
    check_author,
    check_branch,
    check_path,
    pack_of,
    same_change,
)
from agentsvc_adapters.git.errors import GitFailure
from agentsvc_adapters.git.objects import entries
from agentsvc_adapters.git.wire import (
    Advertisement,
    ReportReceiver,
    parse_advertisement,
    receive_request,
)
from tests.fakes.git import GitServer

NEW = b"b" * 40
REF = b"refs/heads/agent/fix"
AUTHOR = "Agent <agent@example.com>"


def test_the_request_creates_the_ref_and_asks_for_the_report() -> None:
    caps = frozenset({b"report-status", b"side-band-64k", b"quiet", b"agent", b"delete-refs"})
    body = receive_request(NEW, REF, caps, b"PACK...")
    command = b"0" * 40 + b" " + NEW + b" " + REF
    command += b"\0report-status side-band-64k quiet agent=agentsvc\n"
    assert body == pkt_line(command) + b"0000" + b"PACK..."
    plain = receive_request(NEW, REF, frozenset({b"report-status"}), b"P")
    assert plain == pkt_line(b"0" * 40 + b" " + NEW + b" " + REF + b"\0report-status\n") + b"0000P"
    with pytest.raises(GitFailure, match="report-status"):
        receive_request(NEW, REF, frozenset({b"side-band-64k"}), b"P")


def _report(*lines: bytes) -> bytes:
    return b"".join(pkt_line(line) for line in lines) + b"0000"


def _banded(inner: bytes, *extra: bytes) -> bytes:
    return pkt_line(b"\x02progress\n") + pkt_line(b"\x01" + inner) + b"".join(extra) + b"0000"


def _finish(answer: bytes, *, sideband: bool, chunk: int = 7) -> None:
    receiver = ReportReceiver(sideband=sideband)
    for at in range(0, len(answer), chunk):  # as it arrives, in pieces
        receiver.feed(answer[at : at + chunk])
    receiver.finish("git.test", REF)


def test_an_ok_for_the_ref_is_success_with_or_without_side_band() -> None:
    report = _report(b"unpack ok\n", b"ok refs/heads/other\n", b"ok " + REF + b"\n")
    _finish(report, sideband=False)
    _finish(_banded(report), sideband=True)


@pytest.mark.parametrize(
    ("answer", "sideband", "detail", "permanent"),
    [
        (
            _report(b"unpack ok\n", b"ng " + REF + b" failed to update ref\n"),
            False,
            "git.test refused the push: failed to update ref",
            True,
        ),
        (
            _banded(_report(b"unpack ok\n", b"ng " + REF + b" protected branch hook declined\n")),
            True,
            "git.test refused the push: protected branch hook declined",
            True,
        ),
        (
            _report(b"unpack index-pack abnormal exit\n", b"ng " + REF + b" unpacker error\n"),
            False,
            "git.test could not unpack the push: index-pack abnormal exit",
            True,
        ),
        (
            _report(b"unpack ok\n", b"ok refs/heads/other\n"),
            False,
            "git.test did not report on refs/heads/agent/fix",
            True,
        ),
        (
            _report(b"unpack ok\n", b"ng refs/heads/other nope\n"),
            False,
            "git.test did not report on refs/heads/agent/fix",
            True,
        ),
        (pkt_line(b"unpack ok\n"), False, "git.test sent no complete report on the push", False),
        (b"0000", False, "git.test sent no complete report on the push", False),
        (
            _report(b"ok " + REF + b"\n"),
            False,
            "git.test sent no complete report on the push",
            False,
        ),
        (
            _banded(b"", pkt_line(b"\x03disk full\n")),
            True,
            "git.test refused the push: disk full",
            True,
        ),
        (pkt_line(b"ERR access denied\n"), False, "git.test refused the push: access denied", True),
        (
            b"<html>oops</html>",
            False,
            "git.test refused the push: an answer that is not git's protocol",
            True,
        ),
        (
            pkt_line(b"\x01zzzz"),
            True,
            "git.test refused the push: an answer that is not git's protocol",
            True,
        ),
    ],
)
def test_a_refusal_or_a_broken_report_is_named(
    answer: bytes, sideband: bool, detail: str, permanent: bool
) -> None:
    with pytest.raises(GitFailure) as caught:
        _finish(answer, sideband=sideband)
    assert (caught.value.detail, caught.value.permanent) == (detail, permanent)


def _advertised(first: bytes, *rest: bytes, service: bytes = b"git-receive-pack") -> Advertisement:
    body = pkt_line(b"# service=" + service + b"\n") + b"0000"
    body += b"".join(pkt_line(line) for line in (first, *rest)) + b"0000"
    return parse_advertisement(body, "git.test", service)


def test_the_default_branch_is_the_one_head_names() -> None:
    a, c = b"a" * 40, b"c" * 40
    said = _advertised(
        a + b" HEAD\0report-status symref=HEAD:refs/heads/trunk agent=x\n",
        a + b" refs/heads/main\n",
        a + b" refs/heads/trunk\n",
    )
    assert (said.head, said.default_branch()) == (b"refs/heads/trunk", "trunk")
    assert said.capabilities == frozenset({b"report-status", b"symref", b"agent"})
    unsaid = _advertised(
        a + b" HEAD\0ofs-delta\n", c + b" refs/heads/dev\n", a + b" refs/heads/x\n"
    )
    assert (unsaid.head, unsaid.default_branch()) == (None, "x")
    both = _advertised(a + b" HEAD\0ofs-delta\n", a + b" refs/heads/a\n", a + b" refs/heads/main\n")
    assert both.default_branch() == "main"
    assert _advertised(c + b" refs/heads/dev\0ofs-delta\n").default_branch() == "HEAD"
    upload = pkt_line(b"# service=git-upload-pack\n") + b"0000" + pkt_line(a + b" HEAD\0x\n")
    with pytest.raises(GitFailure, match="not git's smart HTTP protocol"):
        parse_advertisement(upload + b"0000", "git.test", b"git-receive-pack")


@pytest.mark.parametrize("path", ["a.txt", "src/a.py", ".github/workflows/ci.yml", "a/.gitignore"])
def test_paths_a_commit_can_hold(path: str) -> None:
    check_path(path)


@pytest.mark.parametrize(
    "path", ["", "/a", "a/", "a//b", "./a", "a/../b", "..", ".git", "a/.GIT/config", "a\0b"]
)
def test_paths_a_commit_cannot_hold(path: str) -> None:
    with pytest.raises(GitFailure, match="cannot commit the path"):
        check_path(path)


@pytest.mark.parametrize("branch", ["main", "agent/fix-1", "a.b", "feature/x_y", "v1@2"])
def test_branch_names_git_takes(branch: str) -> None:
    check_branch(branch)


@pytest.mark.parametrize(
    "branch",
    [
        "", "a b", "a..b", "a~1", "a^", "a:b", "a?", "a*", "a[b", "a\\b", "a@{1}", "a//b",
        "/a", "a/", "-a", ".a", "a/.b", "a.lock", "a.lock/b", "a.", "@", "a\x7f", "a\tb",
    ],
)  # fmt: skip
def test_branch_names_git_refuses(branch: str) -> None:
    with pytest.raises(GitFailure, match="is not a valid branch name"):
        check_branch(branch)


def test_an_author_reads_name_and_email() -> None:
    check_author(AUTHOR)
    for bad in (
        "Agent",
        "<a@b>",
        "Agent <a@b",
        "Agent  <a b@c>",
        "A <a@b> x",
        "A\n <a@b>",
        " <a@b>",
    ):
        with pytest.raises(GitFailure, match="the author must read"):
            check_author(bad)


def _base() -> tuple[MemoryObjectStore, bytes]:
    server = GitServer()
    sha = server.commit(
        {"keep.txt": b"keep", "run.sh": (0o100755, b"#!/bin/sh\n"), "d/old.txt": b"old"}
    )
    store = MemoryObjectStore()
    for obj_id in server.repo.object_store:
        store.add_object(server.repo.object_store[obj_id])
    return store, sha.encode()


def _tree(store: MemoryObjectStore, commit: Commit) -> dict[str, tuple[int, bytes]]:
    found = {}
    for path, mode, sha in entries(store, commit.tree):
        obj = store[sha]
        assert isinstance(obj, Blob)
        found[path] = (mode, obj.data)
    return found


def test_a_commit_lays_the_changes_over_the_base_and_brings_only_new_objects() -> None:
    store, base = _base()
    made = build(
        store,
        base,
        {"run.sh": b"#!/bin/sh\necho\n", "new/a.txt": b"a", "d/old.txt": None, "gone": None},
        message="Change",
        author=AUTHOR,
        when=1_800_000_000,
    )
    commit = made.commit
    assert made.new[-1] is commit
    assert (commit.parents, commit.author, commit.committer) == (
        [base],
        AUTHOR.encode(),
        AUTHOR.encode(),
    )
    assert (commit.author_time, commit.commit_time, commit.message) == (
        1_800_000_000,
        1_800_000_000,
        b"Change\n",
    )
    for obj in made.new:
        store.add_object(obj)
    assert _tree(store, commit) == {
        "keep.txt": (0o100644, b"keep"),
        "run.sh": (0o100755, b"#!/bin/sh\necho\n"),  # the executable bit is kept
        "new/a.txt": (0o100644, b"a"),
    }
    # the unchanged blob is not sent again; the changed ones, the trees and the commit are
    kinds = sorted(type(obj).__name__ for obj in made.new)
    assert kinds == ["Blob", "Blob", "Commit", "Tree", "Tree"]
    assert (
        build(store, base, {}, message="same\n", author=AUTHOR, when=1).commit.message == b"same\n"
    )


def test_a_path_that_would_be_a_file_and_a_folder_is_refused() -> None:
    store, base = _base()
    with pytest.raises(GitFailure, match=r"'keep\.txt' would be both a file and a folder"):
        build(store, base, {"keep.txt/x": b"x"}, message="m", author=AUTHOR, when=1)
    with pytest.raises(GitFailure, match="'d' would be both a file and a folder"):
        build(store, base, {"d": b"x"}, message="m", author=AUTHOR, when=1)
    made = build(store, base, {"d": b"x", "d/old.txt": None}, message="m", author=AUTHOR, when=1)
    assert made.commit.parents == [base]


def test_the_same_change_made_later_is_the_same_but_nothing_else() -> None:
    store, base = _base()

    def made(when: int, **kw: object) -> Commit:
        args: dict[str, object] = {"message": "m", "author": AUTHOR, "when": when}
        changes = kw.pop("changes", {"a": b"a"})
        return build(store, base, changes, **{**args, **kw}).commit  # type: ignore[arg-type]

    first = made(1)
    assert same_change(first, made(99))
    assert not same_change(first, made(1, message="other"))
    assert not same_change(first, made(1, author="Other <o@example.com>"))
    assert not same_change(first, made(1, changes={"a": b"b"}))
    other = made(1)
    other.parents = [b"c" * 40]
    assert not same_change(first, other)


def test_the_pack_holds_the_objects_given() -> None:
    blobs = [Blob.from_string(b"one"), Blob.from_string(b"two")]
    pack = pack_of(list(blobs))
    data = PackData.from_file(BytesIO(pack))
    assert sorted(obj.id for obj in PackInflater.for_pack_data(data)) == sorted(b.id for b in blobs)
