"""The local sandbox's files, read and written by the service on the host side.

The workspace belongs to the sandbox's user, whose commands may have put links,
folders or pipes anywhere in it, and may change them while the service works. So
nothing here resolves a path by name from the root of the file system: a path is
checked as text first (relative to the workspace, or absolute under
``/workspace``; no ``..``), then walked one part at a time from the workspace's
descriptor with ``O_NOFOLLOW``, so that a link is never followed (a link inside
the workspace is refused too: it is not worth telling the ones that stay in from
the ones that lead out), and only a regular file is read. What the service
writes is given to the sandbox's user, so its commands can change it.

These functions block: the adapter runs them in a thread.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports.sandboxes import WORKSPACE, FileEntry

__all__ = ["disk_bytes", "list_files", "parts_of", "read_file", "write_file"]

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def parts_of(path: str) -> list[str]:
    """The names on the way to ``path`` from the workspace (``[]`` for itself);
    ``InvalidInput`` for a path that leaves it."""
    if "\x00" in path:
        raise InvalidInput("path", "must not contain NUL characters")
    pure = PurePosixPath(path)
    if pure.is_absolute():
        try:
            pure = pure.relative_to(WORKSPACE)
        except ValueError:
            raise InvalidInput("path", f"must be inside the workspace ({WORKSPACE})") from None
    parts = list(pure.parts)  # pathlib drops the "." parts itself
    if ".." in parts:
        raise InvalidInput("path", "must not contain '..'")
    return parts


def _refusal(exc: OSError, path: str) -> Exception:
    if exc.errno == errno.ENOENT:
        return NotFound(f"no such file or folder: {path}")
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return InvalidInput("path", f"{path} goes through a link, which is not followed")
    if exc.errno == errno.ENOTDIR:
        return InvalidInput("path", f"{path}: a part of it is not a folder")
    if exc.errno == errno.EISDIR:
        return InvalidInput("path", f"{path} is a folder")
    return InvalidInput("path", f"{path} cannot be used ({os.strerror(exc.errno or 0)})")


@contextlib.contextmanager
def _folder(
    workspace: Path, parts: list[str], path: str, *, make: int | None = None
) -> Iterator[int]:
    """A descriptor of the folder ``parts`` names, walked without following links;
    with ``make`` (a uid), missing folders are made and given to that user."""
    fd = os.open(workspace, _DIR)
    try:
        for name in parts:
            try:
                nxt = os.open(name, _DIR, dir_fd=fd)
            except FileNotFoundError:
                if make is None:
                    raise
                os.mkdir(name, 0o755, dir_fd=fd)
                nxt = os.open(name, _DIR, dir_fd=fd)
                os.fchown(nxt, make, make)
            os.close(fd)
            fd = nxt
        yield fd
    except OSError as exc:
        raise _refusal(exc, path) from None
    finally:
        os.close(fd)


def read_file(workspace: Path, path: str, max_bytes: int) -> bytes:
    parts = parts_of(path)
    if not parts:
        raise InvalidInput("path", f"{path} is a folder")
    with _folder(workspace, parts[:-1], path) as folder:
        try:
            # O_NONBLOCK: a pipe named like a file must not hang the service
            fd = os.open(
                parts[-1], os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=folder
            )
        except OSError as exc:
            raise _refusal(exc, path) from None
        try:
            info = os.fstat(fd)
            if stat.S_ISDIR(info.st_mode):
                raise InvalidInput("path", f"{path} is a folder")
            if not stat.S_ISREG(info.st_mode):
                raise InvalidInput("path", f"{path} is not a regular file")
            if info.st_size > max_bytes:
                raise InvalidInput("path", f"{path} is larger than {max_bytes} bytes")
            with os.fdopen(os.dup(fd), "rb") as file:
                data = file.read(max_bytes + 1)
        finally:
            os.close(fd)
    if len(data) > max_bytes:
        raise InvalidInput("path", f"{path} is larger than {max_bytes} bytes")
    return data


def write_file(workspace: Path, path: str, data: bytes, owner: int) -> None:
    """Written to a new file beside the target, then renamed over it: a reader
    never sees half a file, and a link put in its place is replaced, not followed."""
    parts = parts_of(path)
    if not parts:
        raise InvalidInput("path", f"{path} is a folder")
    with _folder(workspace, parts[:-1], path, make=owner) as folder:
        temp = f".{parts[-1][:200]}.{os.urandom(6).hex()}.tmp"
        try:
            with contextlib.suppress(FileNotFoundError):
                if stat.S_ISDIR(os.stat(parts[-1], dir_fd=folder, follow_symlinks=False).st_mode):
                    raise InvalidInput("path", f"{path} is a folder")
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
            fd = os.open(temp, flags, 0o644, dir_fd=folder)
            try:
                os.fchown(fd, owner, owner)
                with os.fdopen(os.dup(fd), "wb") as file:
                    file.write(data)
            finally:
                os.close(fd)
            os.rename(temp, parts[-1], src_dir_fd=folder, dst_dir_fd=folder)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=folder)
            raise _refusal(exc, path) from None


def list_files(workspace: Path, path: str, limit: int) -> list[FileEntry]:
    parts = parts_of(path)
    base = "/".join(parts)
    entries: list[FileEntry] = []
    with _folder(workspace, parts, path) as folder, os.scandir(folder) as found:
        for entry in found:
            info = entry.stat(follow_symlinks=False)
            is_dir = stat.S_ISDIR(info.st_mode)
            name = f"{base}/{entry.name}" if base else entry.name
            entries.append(FileEntry(path=name, is_dir=is_dir, size=0 if is_dir else info.st_size))
    entries.sort(key=lambda e: (not e.is_dir, e.path))
    return entries[:limit]


def disk_bytes(workspace: Path) -> int:
    """The sizes of what the workspace holds (links not followed)."""
    total = 0
    try:
        for _, dirs, files, folder in os.fwalk(workspace, follow_symlinks=False):
            for name in (*dirs, *files):
                with contextlib.suppress(OSError):
                    total += os.stat(name, dir_fd=folder, follow_symlinks=False).st_blocks * 512
    except OSError:
        return 0
    return total
