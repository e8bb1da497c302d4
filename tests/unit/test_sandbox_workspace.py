"""The local sandbox's files on the host side (agentsvc_adapters/sandboxes/workspace.py)
over a real folder: a path is confined to the workspace, a link is never followed,
only a regular file is read, a write replaces rather than follows, a refusal says
why. The contract tests (tests/contract/test_sandbox_local.py) do the same through
the real bwrap, slowly; these pin each check."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from agentsvc_adapters.sandboxes import workspace
from agentsvc_adapters.sandboxes.workspace import (
    disk_bytes,
    list_files,
    parts_of,
    read_file,
    write_file,
)
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.ports.sandboxes import FileEntry

OWNER = os.getuid()


class OsWith:
    """The ``os`` module as workspace.py sees it, with some functions replaced: the
    test's fake reaches that module only, not the whole process (docs/development.md)."""

    def __init__(self, **replaced: object) -> None:
        self.__dict__.update(replaced)

    def __getattr__(self, name: str) -> object:
        return getattr(os, name)


def replace_os(monkeypatch: pytest.MonkeyPatch, **replaced: object) -> None:
    monkeypatch.setattr(workspace, "os", OsWith(**replaced))


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "workspace"
    root.mkdir()
    return root


def refusal(exc: pytest.ExceptionInfo[InvalidInput]) -> str:
    assert exc.value.field == "path"
    return exc.value.problem


def test_path_refusals_say_why() -> None:
    with pytest.raises(InvalidInput) as nul:
        parts_of("a\x00b")
    assert refusal(nul) == "must not contain NUL characters"
    with pytest.raises(InvalidInput) as out:
        parts_of("/etc/passwd")
    assert refusal(out) == "must be inside the workspace (/workspace)"
    with pytest.raises(InvalidInput) as up:
        parts_of("a/../b")
    assert refusal(up) == "must not contain '..'"
    with pytest.raises(InvalidInput) as up_abs:
        parts_of("/workspace/a/..")
    assert refusal(up_abs) == "must not contain '..'"


def test_a_file_is_read(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "a.txt").write_bytes(b"hello")
    assert read_file(ws, "src/a.txt", 100) == b"hello"
    assert read_file(ws, "/workspace/src/a.txt", 5) == b"hello", "exactly the limit is fine"


def test_reading_the_workspace_or_a_folder_is_refused(ws: Path) -> None:
    (ws / "d").mkdir()
    for path in (".", "/workspace", "d"):
        with pytest.raises(InvalidInput) as exc:
            read_file(ws, path, 100)
        assert refusal(exc) == f"{path} is a folder"


def test_a_file_past_the_limit_is_refused(ws: Path) -> None:
    (ws / "big").write_bytes(b"x" * 11)
    with pytest.raises(InvalidInput) as exc:
        read_file(ws, "big", 10)
    assert refusal(exc) == "big is larger than 10 bytes"


def test_a_pipe_is_not_read(ws: Path) -> None:
    os.mkfifo(ws / "pipe")
    with pytest.raises(InvalidInput) as exc:
        read_file(ws, "pipe", 10)
    assert refusal(exc) == "pipe is not a regular file"


def test_a_missing_file_or_folder_is_not_found(ws: Path) -> None:
    with pytest.raises(NotFound, match=r"^no such file or folder: nope$"):
        read_file(ws, "nope", 10)
    with pytest.raises(NotFound, match=r"^no such file or folder: no/where$"):
        read_file(ws, "no/where", 10)


def test_a_link_is_never_followed(ws: Path, tmp_path: Path) -> None:
    (tmp_path / "secret").write_bytes(b"secret")
    (ws / "out").symlink_to(tmp_path / "secret")
    (ws / "outdir").symlink_to(tmp_path)
    (ws / "inside.txt").write_bytes(b"in")
    (ws / "in").symlink_to("inside.txt")
    for path, shown in (("out", "out"), ("in", "in"), ("outdir/secret", "outdir/secret")):
        with pytest.raises(InvalidInput) as exc:
            read_file(ws, path, 100)
        message = refusal(exc)
        assert message.startswith(shown)
        assert "secret" not in message.removeprefix(shown)
        assert message in (
            f"{shown} goes through a link, which is not followed",
            f"{shown}: a part of it is not a folder",
        )
    with pytest.raises(InvalidInput) as listing:
        list_files(ws, "outdir", 10)
    assert refusal(listing) == "outdir: a part of it is not a folder"


