"""A skill's files made into one version's content (use_cases/skills/content.py,
docs/skills.md "The fields" and "The SKILL.md"): the SKILL.md read into name,
description, body, tools and other front matter; at most 200 other files, 1 MiB
each and 5 MiB together, at relative paths inside the skill's folder; the other
files kept by path in order; and a SHA-256 that tells two contents apart."""

from __future__ import annotations

import hashlib

import pytest

from agentsvc_core.errors import InvalidInput
from agentsvc_core.use_cases.skills.content import (
    MAX_FILE_BYTES,
    MAX_FILES,
    MAX_PATH,
    MAX_TOTAL_BYTES,
    content_of,
)
from tests.unit.skill_helpers import skill_md

MD = skill_md("tea", "Brew tea.", "# Tea\nSteep.")
MIB = 1024 * 1024


def refused(files: dict[str, bytes]) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        content_of(files)
    return caught.value


# --- the SKILL.md -----------------------------------------------------------------------


def test_the_skill_md_is_read_into_the_content() -> None:
    content = content_of(
        {
            "SKILL.md": b"---\nname: tea\ndescription: Brew tea.\nallowed-tools: Read Write\n"
            b"license: MIT\n---\n# Tea\nSteep.",
        }
    )
    assert (content.name, content.description, content.body) == (
        "tea",
        "Brew tea.",
        "# Tea\nSteep.",
    )
    assert content.allowed_tools == ("Read", "Write")
    assert content.front_matter == {"license": "MIT"}
    assert content.files == {}  # SKILL.md is the content, not one of its files


def test_a_folder_without_a_skill_md_at_its_top_is_no_skill() -> None:
    error = refused({"tea/SKILL.md": MD, "a.md": b"A"})
    assert error.field == "SKILL.md"
    assert error.detail == "SKILL.md: the skill's folder has no SKILL.md at its top"


def test_a_skill_md_that_is_not_utf8_is_refused() -> None:
    error = refused({"SKILL.md": "---\nname: thé\n".encode("latin-1")})
    assert error.detail == "SKILL.md: not UTF-8 text"
    # UTF-8 beyond ASCII is read as such
    content = content_of({"SKILL.md": skill_md("tea", "Brew thé.", "Steep — 3 min.")})
    assert (content.description, content.body) == ("Brew thé.", "Steep — 3 min.")


# --- the files --------------------------------------------------------------------------


def test_the_other_files_are_kept_by_path_in_path_order() -> None:
    content = content_of({"z.md": b"Z", "SKILL.md": MD, "a/b.md": b"B", "a.md": b"A"})
    assert list(content.files.items()) == [("a.md", b"A"), ("a/b.md", b"B"), ("z.md", b"Z")]


def test_at_most_200_files_besides_the_skill_md() -> None:
    many = {f"f{i}.md": b"" for i in range(MAX_FILES)}
    assert len(content_of({"SKILL.md": MD, **many}).files) == 200
    error = refused({"SKILL.md": MD, **many, "one-more.md": b""})
    assert (error.field, error.problem) == ("files", "at most 200 files besides SKILL.md")


def test_one_file_is_at_most_1_mib() -> None:
    assert MAX_FILE_BYTES == MIB
    assert len(content_of({"SKILL.md": MD, "big": b"x" * MIB}).files["big"]) == MIB
    error = refused({"SKILL.md": MD, "small": b"x", "big": b"x" * (MIB + 1)})
    assert (error.field, error.problem) == ("files", "big: over 1048576 bytes")


def test_all_files_together_are_at_most_5_mib_the_skill_md_counted() -> None:
    assert MAX_TOTAL_BYTES == 5 * MIB
    # exactly 5 MiB with the SKILL.md: kept
    exact = {f"f{i}": b"x" * MIB for i in range(4)} | {"last": b"x" * (MIB - len(MD))}
    assert len(content_of({"SKILL.md": MD, **exact}).files) == 5
    # one byte more, in the SKILL.md alone: over
    error = refused({"SKILL.md": MD + b"\n", **exact})
    assert (error.field, error.problem) == ("files", "over 5242880 bytes in all")
    # one byte more in the last file
    error = refused({"SKILL.md": MD, **exact, "last": b"x" * (MIB - len(MD) + 1)})
    assert error.problem == "over 5242880 bytes in all"


@pytest.mark.parametrize(
    "path",
    [
        "",
        "/abs.md",
        "../up.md",
        "a/../../up.md",
        "a/..",
        "./a.md",
        "a/./b.md",
        ".",
        "a//b.md",
        "a/",
        "a\\b.md",
        "a\x00b.md",
        "x" * (MAX_PATH + 1),
    ],
)
def test_a_file_must_be_at_a_relative_path_inside_the_folder(path: str) -> None:
    error = refused({"SKILL.md": MD, "fine.md": b"", path: b"data"})
    assert error.field == "files"
    assert error.problem == f"{path[:80]!r} is not a relative path of the skill's folder"


def test_paths_that_only_look_odd_are_inside_the_folder() -> None:
    fine = ["a.b/c..d.md", "...", "..a", "a..", ".hidden", "x" * MAX_PATH, "a/b/c/d.md"]
    content = content_of({"SKILL.md": MD, **dict.fromkeys(fine, b"")})
    assert sorted(content.files) == sorted(fine)


def test_a_long_refused_path_is_shown_cut() -> None:
    error = refused({"SKILL.md": MD, "/" + "y" * 999: b""})
    assert error.problem == repr("/" + "y" * 79) + " is not a relative path of the skill's folder"


# --- the hash ---------------------------------------------------------------------------


def test_the_hash_tells_contents_apart_and_not_the_order_files_came_in() -> None:
    one = content_of({"SKILL.md": MD, "a.md": b"A", "b.md": b"B"})
    again = content_of({"b.md": b"B", "a.md": b"A", "SKILL.md": MD})
    assert one.content_hash == again.content_hash
    others = [
        {"SKILL.md": MD, "a.md": b"A", "b.md": b"C"},  # one file's bytes
        {"SKILL.md": MD, "a.md": b"A", "c.md": b"B"},  # one file's path
        {"SKILL.md": MD, "a.md": b"A"},  # a file fewer
        {"SKILL.md": MD + b" ", "a.md": b"A", "b.md": b"B"},  # the SKILL.md
        # the same bytes in all, moved across files
        {"SKILL.md": MD, "a.md": b"AB", "b.md": b""},
        {"SKILL.md": MD, "a.md": b"", "b.md": b"AB"},
    ]
    hashes = {one.content_hash} | {content_of(files).content_hash for files in others}
    assert len(hashes) == 1 + len(others)


def test_the_hash_is_the_same_from_release_to_release() -> None:
    """A stored skill keeps the hash it was made with, and a sync compares the
    fetched content's hash to it (a new version when they differ): were the way of
    hashing to change, every skill's next sync would make a new version of the
    same files. So the hash of a given folder is fixed: SHA-256 (hex) over the
    files in path order, each as ``<len(path)>:<path>:<len(data)>:`` then its
    bytes."""
    content = content_of({"b/c.md": b"", "a": b"yz", "SKILL.md": MD})
    expected = hashlib.sha256(
        b"8:SKILL.md:%d:" % len(MD) + MD + b"1:a:2:yz" + b"6:b/c.md:0:"
    ).hexdigest()
    assert content.content_hash == expected
