"""The pack a git server sends is bounded before dulwich unpacks it: objects whose
data inflates past what their header says, deltas that would rebuild more than
they declare, and packs that would unpack past the bound are refused without
being inflated (docs/skills.md, "Where a skill comes from")."""

from __future__ import annotations

import hashlib
import tracemalloc
import zlib

import pytest
from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Blob, Commit, ShaFile, Tag, Tree

from agentsvc_adapters.git.errors import GitFailure
from agentsvc_adapters.git.objects import MAX_OBJECTS, check_pack, commit_of, skill_files, unpack
from tests.fakes.git import GitServer

MB = 1024 * 1024
BLOB, REF_DELTA = 3, 7


def header(kind: int, size: int) -> bytes:
    out = bytearray([kind << 4 | size & 0x0F])
    size >>= 4
    while size:
        out[-1] |= 0x80
        out.append(size & 0x7F)
        size >>= 7
    return bytes(out)


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        out.append(n & 0x7F | (0x80 if n >> 7 else 0))
        n >>= 7
        if not n:
            return bytes(out)


def entry(kind: int, size: int, data: bytes, prefix: bytes = b"") -> bytes:
    return header(kind, size) + prefix + zlib.compress(data)


def pack(*entries: bytes, count: int | None = None) -> bytes:
    n = len(entries) if count is None else count
    body = b"PACK" + (2).to_bytes(4, "big") + n.to_bytes(4, "big") + b"".join(entries)
    return body + hashlib.sha1(body).digest()  # noqa: S324 - git's pack checksum


def copy(size: int) -> bytes:
    """A delta instruction copying ``size`` bytes (1..0xffffff) from offset 0."""
    return bytes([0x80 | 0x10 | 0x20 | 0x40]) + size.to_bytes(3, "little")


def refused(data: bytes, *, max_unpacked: int = MB) -> str:
    with pytest.raises(GitFailure) as caught:
        check_pack(data, max_unpacked=max_unpacked)
    return caught.value.detail


def test_an_honest_pack_passes_and_unpacks() -> None:
    data = pack(entry(BLOB, 5, b"hello"), entry(BLOB, 0, b""))
    check_pack(data, max_unpacked=5)
    store = unpack(data)
    assert sorted(store[sha].as_raw_string() for sha in store) == [b"", b"hello"]


def test_the_unpacked_bound_counts_every_object() -> None:
    data = pack(entry(BLOB, 5, b"hello"), entry(BLOB, 5, b"world"))
    check_pack(data, max_unpacked=10)
    assert refused(data, max_unpacked=9) == (
        "the repository at that commit is too large: more than 9 bytes unpacked"
    )


def test_an_object_that_inflates_past_its_header_is_stopped_early() -> None:
    bomb = pack(entry(BLOB, 10, bytes(64 * MB)))  # 64 MB of zeros, ~64 KB compressed
    tracemalloc.start()
    try:
        detail = refused(bomb, max_unpacked=100 * MB)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert detail == "the server sent a broken pack: an object is larger than its header says"
    assert peak < 5 * MB


def test_an_object_declared_over_the_bound_is_refused_before_it_is_inflated() -> None:
    assert refused(pack(entry(BLOB, 2 * MB, b"small")), max_unpacked=MB) == (
        "the repository at that commit is too large: more than 1048576 bytes unpacked"
    )


def test_a_delta_is_counted_at_the_size_it_rebuilds() -> None:
    base = b"0" * 20  # a ref delta: the base's sha, then the delta
    steps = [copy(0xFFFFFF)] * 13  # ~208 MB rebuilt from 52 bytes of instructions
    delta = varint(10) + varint(13 * 0xFFFFFF) + b"".join(steps)
    assert refused(pack(entry(REF_DELTA, len(delta), delta, base)), max_unpacked=100 * MB) == (
        "the repository at that commit is too large: more than 104857600 bytes unpacked"
    )


def test_a_delta_whose_instructions_outgrow_its_header_is_broken() -> None:
    delta = varint(10) + varint(5) + copy(0x10000)
    assert refused(pack(entry(REF_DELTA, len(delta), delta, b"0" * 20))) == (
        "the server sent a broken pack: a delta's instructions do not match its header"
    )
    inserted = varint(10) + varint(3) + b"\x03abc"
    check_pack(pack(entry(REF_DELTA, len(inserted), inserted, b"0" * 20)), max_unpacked=MB)
    unknown = varint(10) + varint(3) + b"\x00"
    assert refused(pack(entry(REF_DELTA, len(unknown), unknown, b"0" * 20))) == (
        "the server sent a broken pack: a delta holds an unknown instruction"
    )