def test_a_file_in_the_middle_of_a_path_is_not_a_folder(ws: Path) -> None:
    (ws / "f").write_bytes(b"x")
    with pytest.raises(InvalidInput) as exc:
        read_file(ws, "f/g", 10)
    assert refusal(exc) == "f/g: a part of it is not a folder"


def test_a_write_makes_its_folders_and_gives_them_to_the_owner(ws: Path) -> None:
    write_file(ws, "/workspace/a/b/c.txt", b"data", OWNER)
    assert (ws / "a" / "b" / "c.txt").read_bytes() == b"data"
    for made in (ws / "a", ws / "a" / "b", ws / "a" / "b" / "c.txt"):
        assert made.stat().st_uid == OWNER
        assert made.stat().st_gid == OWNER
    assert (ws / "a").stat().st_mode & 0o777 == 0o755 & ~_umask()
    assert (ws / "a" / "b" / "c.txt").stat().st_mode & 0o777 == 0o644 & ~_umask()
    assert sorted(os.listdir(ws / "a" / "b")) == ["c.txt"], "no temporary file is left"


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_write_replaces_a_file_and_a_link_without_following_it(ws: Path, tmp_path: Path) -> None:
    (ws / "f").write_bytes(b"old and longer")
    write_file(ws, "f", b"new", OWNER)
    assert (ws / "f").read_bytes() == b"new"
    (tmp_path / "target").write_bytes(b"untouched")
    (ws / "link").symlink_to(tmp_path / "target")
    write_file(ws, "link", b"mine", OWNER)
    assert not (ws / "link").is_symlink()
    assert (ws / "link").read_bytes() == b"mine"
    assert (tmp_path / "target").read_bytes() == b"untouched"
    assert sorted(os.listdir(ws)) == ["f", "link"]


def test_a_write_through_a_linked_folder_is_refused(ws: Path, tmp_path: Path) -> None:
    (ws / "out").symlink_to(tmp_path)
    with pytest.raises(InvalidInput) as exc:
        write_file(ws, "out/x", b"x", OWNER)
    assert refusal(exc) == "out/x: a part of it is not a folder"
    assert not (tmp_path / "x").exists()


def test_a_write_over_a_folder_or_the_workspace_is_refused(ws: Path) -> None:
    (ws / "d").mkdir()
    (ws / "d" / "keep").write_bytes(b"k")
    for path in ("d", ".", "/workspace"):
        with pytest.raises(InvalidInput) as exc:
            write_file(ws, path, b"x", OWNER)
        assert refusal(exc) == f"{path} is a folder"
    assert (ws / "d" / "keep").read_bytes() == b"k"
    assert sorted(os.listdir(ws / "d")) == ["keep"]


def test_a_failed_write_leaves_no_temporary_file(ws: Path) -> None:
    (ws / "f").write_bytes(b"x")
    with pytest.raises(InvalidInput) as exc:
        write_file(ws, "f/g", b"x", OWNER)
    assert refusal(exc) == "f/g: a part of it is not a folder"
    assert os.listdir(ws) == ["f"]


