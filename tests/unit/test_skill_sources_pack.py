"""The pack a git server sends is bounded before dulwich unpacks it: objects whose
data inflates past what their header says, deltas that would rebuild more than
they declare, and packs that would unpack past the bound are refused without
being inflated (docs/skills.md, "Where a skill comes from")."""

from __future__ import annotations

import hashlib
import tracemalloc
import zlib

import pytest

from agentsvc_adapters.git.objects import MAX_OBJECTS, check_pack, commit_of, skill_files, unpack
from agentsvc_core.ports.skill_sources import SkillSourceError
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
    with pytest.raises(SkillSourceError) as caught:
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
    with pytest.raises(SkillSourceError, match=r"the repository holds an unsafe file name: '\.\.'"):
        skill_files(store, sha.encode(), (), max_files=10, max_file_bytes=MB)  # type: ignore[arg-type]
    assert commit_of(store, sha.encode()) == sha.encode()  # type: ignore[arg-type]