@pytest.mark.parametrize(
    ("data", "why"),
    [
        (b"NOPE" + bytes(40), "it does not start like a pack"),
        (b"PACK" + (4).to_bytes(4, "big") + bytes(40), "its version is not 2 or 3"),
        (pack(entry(BLOB, 100, bytes(range(100))))[:-25], "it ends in the middle of an object"),
        (pack(entry(BLOB, 5, b"hello")) + b"x", "it does not end after its objects"),
        (pack(entry(5, 5, b"hello")), "an object has the unknown type 5"),
        (pack(entry(BLOB, 6, b"hello")), "an object is smaller than its header says"),
        (
            pack(header(BLOB, 5) + b"not zlib at all" + bytes(20)),
            "an object is not valid zlib data",
        ),
    ],
)
def test_a_malformed_pack_is_named_broken(data: bytes, why: str) -> None:
    assert refused(data) == f"the server sent a broken pack: {why}"


def test_a_pack_announcing_too_many_objects_is_refused_unread() -> None:
    assert refused(pack(count=MAX_OBJECTS + 1)) == (
        f"the repository has too many objects: more than {MAX_OBJECTS}"
    )


def test_a_tree_entry_that_would_leave_the_skill_is_refused() -> None:
    server = GitServer()
    sha = server.commit({"SKILL.md": b"# x\n", "../evil.md": b"x"})
    store = server.repo.object_store
    with pytest.raises(GitFailure, match=r"the repository holds an unsafe file name: '\.\.'"):
        skill_files(store, sha.encode(), (), max_files=10, max_file_bytes=MB)  # type: ignore[arg-type]
    assert commit_of(store, sha.encode()) == sha.encode()  # type: ignore[arg-type]


def test_a_pack_cut_in_an_object_header_or_a_delta_is_broken() -> None:
    head = b"PACK" + (2).to_bytes(4, "big") + (1).to_bytes(4, "big")
    assert refused(head) == "the server sent a broken pack: it ends in the middle of an object"
    for delta, why in (
        (b"\x80", "a delta ends in its header"),
        (varint(5) + varint(6) + b"\x90", "a delta ends in an instruction"),
    ):
        assert refused(pack(entry(REF_DELTA, len(delta), delta, b"0" * 20))) == (
            f"the server sent a broken pack: {why}"
        )


def test_honest_delta_instructions_add_up() -> None:
    for delta in (
        varint(10) + varint(0x10000) + b"\x80",  # a copy with no size bytes copies 64 KiB
        varint(10) + varint(0x10000) + copy(0x10000),
        varint(10) + varint(5) + b"\x02ab\x03cde",
    ):
        check_pack(pack(entry(REF_DELTA, len(delta), delta, b"0" * 20)), max_unpacked=MB)


def test_the_header_is_read_as_big_endian_words() -> None:
    bad_version = b"PACK" + (1 << 24 | 2).to_bytes(4, "big") + bytes(24)
    assert refused(bad_version) == "the server sent a broken pack: its version is not 2 or 3"
    assert refused(pack(count=1 << 24)) == (
        f"the repository has too many objects: more than {MAX_OBJECTS}"
    )
    head = b"PACK" + (2).to_bytes(4, "big") + MAX_OBJECTS.to_bytes(4, "big")
    assert refused(head) == ("the server sent a broken pack: it ends in the middle of an object")


def test_a_large_object_is_inflated_in_steps_and_kept_whole() -> None:
    content = b"".join(hashlib.sha256(i.to_bytes(2, "big")).digest() for i in range(8000))
    data = pack(entry(BLOB, len(content), content))  # ~256 KB that do not compress
    check_pack(data, max_unpacked=len(content))
    store = unpack(data)
    assert [store[sha].as_raw_string() for sha in store] == [content]


def test_an_offset_delta_is_read_past_its_offset_and_rebuilt() -> None:
    base = entry(BLOB, 12, b"hello world!")
    delta = varint(12) + varint(9) + copy(5) + b"\x04 tea"  # "hello" + " tea"
    distance = len(base)
    assert (distance % 2, distance < 0x80) == (1, True)  # one offset byte, its low bit set
    data = pack(base, entry(6, len(delta), delta, bytes([distance])))
    check_pack(data, max_unpacked=30)
    store = unpack(data)
    assert sorted(store[sha].as_raw_string() for sha in store) == [b"hello tea", b"hello world!"]


def test_an_object_is_refused_before_it_is_inflated_when_it_cannot_fit() -> None:
    # the second object says 8 bytes (it holds 3): 5 + 8 > 10 before its data is read
    data = pack(entry(BLOB, 5, b"hello"), entry(BLOB, 8, b"tea"))
    assert refused(data, max_unpacked=10) == (
        "the repository at that commit is too large: more than 10 bytes unpacked"
    )


