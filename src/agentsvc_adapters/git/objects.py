"""The received pack, checked, unpacked and read (CPU work: run in a worker thread).

A pack comes from a server the user named, so nothing in it is trusted before it
is bounded. ``check_pack`` reads every object's header and inflates its data
itself, never past the size the header declares, and reads each delta's
instructions: what they would rebuild is added up before dulwich rebuilds
anything. Past ``max_unpacked`` bytes in all, or ``MAX_OBJECTS`` objects, the pack
is refused, so a small pack cannot inflate into gigabytes (a zlib stream grows
a thousandfold; a delta of a few bytes can copy 16 MB). Only then does dulwich
(``PackData``, ``PackInflater``) unpack the objects into a ``MemoryObjectStore``.

``skill_files`` walks the commit's tree down ``path`` and returns the regular
files under it; a symbolic link (mode 120000) or a submodule (160000) is left
out. ``tree_files`` returns the whole tree's, with the executable bit, and names
what it left out. Objects are found by their sha, which dulwich computes from their content:
a server cannot pass one object off as another.
"""

from __future__ import annotations

import stat
import zlib
from collections.abc import Iterator
from io import BytesIO
from typing import TypeVar

from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Blob, Commit, Tag, Tree
from dulwich.pack import PackData, PackInflater

from agentsvc_adapters.git.errors import GitFailure

__all__ = [
    "MAX_OBJECTS",
    "check_pack",
    "commit_of",
    "entries",
    "lookup",
    "skill_files",
    "tree_files",
    "unpack",
]

MAX_OBJECTS = 100_000
_OFS_DELTA, _REF_DELTA = 6, 7
_STEP = 64 * 1024  # compressed bytes fed to zlib at a time
_UNSAFE_NAMES = frozenset({"", ".", ".."})
_T = TypeVar("_T", Blob, Commit, Tree)


class _Reader:
    """A position in the pack; every read past its end is a truncated pack."""

    def __init__(self, data: memoryview, at: int) -> None:
        self.data = data
        self.at = at

    def byte(self) -> int:
        if self.at >= len(self.data):
            raise _broken("it ends in the middle of an object")
        self.at += 1
        return self.data[self.at - 1]


def _broken(why: str) -> GitFailure:
    return GitFailure(f"the server sent a broken pack: {why}")


def _too_large(limit: int) -> GitFailure:
    return GitFailure(
        f"the repository at that commit is too large: more than {limit} bytes unpacked"
    )


