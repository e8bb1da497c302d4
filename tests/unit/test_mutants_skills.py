"""An organization's skills (use_cases/skills/skills.py, docs/skills.md): the bounds
of what a draft and a change take (a name of 1 to 64, a source URL of at most 2,048
characters, a ref of 1 to 256, a url source without path or ref), which source is
fetched and what is recorded of it, the registry's browse (every word, the category
alone), and what a sync or a failed sync records and when."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from agentsvc_adapters.memory.storage import MemoryStorage
from agentsvc_core.entities import Principal
from agentsvc_core.entities.skill import SkillOrigin
from agentsvc_core.errors import InvalidInput, NotFound, PermissionDenied, Upstream
from agentsvc_core.ports.skill_sources import FetchedSkill, SkillSourceError
from agentsvc_core.ports.skills import RegistrySkill
from agentsvc_core.use_cases.skills.skills import SkillChanges, SkillDraft, Skills, SourceDraft
from tests.unit.skill_helpers import skill_md
from tests.unit.turn_world import ORG, Clock

ADMIN = Principal.organization(ORG)
MEMBER = Principal(org_id=ORG, user_id="u", role="member", method="jwt")
REPO = "https://git.example/skills.git"
PAGE = "https://docs.example/tea/SKILL.md"


class Source:
    """A SkillSource answering the same files for any URL, recording what it was
    asked; ``failure`` raised instead when set."""

    def __init__(self, files: dict[str, bytes] | None = None) -> None:
        self.files = files or {"SKILL.md": skill_md("tea")}
        self.failure: SkillSourceError | None = None
        self.asked: list[tuple[Any, ...]] = []

    def _answer(self) -> FetchedSkill:
        if self.failure is not None:
            raise self.failure
        return FetchedSkill(files=self.files, resolved_ref=f"ref-{len(self.asked)}")

    async def fetch_git(self, url: str, path: str, ref: str | None) -> FetchedSkill:
        self.asked.append(("git", url, path, ref))
        return self._answer()

    async def fetch_url(self, url: str) -> FetchedSkill:
        self.asked.append(("url", url))
        return self._answer()


class Registry:
    def __init__(self, *skills: RegistrySkill) -> None:
        self._skills = skills

    def skills(self) -> tuple[RegistrySkill, ...]:
        return self._skills


def shipped(id_: str, category: str, description: str) -> RegistrySkill:
    return RegistrySkill(
        id=id_, category=category, version="1.0.0", files={"SKILL.md": skill_md(id_, description)}
    )


TEA = shipped("tea", "kitchen", "Brew tea. Use for any hot drink.")
SQL = shipped("sql-review", "data", "Review SQL queries for mistakes.")
CHARTS = shipped("charts", "data", "Draw charts of the data asked for.")


def skills(source: Source | None = None, *registry: RegistrySkill) -> tuple[Skills, Clock]:
    clock = Clock()
    return Skills(MemoryStorage().skills, source or Source(), Registry(*registry), clock), clock


async def refused(s: Skills, draft: SkillDraft) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        await s.create(ADMIN, draft)
    assert await s.list(ADMIN) == []
    return caught.value


# --- names ------------------------------------------------------------------------------


async def test_a_name_is_1_to_64_of_the_allowed_characters() -> None:
    s, _ = skills()
    md = skill_md("tea").decode()
    longest = "a" * 64
    made = await s.create(ADMIN, SkillDraft(content=md, name=longest))
    assert made.name == longest
    renamed = await s.update(ADMIN, made.id, SkillChanges(name="b" * 64))
    assert renamed.name == "b" * 64
    for bad in ("a" * 65, "", "tea-", "Tea", "a--b"):
        with pytest.raises(InvalidInput) as caught:
            await s.update(ADMIN, made.id, SkillChanges(name=bad))
        assert (caught.value.field, caught.value.problem) == (
            "name",
            "1 to 64 of a-z, 0-9 and single hyphens, not at the start or end",
        )
    assert (await s.get(ADMIN, made.id)).name == "b" * 64


# --- drafts -----------------------------------------------------------------------------


async def test_a_draft_gives_exactly_one_of_content_source_and_registry_id() -> None:
    s, _ = skills(None, TEA)
    md = skill_md("tea").decode()
    for draft in (
        SkillDraft(),
        SkillDraft(content=md, source=SourceDraft(type="url", url=PAGE)),
        SkillDraft(source=SourceDraft(type="url", url=PAGE), registry_id="tea"),
        SkillDraft(content=md, source=SourceDraft(type="url", url=PAGE), registry_id="tea"),
    ):
        error = await refused(s, draft)
        assert (error.field, error.problem) == (
            "content",
            "give exactly one of content, source and registryId",
        )
    error = await refused(s, SkillDraft(source=SourceDraft(type="url", url=PAGE), files={"a": ""}))
    assert (error.field, error.problem) == (
        "files",
        "only with content (a source brings its own files)",
    )


async def test_the_skill_md_is_not_one_of_an_inline_skills_files() -> None:
    s, _ = skills()
    md = skill_md("tea").decode()
    error = await refused(s, SkillDraft(content=md, files={"SKILL.md": md}))
    assert (error.field, error.problem) == (
        "files",
        "SKILL.md is the content, not one of the files",
    )
    made = await s.create(ADMIN, SkillDraft(content=md, files={"ref/SKILL.md": "nested"}))
    with pytest.raises(InvalidInput, match=r"SKILL\.md is the content"):
        await s.update(ADMIN, made.id, SkillChanges(content=md, files={"SKILL.md": md}))
    assert made.content.files == {"ref/SKILL.md": b"nested"}


async def test_an_inline_skill_is_its_text_in_utf8() -> None:
    s, _ = skills()
    made = await s.create(
        ADMIN,
        SkillDraft(content=skill_md("tea", "Brew thé.").decode(), files={"a.md": "— é"}),
    )
    assert made.content.description == "Brew thé."
    assert made.content.files == {"a.md": "— é".encode()}


async def test_a_source_url_is_required_and_at_most_2048_characters() -> None:
    source = Source()
    s, _ = skills(source)
    longest = "https://h.example/" + "p" * (2048 - len("https://h.example/"))
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="url", url=longest)))
    assert made.source.url == longest
    await s.delete(ADMIN, made.id)
    for url in ("", longest + "p"):
        for type_ in ("url", "git"):
            draft = SkillDraft(source=SourceDraft(type=type_, url=url))
            error = await refused(s, draft)
            assert (error.field, error.problem) == (
                "source.url",
                "required, at most 2048 characters",
            )
    assert len(source.asked) == 1


async def test_a_url_source_is_one_skill_md_with_no_path_and_no_ref() -> None:
    source = Source()
    s, clock = skills(source)
    for draft in (
        SourceDraft(type="url", url=PAGE, path="skills/tea"),
        SourceDraft(type="url", url=PAGE, ref="main"),
        SourceDraft(type="url", url=PAGE, path="", ref="main"),
    ):
        error = await refused(s, SkillDraft(source=draft))
        assert (error.field, error.problem) == (
            "source",
            "a url source is one SKILL.md: no path, no ref",
        )
    assert source.asked == []
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="url", url=PAGE)))
    assert source.asked == [("url", PAGE)]
    assert made.source == SkillOrigin(type="url", url=PAGE, resolved_ref="ref-1")
    assert (made.last_synced_at, made.status, made.version) == (clock.now(), "active", 1)


async def test_a_git_ref_is_1_to_256_characters() -> None:
    source = Source()
    s, _ = skills(source)
    for ref in ("", "r" * 257):
        draft = SkillDraft(source=SourceDraft(type="git", url=REPO, ref=ref))
        error = await refused(s, draft)
        assert (error.field, error.problem) == ("source.ref", "1 to 256 characters")
    assert source.asked == []
    for ref in ("r", "r" * 256):
        made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO, ref=ref)))
        assert made.source.ref == ref
        await s.delete(ADMIN, made.id)
    assert [a[3] for a in source.asked] == ["r", "r" * 256]


async def test_a_git_source_without_a_path_or_ref_is_the_default_branchs_top() -> None:
    source = Source()
    s, _ = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    assert source.asked == [("git", REPO, "", None)]
    assert (made.source.type, made.source.url, made.source.ref) == ("git", REPO, None)
    assert made.source.path in ("", None)  # the top of the repository either way
    assert made.source.resolved_ref == "ref-1"
    await s.sync(ADMIN, made.id)
    assert source.asked[1] == ("git", REPO, "", None)


async def test_a_source_that_is_no_skill_says_why_under_source() -> None:
    source = Source({"SKILL.md": b"---\nname: tea\n---\n"})
    s, _ = skills(source)
    error = await refused(s, SkillDraft(source=SourceDraft(type="url", url=PAGE)))
    assert error.field == "source"
    assert error.problem.startswith("description: required")
    source.files = {"notes.md": b"x"}
    error = await refused(s, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    assert error.problem == "SKILL.md: the skill's folder has no SKILL.md at its top"
    source.failure = SkillSourceError("could not reach git.example")
    error = await refused(s, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    assert (error.field, error.problem) == ("source", "could not reach git.example")


# --- reads ------------------------------------------------------------------------------


async def test_a_version_of_an_unknown_skill_is_the_skill_not_found() -> None:
    s, _ = skills()
    with pytest.raises(NotFound) as caught:
        await s.version(MEMBER, uuid.uuid4(), 1)
    assert caught.value.detail == "skill not found"
    made = await s.create(ADMIN, SkillDraft(content=skill_md("tea").decode()))
    with pytest.raises(NotFound) as caught:
        await s.version(MEMBER, made.id, 2)
    assert caught.value.detail == "the skill has no version 2"


async def test_only_admins_change_skills_and_are_told_so() -> None:
    s, _ = skills()
    with pytest.raises(PermissionDenied) as caught:
        await s.create(MEMBER, SkillDraft(content=skill_md("tea").decode()))
    assert caught.value.detail == "skills are managed by the organization's admins"


def test_browse_wants_every_word_and_narrows_by_category() -> None:
    s, _ = skills(None, TEA, SQL, CHARTS)
    assert [e.id for e, _ in s.browse()] == ["tea", "sql-review", "charts"]
    assert [e.id for e, _ in s.browse("")] == ["tea", "sql-review", "charts"]
    assert [e.id for e, _ in s.browse(category="data")] == ["sql-review", "charts"]
    assert [e.id for e, _ in s.browse("DATA charts")] == ["charts"]  # every word
    assert [e.id for e, _ in s.browse("tea data")] == []
    assert [e.id for e, _ in s.browse("review")] == ["sql-review"]  # in the name
    assert [e.id for e, _ in s.browse("brew")] == ["tea"]  # in the description, any case
    assert [e.id for e, _ in s.browse("kitchen")] == ["tea"]  # the category
    assert [e.id for e, _ in s.browse("data", category="kitchen")] == []
    assert [e.id for e, _ in s.browse(category="nope")] == []
    entry, content = s.browse("charts")[0]
    assert (entry, content.description) == (CHARTS, "Draw charts of the data asked for.")


# --- changes ----------------------------------------------------------------------------


async def test_a_rename_with_new_content_is_against_the_new_content() -> None:
    s, _ = skills()
    made = await s.create(ADMIN, SkillDraft(content=skill_md("tea").decode()))
    both = await s.update(
        ADMIN, made.id, SkillChanges(content=skill_md("chai").decode(), name="chai")
    )
    assert (both.name, both.renamed, both.version) == ("chai", False, 2)
    later = await s.update(ADMIN, made.id, SkillChanges(content=skill_md("oolong").decode()))
    assert later.name == "oolong"  # not renamed: the SKILL.md's name follows


async def test_a_change_is_stamped_and_switching_on_keeps_a_sync_error() -> None:
    source = Source()
    s, clock = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    clock.advance(10)
    off = await s.update(ADMIN, made.id, SkillChanges(enabled=False))
    assert (off.status, off.updated_at, off.created_at) == (
        "disabled",
        clock.now(),
        made.created_at,
    )
    clock.advance(10)
    on = await s.update(ADMIN, made.id, SkillChanges(enabled=True))
    assert (on.status, on.updated_at) == ("active", clock.now())
    unchanged = await s.update(ADMIN, made.id, SkillChanges())
    assert unchanged.status == "active"


# --- syncing ----------------------------------------------------------------------------


async def test_a_sync_records_the_fetch_and_when() -> None:
    source = Source()
    s, clock = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="url", url=PAGE)))
    clock.advance(30)
    same = await s.sync(ADMIN, made.id)
    assert source.asked == [("url", PAGE), ("url", PAGE)]
    assert (same.changed, same.from_version, same.to_version) == (False, 1, 1)
    assert same.skill.source == SkillOrigin(type="url", url=PAGE, resolved_ref="ref-2")
    assert (same.skill.last_synced_at, same.skill.updated_at) == (clock.now(), clock.now())
    assert (same.skill.status, same.skill.sync_error) == ("active", None)
    assert same.skill.content == made.content
    source.files = {"SKILL.md": skill_md("tea", body="new steps")}
    clock.advance(30)
    moved = await s.sync(ADMIN, made.id)
    assert (moved.changed, moved.from_version, moved.to_version) == (True, 1, 2)
    assert (moved.skill.name, moved.skill.content.body) == ("tea", "new steps")
    assert moved.skill.updated_at == clock.now()
    again = await s.sync(ADMIN, made.id)
    assert (again.changed, again.from_version, again.to_version) == (False, 2, 2)


async def test_a_failed_sync_is_stamped_and_a_later_one_clears_it() -> None:
    source = Source()
    s, clock = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    source.failure = SkillSourceError("could not reach git.example")
    clock.advance(30)
    with pytest.raises(Upstream) as caught:
        await s.sync(ADMIN, made.id)
    assert caught.value.detail == (
        "the sync failed, version 1 is kept: could not reach git.example"
    )
    failed = await s.get(ADMIN, made.id)
    assert (failed.status, failed.sync_error) == ("error", "could not reach git.example")
    assert (failed.last_synced_at, failed.updated_at) == (clock.now(), clock.now())
    assert (failed.version, failed.content, failed.source) == (1, made.content, made.source)
    source.failure = None
    clock.advance(30)
    healed = await s.sync(ADMIN, made.id)
    assert (healed.skill.status, healed.skill.sync_error) == ("active", None)
    assert healed.skill.last_synced_at == clock.now()


async def test_an_inline_skill_has_no_source_to_sync() -> None:
    s, _ = skills()
    made = await s.create(ADMIN, SkillDraft(content=skill_md("tea").decode()))
    with pytest.raises(InvalidInput) as caught:
        await s.sync(ADMIN, made.id)
    assert (caught.value.field, caught.value.problem) == (
        "source",
        "an inline skill has no source to sync; PATCH its content",
    )
    assert await s.get(ADMIN, made.id) == made


async def test_a_fetched_skills_content_is_synced_not_edited() -> None:
    source = Source()
    s, _ = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    with pytest.raises(InvalidInput) as caught:
        await s.update(ADMIN, made.id, SkillChanges(content=skill_md("tea", body="x").decode()))
    assert (caught.value.field, caught.value.problem) == (
        "content",
        "only an inline skill's content is edited; sync",
    )
    assert await s.get(ADMIN, made.id) == made
