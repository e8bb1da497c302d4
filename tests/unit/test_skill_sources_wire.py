"""Git's smart HTTP protocol as the skill source speaks it: the refs a server
advertises, the one request it sends and the answer it sorts (docs/skills.md,
"Where a skill comes from")."""

from __future__ import annotations

import pytest
from dulwich.protocol import pkt_line

from agentsvc_adapters.git.errors import GitFailure
from agentsvc_adapters.git.wire import (
    PackReceiver,
    ServerRefused,
    parse_advertisement,
    upload_request,
)

MAIN, DEV, TAG, COMMIT = (c * 40 for c in "abcd")
CAPS = (
    b"multi_ack side-band-64k ofs-delta shallow no-progress agent=JGit/6.0=x"
    b" symref=HEAD:refs/heads/main"
)


def advertisement(*lines: bytes, service: bytes = b"# service=git-upload-pack\n") -> bytes:
    return pkt_line(service) + pkt_line(None) + b"".join(map(pkt_line, lines)) + pkt_line(None)


REFS = advertisement(
    f"{MAIN} HEAD\0".encode() + CAPS + b"\n",
    f"{DEV} refs/heads/dev\n".encode(),
    f"{MAIN} refs/heads/main\n".encode(),
    f"{TAG} refs/tags/v1\n".encode(),
    f"{COMMIT} refs/tags/v1^{{}}\n".encode(),
    f"{DEV} refs/tags/main\n".encode(),
    f"{TAG} refs/heads/fiX\n".encode(),  # a name may end in any letter
)


def test_the_refs_name_commits_and_tags_name_what_they_point_at() -> None:
    adv = parse_advertisement(REFS, "git.test")
    assert adv.capabilities == {
        b"multi_ack", b"side-band-64k", b"ofs-delta", b"shallow", b"no-progress", b"agent",
        b"symref",
    }  # fmt: skip
    names = (None, "HEAD", "dev", "main", "v1", "refs/tags/main", "fiX")
    wants = {ref: adv.want(ref) for ref in names}
    assert {ref: sha.decode() for ref, sha in wants.items()} == {
        None: MAIN,
        "HEAD": MAIN,
        "dev": DEV,
        "main": MAIN,  # the branch, not the tag called main
        "v1": COMMIT,  # the commit the annotated tag points at
        "refs/tags/main": DEV,
        "fiX": TAG,
    }
    assert adv.want("E" * 40) == b"e" * 40  # a sha is asked for as it is, in lower case
    assert adv.advertises(COMMIT.encode())
    assert not adv.advertises(b"e" * 40)
    for missing in ("nope", "refs/heads/nope", "heads/main", "e" * 39):
        with pytest.raises(GitFailure, match=f"ref '{missing}' not found in the repository"):
            adv.want(missing)


def test_an_empty_repository_has_no_head() -> None:
    empty = advertisement(b"0" * 40 + b" capabilities^{}\0" + CAPS + b"\n")
    adv = parse_advertisement(empty, "git.test")
    assert adv.refs == {}
    assert b"shallow" in adv.capabilities
    with pytest.raises(GitFailure) as caught:
        adv.want(None)
    assert caught.value.detail == "the repository has no HEAD (is it empty?)"


@pytest.mark.parametrize(
    "body",
    [
        b"<html>Not Found</html>",
        b"",
        advertisement(f"{MAIN} HEAD\0".encode() + CAPS, service=b"# service=git-receive-pack\n"),
        pkt_line(b"# service=git-upload-pack\n") + pkt_line(f"{MAIN} HEAD\n".encode()),
        advertisement(b"not-a-sha HEAD\0" + CAPS),
        advertisement(f"{MAIN}\0".encode() + CAPS),
        advertisement(f"{MAIN} HEAD\0".encode() + CAPS)[:-4],  # no closing flush
    ],
)
def test_an_answer_that_is_not_an_advertisement_is_not_git(body: bytes) -> None:
    with pytest.raises(GitFailure) as caught:
        parse_advertisement(body, "git.test")
    assert (
        caught.value.detail == "git.test answered something that is not git's smart HTTP protocol"
    )


def test_the_request_asks_for_one_commit_shallow_with_what_the_server_offers() -> None:
    caps = frozenset({b"side-band-64k", b"side-band", b"ofs-delta", b"thin-pack", b"shallow"})
    assert upload_request(MAIN.encode(), caps | {b"no-progress", b"agent"}) == (
        pkt_line(f"want {MAIN} side-band-64k ofs-delta thin-pack no-progress shallow ".encode()
                 + b"agent=agentsvc\n")
        + pkt_line(b"deepen 1\n") + pkt_line(None) + pkt_line(b"done\n")
    )  # fmt: skip
    assert upload_request(MAIN.encode(), frozenset({b"side-band"})) == (
        pkt_line(f"want {MAIN} side-band\n".encode()) + pkt_line(None) + pkt_line(b"done\n")
    )
    with pytest.raises(GitFailure) as caught:
        upload_request(MAIN.encode(), frozenset({b"ofs-delta", b"shallow"}))
    assert caught.value.detail == "the git server does not support side-band, which is required"


ANSWER = (
    pkt_line(f"shallow {MAIN}\n".encode())
    + pkt_line(None)
    + pkt_line(b"NAK\n")
    + pkt_line(b"\x02Counting objects: 3\n")
    + pkt_line(b"\x01PACK-one-")
    + pkt_line(b"\x02Total 3\n")
    + pkt_line(b"\x01two")
    + pkt_line(None)
)


def test_the_answer_keeps_the_pack_and_drops_the_rest_whatever_its_chunks() -> None:
    for size in (1, 3, 7, len(ANSWER)):
        receiver = PackReceiver()
        for at in range(0, len(ANSWER), size):
            receiver.feed(ANSWER[at : at + size])
        assert receiver.finish("git.test") == b"PACK-one-two"


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        (pkt_line(b"ERR not our ref\n"), "git.test refused the fetch: not our ref"),
        (ANSWER + pkt_line(b"\x03disk full\n"), "git.test refused the fetch: disk full"),
        (pkt_line(b"ERR caf\xe9\n"), "git.test refused the fetch: caf\ufffd"),
        (pkt_line(b"ERR " + b"x" * 300), "git.test refused the fetch: " + "x" * 200),
        (b"<html>oops</html>", "git.test refused the fetch: an answer that is not git's protocol"),
    ],
)  # fmt: skip
def test_the_server_s_own_reason_is_reported(answer: bytes, detail: str) -> None:
    receiver = PackReceiver()
    receiver.feed(answer)
    with pytest.raises(ServerRefused) as caught:
        receiver.finish("git.test")
    assert caught.value.detail == detail


def test_an_answer_without_a_whole_pack_is_refused() -> None:
    for answer in (pkt_line(b"NAK\n") + pkt_line(None), ANSWER[:-6]):
        receiver = PackReceiver()
        receiver.feed(answer)
        with pytest.raises(GitFailure, match=r"git\.test sent no complete pack"):
            receiver.finish("git.test")