def test_a_write_that_fails_at_the_rename_removes_its_temporary_file(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a folder put in the target's place between the check and the rename
    (ws / "d").mkdir()

    def failing(*args: object, **kw: object) -> None:
        raise IsADirectoryError(21, "Is a directory")

    replace_os(monkeypatch, rename=failing)
    with pytest.raises(InvalidInput) as exc:
        write_file(ws, "new", b"x", OWNER)
    assert refusal(exc) == "new is a folder"
    assert sorted(os.listdir(ws)) == ["d"]


def test_other_errors_are_named(ws: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing(*args: object, **kw: object) -> None:
        raise OSError(13, "Permission denied")

    replace_os(monkeypatch, rename=failing)
    with pytest.raises(InvalidInput) as exc:
        write_file(ws, "x", b"x", OWNER)
    assert refusal(exc) == "x cannot be used (Permission denied)"


def test_a_listing_has_folders_first_with_sizes_and_a_limit(ws: Path) -> None:
    (ws / "src").mkdir()
    (ws / "src" / "b.py").write_bytes(b"12345")
    (ws / "src" / "a.py").write_bytes(b"1")
    (ws / "src" / "zdir").mkdir()
    (ws / "src" / "adir").mkdir()
    (ws / "src" / "link").symlink_to("/etc")
    listing = list_files(ws, "/workspace/src", 10)
    assert listing == [
        FileEntry(path="src/adir", is_dir=True, size=0),
        FileEntry(path="src/zdir", is_dir=True, size=0),
        FileEntry(path="src/a.py", is_dir=False, size=1),
        FileEntry(path="src/b.py", is_dir=False, size=5),
        FileEntry(path="src/link", is_dir=False, size=len("/etc")),
    ]
    assert list_files(ws, "src", 3) == listing[:3]
    assert [e.path for e in list_files(ws, ".", 10)] == ["src"]
    assert [e.path for e in list_files(ws, "src/adir", 10)] == []


def test_listing_a_file_or_nothing_is_refused(ws: Path) -> None:
    (ws / "f").write_bytes(b"x")
    with pytest.raises(InvalidInput) as exc:
        list_files(ws, "f", 10)
    assert refusal(exc) == "f: a part of it is not a folder"
    with pytest.raises(NotFound, match=r"^no such file or folder: nope$"):
        list_files(ws, "nope", 10)


def test_disk_bytes_counts_blocks_without_following_links(ws: Path, tmp_path: Path) -> None:
    empty = disk_bytes(ws)
    (ws / "d").mkdir()
    (ws / "d" / "f").write_bytes(b"x" * 100_000)
    blocks = sum(
        os.stat(p, follow_symlinks=False).st_blocks * 512 for p in (ws / "d", ws / "d" / "f")
    )
    assert disk_bytes(ws) == empty + blocks
    assert disk_bytes(ws) >= 100_000
    (tmp_path / "big").write_bytes(b"x" * 1_000_000)
    (ws / "link").symlink_to(tmp_path / "big")
    link = os.stat(ws / "link", follow_symlinks=False).st_blocks * 512
    assert disk_bytes(ws) == empty + blocks + link


def test_disk_bytes_of_a_missing_workspace_is_zero(tmp_path: Path) -> None:
    assert disk_bytes(tmp_path / "gone") == 0


def test_the_folder_check_is_the_workspace_s_and_reads_a_link_as_a_link(
    ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a folder of the same name where the service runs is not the workspace's file
    (tmp_path / "same").mkdir()
    monkeypatch.chdir(tmp_path)
    (ws / "same").write_bytes(b"old")
    write_file(ws, "same", b"new", OWNER)
    assert (ws / "same").read_bytes() == b"new"
    # a link to a folder is replaced, as a link to a file is
    (ws / "dirlink").symlink_to(tmp_path / "same")
    write_file(ws, "dirlink", b"mine", OWNER)
    assert (ws / "dirlink").read_bytes() == b"mine"
    assert os.listdir(tmp_path / "same") == []


def test_a_name_too_long_is_refused_with_the_system_s_reason(ws: Path) -> None:
    name = "n" * 300
    with pytest.raises(InvalidInput) as exc:
        write_file(ws, name, b"x", OWNER)
    assert refusal(exc) == f"{name} cannot be used (File name too long)"
    assert os.listdir(ws) == []


def test_a_nested_listing_names_each_entry_from_the_workspace(ws: Path) -> None:
    (ws / "a" / "b").mkdir(parents=True)
    (ws / "a" / "b" / "c").write_bytes(b"12")
    assert list_files(ws, "a/b", 10) == [FileEntry(path="a/b/c", is_dir=False, size=2)]


def test_disk_bytes_of_an_empty_workspace_is_zero_and_linked_folders_are_not_walked(
    ws: Path, tmp_path: Path
) -> None:
    assert disk_bytes(ws) == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "big").write_bytes(b"x" * 1_000_000)
    (ws / "dirlink").symlink_to(outside)
    assert disk_bytes(ws) == os.stat(ws / "dirlink", follow_symlinks=False).st_blocks * 512


def test_disk_bytes_skips_what_goes_while_it_counts(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "stays").write_bytes(b"x" * 10_000)
    (ws / "goes").write_bytes(b"x" * 10_000)
    stays = os.stat(ws / "stays").st_blocks * 512
    real_stat = os.stat

    def stat(name: str, **kw: object) -> os.stat_result:
        if name == "goes":
            raise FileNotFoundError(2, "No such file or directory")
        return real_stat(name, **kw)  # type: ignore[arg-type]

    replace_os(monkeypatch, stat=stat)
    assert disk_bytes(ws) == stays


def test_a_file_that_grows_past_the_limit_while_read_is_refused(
    ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws / "log").write_bytes(b"x" * 20)
    real_fstat = os.fstat

    def fstat(fd: int) -> os.stat_result:  # the size before the writer went on
        info = list(real_fstat(fd))
        info[6] = 5
        return os.stat_result(info)

    replace_os(monkeypatch, fstat=fstat)
    with pytest.raises(InvalidInput) as exc:
        read_file(ws, "log", 10)
    assert refusal(exc) == "log is larger than 10 bytes"