def _inflate(reader: _Reader, size: int) -> bytes:
    """The zlib stream at the reader's position, refused if it inflates to more
    than ``size`` bytes (its header's word); the reader moves past it."""
    inflater = zlib.decompressobj()
    out = bytearray()
    while not inflater.eof:
        chunk = reader.data[reader.at : reader.at + _STEP]
        if not chunk:
            raise _broken("it ends in the middle of an object")
        reader.at += len(chunk)
        try:
            out += inflater.decompress(chunk, size + 1 - len(out))
        except zlib.error:
            raise _broken("an object is not valid zlib data") from None
        if len(out) > size:
            raise _broken("an object is larger than its header says")
    reader.at -= len(inflater.unused_data)
    if len(out) != size:
        raise _broken("an object is smaller than its header says")
    return bytes(out)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A delta header's size (7 bits a byte, least significant first) and where
    it ends."""
    value = shift = 0
    while True:
        if at >= len(data):
            raise _broken("a delta ends in its header")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        shift += 7
        at += 1
        if not byte & 0x80:
            return value, at


def _delta_result_size(delta: bytes) -> int:
    """The size of what ``delta`` rebuilds, from its instructions (which must add
    up to the size its header declares)."""
    _, at = _varint(delta, 0)  # the base's size
    declared, at = _varint(delta, at)
    total = 0
    while at < len(delta):
        cmd = delta[at]
        at += 1
        if cmd & 0x80:  # copy from the base: offset bytes (bits 0-3), size bytes (4-6)
            size = 0
            for bit in range(7):
                if cmd & (1 << bit):
                    if at >= len(delta):
                        raise _broken("a delta ends in an instruction")
                    if bit >= 4:
                        size |= delta[at] << (8 * (bit - 4))
                    at += 1
            total += size or 0x10000
        elif cmd:  # insert the next ``cmd`` bytes
            total += cmd
            at += cmd
        else:
            raise _broken("a delta holds an unknown instruction")
    if total != declared or at != len(delta):
        raise _broken("a delta's instructions do not match its header")
    return declared


def check_pack(pack: bytes, *, max_unpacked: int) -> None:
    """Refuse (``GitFailure``) a pack that is malformed, holds more than
    ``MAX_OBJECTS`` objects or would unpack to more than ``max_unpacked`` bytes
    (module docstring)."""
    view = memoryview(pack)
    if bytes(view[:4]) != b"PACK":
        raise _broken("it does not start like a pack")
    if int.from_bytes(view[4:8]) not in (2, 3):
        raise _broken("its version is not 2 or 3")
    count = int.from_bytes(view[8:12])
    if count > MAX_OBJECTS:
        raise GitFailure(f"the repository has too many objects: more than {MAX_OBJECTS}")
    reader = _Reader(view, 12)
    unpacked = 0
    for _ in range(count):
        byte = reader.byte()
        kind, size, shift = (byte >> 4) & 7, byte & 0x0F, 4
        while byte & 0x80:
            byte = reader.byte()
            size |= (byte & 0x7F) << shift
            shift += 7
        if kind == _OFS_DELTA:
            while reader.byte() & 0x80:
                pass
        elif kind == _REF_DELTA:
            reader.at += 20
        elif kind not in (1, 2, 3, 4):
            raise _broken(f"an object has the unknown type {kind}")
        if size > max_unpacked - unpacked:
            raise _too_large(max_unpacked)
        data = _inflate(reader, size)
        unpacked += _delta_result_size(data) if kind in (_OFS_DELTA, _REF_DELTA) else size
        if unpacked > max_unpacked:
            raise _too_large(max_unpacked)
    if len(pack) - reader.at != 20:
        raise _broken("it does not end after its objects")


def unpack(pack: bytes) -> MemoryObjectStore:
    """The objects of a pack ``check_pack`` accepted, rebuilt by dulwich."""
    store = MemoryObjectStore()
    try:
        data = PackData.from_file(BytesIO(pack))
        for obj in PackInflater.for_pack_data(data):
            store.add_object(obj)
    except Exception as exc:  # dulwich raises many kinds on a bad pack
        raise _broken("its objects could not be unpacked") from exc
    return store


def lookup(store: MemoryObjectStore, sha: bytes, kind: type[_T]) -> _T:
    try:
        obj = store[sha]
    except KeyError:
        raise GitFailure("the server's answer is missing objects") from None
    if not isinstance(obj, kind):
        raise _broken(f"object {sha.decode()} is not a {kind.__name__.lower()}")
    return obj


def commit_of(store: MemoryObjectStore, sha: bytes) -> bytes:
    """The commit ``sha`` names, through annotated tags."""
    for _ in range(10):
        try:
            obj = store[sha]
        except KeyError:
            raise GitFailure("the server's answer is missing objects") from None
        if isinstance(obj, Commit):
            return sha
        if not isinstance(obj, Tag):
            raise GitFailure("the ref does not name a commit")
        sha = obj.object[1]
    raise GitFailure("the ref does not name a commit (a chain of tags)")


def _name(raw: bytes) -> str:
    try:
        name = raw.decode()
    except UnicodeDecodeError:
        raise GitFailure("the repository holds a file name that is not UTF-8") from None
    if name in _UNSAFE_NAMES or "/" in name:  # (a tree cannot hold a NUL in a name)
        raise GitFailure(f"the repository holds an unsafe file name: {name!r}")
    return name


def entries(store: MemoryObjectStore, tree: bytes) -> Iterator[tuple[str, int, bytes]]:
    """Every entry under ``tree`` that is not a tree, as (path, mode, sha), the
    trees walked down; names checked (``_name``)."""
    stack: list[tuple[str, Tree]] = [("", lookup(store, tree, Tree))]
    while stack:
        prefix, node = stack.pop()
        for entry in node.iteritems():
            path = prefix + _name(entry.path)
            if stat.S_ISDIR(entry.mode):
                stack.append((path + "/", lookup(store, entry.sha, Tree)))
            else:
                yield path, entry.mode, entry.sha


def _regular_files(
    store: MemoryObjectStore, tree: bytes, shown: str, *, max_files: int, max_file_bytes: int
) -> tuple[list[tuple[str, bytes, int]], list[str]]:
    """The regular files under ``tree`` as (path, content, mode), and the paths
    of what is not one (links, submodules); a bound broken is ``GitFailure``."""
    files: list[tuple[str, bytes, int]] = []
    skipped: list[str] = []
    for path, mode, sha in entries(store, tree):
        if not stat.S_ISREG(mode):
            skipped.append(path)
            continue
        if len(files) >= max_files:
            raise GitFailure(f"{shown} holds more than {max_files} files")
        blob = lookup(store, sha, Blob)
        if blob.raw_length() > max_file_bytes:
            raise GitFailure(
                f"{path} is larger than {max_file_bytes} bytes, the limit for one file"
            )
        files.append((path, blob.as_raw_string(), mode))
    return files, skipped


def tree_files(
    store: MemoryObjectStore, commit: bytes, *, max_files: int, max_file_bytes: int
) -> tuple[list[tuple[str, bytes, bool]], list[str]]:
    """The whole tree of ``commit``: its regular files as (path, content,
    executable) and the paths of its links and submodules, sorted by path."""
    tree = lookup(store, commit, Commit).tree
    found, skipped = _regular_files(
        store, tree, "the repository", max_files=max_files, max_file_bytes=max_file_bytes
    )
    files = [(path, data, bool(mode & 0o111)) for path, data, mode in found]
    return sorted(files), sorted(skipped)


def skill_files(
    store: MemoryObjectStore,
    commit: bytes,
    parts: tuple[str, ...],
    *,
    max_files: int,
    max_file_bytes: int,
) -> dict[str, bytes]:
    """The regular files under the directory ``parts`` of ``commit``'s tree, by
    path relative to it (module docstring). Raises ``GitFailure`` when the
    path is not a directory there, has no ``SKILL.md`` or breaks a bound."""
    tree = lookup(store, lookup(store, commit, Commit).tree, Tree)
    shown = "/".join(parts) or "the top of the repository"
    for part in parts:
        try:
            mode, sha = tree[part.encode()]
        except KeyError:
            raise GitFailure(f"path {'/'.join(parts)!r} not found at that commit") from None
        if not stat.S_ISDIR(mode):
            raise GitFailure(f"path {'/'.join(parts)!r} is not a directory")
        tree = lookup(store, sha, Tree)
    found, _ = _regular_files(
        store, tree.id, shown, max_files=max_files, max_file_bytes=max_file_bytes
    )
    files = {path: data for path, data, _ in found}
    if "SKILL.md" not in files:
        raise GitFailure(f"no SKILL.md in {shown}")
    return files
