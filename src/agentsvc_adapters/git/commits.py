"""A commit made on a base commit's tree, for a push (CPU work: run in a worker
thread).

``build`` lays the changes (a path's new content, or None to delete it) over
the base's tree, read from the objects fetched for it: a changed file keeps its
executable bit, a new file is a plain one (100644), links and submodules
elsewhere in the tree stay as they are. dulwich writes the trees
(``commit_tree``) and the commit; the objects the base does not already hold are
the ones to send, as one pack (``pack_of``, dulwich's pack writer, no deltas).

``same_change`` tells a retry: a branch that already holds a commit with the
same tree, parents, author and message is the same push made before (only its
time differs), and answers as that push did.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass
from io import BytesIO

from dulwich.index import commit_tree
from dulwich.object_store import MemoryObjectStore
from dulwich.objects import Blob, Commit, ShaFile
from dulwich.pack import write_pack_objects

from agentsvc_adapters.git.errors import GitFailure
from agentsvc_adapters.git.objects import entries, lookup

__all__ = ["Built", "build", "check_author", "check_branch", "check_path", "pack_of", "same_change"]

_PLAIN, _EXECUTABLE = 0o100644, 0o100755
_AUTHOR = re.compile(r"[^<>\n]*[^<>\s] <[^<>\s]+>")
# git check-ref-format's rules for a branch name
_BAD_BRANCH = re.compile(
    r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//|^/|/$|^-|(?:^|/)\.|\.lock(?:/|$)|\.$|^@$"
)


def check_path(path: str) -> None:
    """A path a commit can hold: relative, ``/``-separated, no empty, ``.``,
    ``..`` or ``.git`` part."""
    parts = path.split("/")
    if "\0" in path or any(p in ("", ".", "..") or p.lower() == ".git" for p in parts):
        raise GitFailure(f"cannot commit the path {path!r}")


def check_branch(branch: str) -> None:
    if not branch or _BAD_BRANCH.search(branch):
        raise GitFailure(f"{branch!r} is not a valid branch name")


def check_author(author: str) -> None:
    if not _AUTHOR.fullmatch(author):
        raise GitFailure(f'the author must read "Name <email>", not {author!r}')


@dataclass(frozen=True)
class Built:
    commit: Commit
    new: list[ShaFile]  # the commit and the trees and blobs the base lacks


def _mode(old: int | None) -> int:
    return _EXECUTABLE if old is not None and stat.S_ISREG(old) and old & 0o111 else _PLAIN


def build(
    store: MemoryObjectStore,
    base: bytes,
    changes: Mapping[str, bytes | None],
    *,
    message: str,
    author: str,
    when: int,
) -> Built:
    """The commit of ``changes`` on ``base`` (module docstring)."""
    parent = lookup(store, base, Commit)
    tree = {path: (mode, sha) for path, mode, sha in entries(store, parent.tree)}
    made = MemoryObjectStore()
    for path, data in sorted(changes.items()):
        if data is None:
            tree.pop(path, None)
            continue
        blob = Blob.from_string(data)
        made.add_object(blob)
        old = tree.get(path)
        tree[path] = (_mode(old[0] if old else None), blob.id)
    folders = {path[:i] for path in tree for i, ch in enumerate(path) if ch == "/"}
    if clash := sorted(folders & tree.keys()):
        raise GitFailure(f"{clash[0]!r} would be both a file and a folder")
    commit = Commit()
    commit.tree = commit_tree(made, [(p.encode(), sha, mode) for p, (mode, sha) in tree.items()])
    commit.parents = [base]
    commit.author = commit.committer = author.encode()
    commit.author_time = commit.commit_time = when
    commit.author_timezone = commit.commit_timezone = 0
    commit.message = message.encode() if message.endswith("\n") else message.encode() + b"\n"
    new: list[ShaFile] = [made[sha] for sha in sorted(made) if sha not in store]
    return Built(commit=commit, new=[*new, commit])


def same_change(found: Commit, made: Commit) -> bool:
    """Whether ``found`` is ``made`` but for its time (module docstring)."""
    return (found.tree, found.parents, found.author, found.message) == (
        made.tree,
        made.parents,
        made.author,
        made.message,
    )


def pack_of(objects: list[ShaFile]) -> bytes:
    out = BytesIO()
    write_pack_objects(out, [(obj, None) for obj in objects])
    return out.getvalue()