def test_what_deltas_rebuild_adds_up_with_the_rest() -> None:
    delta = varint(5) + varint(6) + bytes([0x90, 6])  # 4 bytes that rebuild 6
    data = pack(entry(BLOB, 5, b"hello"), entry(REF_DELTA, len(delta), delta, b"0" * 20))
    check_pack(data, max_unpacked=11)
    assert refused(data, max_unpacked=10) == (
        "the repository at that commit is too large: more than 10 bytes unpacked"
    )


def test_a_delta_against_an_object_the_pack_lacks_cannot_be_unpacked() -> None:
    delta = varint(5) + varint(3) + b"\x03abc"
    data = pack(entry(REF_DELTA, len(delta), delta, b"\x01" * 20))
    check_pack(data, max_unpacked=MB)
    with pytest.raises(GitFailure) as caught:
        unpack(data)
    assert caught.value.detail == "the server sent a broken pack: its objects could not be unpacked"


def _store(*objects: ShaFile) -> MemoryObjectStore:
    store = MemoryObjectStore()
    for obj in objects:
        store.add_object(obj)
    return store


def _commit(tree: bytes) -> Commit:
    commit = Commit()
    commit.tree = tree
    commit.author = commit.committer = b"Test <test@example.com>"
    commit.author_time = commit.commit_time = 1_700_000_000
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = b"x\n"
    return commit


def _tag(target: ShaFile, n: int) -> Tag:
    tag = Tag()
    tag.name = f"t{n}".encode()
    tag.object = (type(target), target.id)
    tag.tagger = b"Test <test@example.com>"
    tag.tag_time = 1_700_000_000
    tag.tag_timezone = 0
    tag.message = b"x\n"
    return tag


def _files(store: MemoryObjectStore, commit: bytes, *parts: str) -> dict[str, bytes]:
    return skill_files(store, commit, parts, max_files=10, max_file_bytes=MB)


def test_missing_objects_and_objects_of_the_wrong_kind_are_named() -> None:
    blob = Blob.from_string(b"# x\n")
    lost = _commit(b"2" * 40)
    wrong = _commit(blob.id)
    store = _store(blob, lost, wrong)
    for commit, detail in (
        (lost.id, "the server's answer is missing objects"),
        (wrong.id, f"the server sent a broken pack: object {blob.id.decode()} is not a tree"),
    ):
        with pytest.raises(GitFailure) as caught:
            _files(store, commit)
        assert caught.value.detail == detail


def test_tags_are_followed_to_their_commit_up_to_nine_deep() -> None:
    blob = Blob.from_string(b"# x\n")
    tree = Tree()
    tree.add(b"SKILL.md", 0o100644, blob.id)
    commit = _commit(tree.id)
    chain: list[ShaFile] = [commit]
    for n in range(10):
        chain.append(_tag(chain[-1], n))
    store = _store(blob, tree, *chain)
    assert commit_of(store, chain[9].id) == commit.id  # nine tags
    for sha, detail in (
        (chain[10].id, "the ref does not name a commit (a chain of tags)"),
        (blob.id, "the ref does not name a commit"),
        (b"3" * 40, "the server's answer is missing objects"),
    ):
        with pytest.raises(GitFailure) as caught:
            commit_of(store, sha)
        assert caught.value.detail == detail


@pytest.mark.parametrize(
    ("name", "detail"),
    [
        (b"caf\xe9.md", "the repository holds a file name that is not UTF-8"),
        (b"a/b.md", "the repository holds an unsafe file name: 'a/b.md'"),
        (b".", "the repository holds an unsafe file name: '.'"),
    ],
)
def test_a_file_name_that_is_not_a_plain_name_is_refused(name: bytes, detail: str) -> None:
    blob = Blob.from_string(b"# x\n")
    tree = Tree()
    tree.add(b"SKILL.md", 0o100644, blob.id)
    tree.add(name, 0o100644, blob.id)
    commit = _commit(tree.id)
    with pytest.raises(GitFailure) as caught:
        _files(_store(blob, tree, commit), commit.id)
    assert caught.value.detail == detail


def test_a_folder_deep_in_the_tree_is_named_when_it_lacks_a_skill_md() -> None:
    blob = Blob.from_string(b"notes\n")
    inner, outer, top = Tree(), Tree(), Tree()
    inner.add(b"notes.md", 0o100644, blob.id)
    outer.add(b"b", 0o040000, inner.id)
    top.add(b"a", 0o040000, outer.id)
    commit = _commit(top.id)
    with pytest.raises(GitFailure) as caught:
        _files(_store(blob, inner, outer, top, commit), commit.id, "a", "b")
    assert caught.value.detail == "no SKILL.md in a/b"
