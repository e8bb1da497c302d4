"""Skills (use_cases/skills/skills.py, docs/skills.md): made from a SKILL.md written
inline, from a source fetched through the SkillSource, or from the shipped
registry; renamed, disabled and edited; synced: a new version only when the
content changed, a failure keeps the last good version and says why."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from agentsvc_adapters.memory.storage import MemoryStorage
from agentsvc_core.entities import Principal
from agentsvc_core.entities.skill import SkillOrigin
from agentsvc_core.errors import Conflict, InvalidInput, NotFound, PermissionDenied, Upstream
from agentsvc_core.ports.skill_sources import FetchedSkill, SkillSourceError
from agentsvc_core.ports.skills import RegistrySkill
from agentsvc_core.use_cases.skills.skills import SkillChanges, SkillDraft, Skills, SourceDraft
from tests.unit.skill_helpers import skill_md
from tests.unit.turn_world import ORG, Clock

ADMIN = Principal.organization(ORG)
MEMBER = Principal(org_id=ORG, user_id="u", role="member", method="jwt")
REPO = "https://git.example/skills.git"


class Source:
    """A SkillSource whose answers a test sets: ``files`` by URL (an exception to
    raise instead), and a commit sha per answer."""

    def __init__(self) -> None:
        self.files: dict[str, Any] = {}
        self.asked: list[tuple[str, ...]] = []
        self.commit = 0

    def _answer(self, url: str) -> FetchedSkill:
        answer = self.files.get(url, SkillSourceError("not found"))
        if isinstance(answer, BaseException):
            raise answer
        self.commit += 1
        return FetchedSkill(files=answer, resolved_ref=f"sha-{self.commit}")

    async def fetch_git(self, url: str, path: str, ref: str | None) -> FetchedSkill:
        self.asked.append(("git", url, path, ref or ""))
        return self._answer(url)

    async def fetch_url(self, url: str) -> FetchedSkill:
        self.asked.append(("url", url))
        return self._answer(url)


class Registry:
    def __init__(self, *skills: RegistrySkill) -> None:
        self._skills = skills

    def skills(self) -> tuple[RegistrySkill, ...]:
        return self._skills


TEA = RegistrySkill(
    id="tea",
    category="kitchen",
    version="1.0.0",
    files={"SKILL.md": skill_md("tea", "Brew tea. Use for any hot drink.", "Steep 3 min.")},
)
SQL = RegistrySkill(
    id="sql-review",
    category="data",
    version="2.0.0",
    files={
        "SKILL.md": skill_md("sql-review", "Review SQL queries for mistakes.", "See ref.md"),
        "ref.md": b"# checks",
    },
)


def skills(source: Source | None = None, *registry: RegistrySkill) -> tuple[Skills, Clock]:
    clock = Clock()
    return Skills(MemoryStorage().skills, source or Source(), Registry(*registry), clock), clock


# --- creating ---------------------------------------------------------------------------


async def test_an_inline_skill_is_its_skill_md_and_files() -> None:
    s, clock = skills()
    made = await s.create(
        ADMIN,
        SkillDraft(
            content="---\nname: tea\ndescription: Brew tea.\nallowed-tools: [web_fetch]\n"
            "license: MIT\n---\n# Tea\nSteep.",
            files={"notes/b.md": "B", "a.md": "A"},
        ),
    )
    assert (made.name, made.renamed, made.version, made.status) == ("tea", False, 1, "active")
    assert made.source == SkillOrigin(type="inline")
    assert (made.content.description, made.content.body) == ("Brew tea.", "# Tea\nSteep.")
    assert made.content.allowed_tools == ("web_fetch",)
    assert made.content.front_matter == {"license": "MIT"}
    assert made.content.files == {"a.md": b"A", "notes/b.md": b"B"}
    assert (made.sync_error, made.last_synced_at) == (None, None)
    assert made.created_at == made.updated_at == clock.now()
    assert await s.get(MEMBER, made.id) == made
    assert await s.list(MEMBER) == [made]
    assert await s.version(MEMBER, made.id, 1) == made.content


async def test_a_name_given_at_creation_is_a_rename() -> None:
    s, _ = skills()
    made = await s.create(ADMIN, SkillDraft(content=skill_md("tea").decode(), name="green-tea"))
    assert (made.name, made.renamed, made.content.name) == ("green-tea", True, "tea")
    same = await s.create(ADMIN, SkillDraft(content=skill_md("mint").decode(), name="mint"))
    assert (same.name, same.renamed) == ("mint", False)


@pytest.mark.parametrize(
    ("draft", "field"),
    [
        (SkillDraft(), "content"),
        (SkillDraft(content="x", registry_id="tea"), "content"),
        (SkillDraft(files={"a.md": "A"}, registry_id="tea"), "files"),
        (SkillDraft(content="no front matter"), "SKILL.md"),
        (SkillDraft(content=skill_md("Tea").decode()), "name"),
        (SkillDraft(content=skill_md("tea").decode(), name="Not A Name"), "name"),
        (SkillDraft(content=skill_md("tea").decode(), files={"SKILL.md": "x"}), "files"),
        (SkillDraft(content=skill_md("tea").decode(), files={"../up.md": "x"}), "files"),
        (SkillDraft(content=skill_md("tea").decode(), files={"/abs.md": "x"}), "files"),
        (SkillDraft(content=skill_md("tea").decode(), files={"a//b": "x"}), "files"),
        (SkillDraft(content=skill_md("tea").decode(), files={"a\\b": "x"}), "files"),
        (SkillDraft(source=SourceDraft(type="git", url="")), "source.url"),
        (SkillDraft(source=SourceDraft(type="url", url="https://h/s.md", ref="v1")), "source"),
        (SkillDraft(source=SourceDraft(type="git", url=REPO, ref="r" * 257)), "source.ref"),
    ],
)
async def test_a_draft_is_checked(draft: SkillDraft, field: str) -> None:
    s, _ = skills(None, TEA)
    with pytest.raises(InvalidInput) as caught:
        await s.create(ADMIN, draft)
    assert caught.value.field == field
    assert await s.list(ADMIN) == []


async def test_files_are_bounded() -> None:
    s, _ = skills()
    md = skill_md("tea").decode()
    with pytest.raises(InvalidInput, match="at most 200 files"):
        await s.create(ADMIN, SkillDraft(content=md, files={f"f{i}": "" for i in range(201)}))
    with pytest.raises(InvalidInput, match="over 1048576 bytes"):
        await s.create(ADMIN, SkillDraft(content=md, files={"big": "x" * (1024 * 1024 + 1)}))
    five = {f"f{i}": "x" * (1024 * 1024) for i in range(5)}
    with pytest.raises(InvalidInput, match="in all"):
        await s.create(ADMIN, SkillDraft(content=md, files=five))


async def test_a_skill_from_git_is_fetched_now_and_records_the_commit() -> None:
    source = Source()
    source.files[REPO] = {"SKILL.md": skill_md("tea"), "ref/a.md": b"A"}
    s, clock = skills(source)
    made = await s.create(
        ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO, path="skills/tea", ref="v1"))
    )
    assert source.asked == [("git", REPO, "skills/tea", "v1")]
    assert made.source == SkillOrigin(
        type="git", url=REPO, path="skills/tea", ref="v1", resolved_ref="sha-1"
    )
    assert made.content.files == {"ref/a.md": b"A"}
    assert made.last_synced_at == clock.now()


async def test_a_source_that_fails_or_is_no_skill_makes_none() -> None:
    source = Source()
    source.files["https://h/bad.md"] = {"SKILL.md": b"not a skill"}
    source.files["https://h/latin1.md"] = {"SKILL.md": "é".encode("latin-1")}
    s, _ = skills(source)
    for url, said in (
        ("https://h/none.md", "source: not found"),
        ("https://h/bad.md", "source: SKILL.md: it must begin with front matter"),
        ("https://h/latin1.md", "source: SKILL.md: not UTF-8 text"),
    ):
        with pytest.raises(InvalidInput) as caught:
            await s.create(ADMIN, SkillDraft(source=SourceDraft(type="url", url=url)))
        assert caught.value.detail.startswith(said), caught.value.detail
    assert await s.list(ADMIN) == []


async def test_a_registry_skill_is_installed_with_its_files() -> None:
    s, _ = skills(None, TEA, SQL)
    made = await s.create(ADMIN, SkillDraft(registry_id="sql-review"))
    assert made.source == SkillOrigin(type="registry", path="sql-review", resolved_ref="2.0.0")
    assert made.content.files == {"ref.md": b"# checks"}
    with pytest.raises(NotFound, match="no skill 'nope' in the registry"):
        await s.create(ADMIN, SkillDraft(registry_id="nope"))
    with pytest.raises(Conflict) as caught:  # one name, one skill
        await s.create(ADMIN, SkillDraft(registry_id="sql-review"))
    assert caught.value.code == "SKILL_NAME_TAKEN"


def test_browse_finds_by_words_and_category() -> None:
    s, _ = skills(None, TEA, SQL)
    assert [e.id for e, _ in s.browse()] == ["tea", "sql-review"]
    assert [e.id for e, _ in s.browse("hot DRINK")] == ["tea"]
    assert [e.id for e, _ in s.browse("sql mistakes")] == ["sql-review"]
    assert [e.id for e, _ in s.browse("data")] == ["sql-review"]  # the category is words too
    assert [e.id for e, _ in s.browse(category="kitchen")] == ["tea"]
    assert [e.id for e, _ in s.browse("tea", category="data")] == []
    _, content = s.browse("tea")[0]
    assert (content.name, content.body) == ("tea", "Steep 3 min.")


def test_a_shipped_skill_that_is_not_one_stops_the_start() -> None:
    broken = RegistrySkill(id="x", category="c", version="1", files={"SKILL.md": b"nope"})
    with pytest.raises(InvalidInput):
        skills(None, broken)


async def test_only_admins_change_skills() -> None:
    s, _ = skills()
    made = await s.create(ADMIN, SkillDraft(content=skill_md("tea").decode()))
    for attempt in (
        s.create(MEMBER, SkillDraft(content=skill_md("mint").decode())),
        s.update(MEMBER, made.id, SkillChanges(enabled=False)),
        s.delete(MEMBER, made.id),
        s.sync(MEMBER, made.id),
    ):
        with pytest.raises(PermissionDenied):
            await attempt
    assert await s.list(MEMBER) == [made]


# --- changing ---------------------------------------------------------------------------


async def test_rename_disable_enable() -> None:
    s, clock = skills()
    made = await s.create(ADMIN, SkillDraft(content=skill_md("tea").decode()))
    clock.advance(5)
    renamed = await s.update(ADMIN, made.id, SkillChanges(name="green-tea"))
    assert (renamed.name, renamed.renamed, renamed.updated_at) == ("green-tea", True, clock.now())
    back = await s.update(ADMIN, made.id, SkillChanges(name="tea"))
    assert (back.name, back.renamed) == ("tea", False)
    off = await s.update(ADMIN, made.id, SkillChanges(enabled=False))
    assert off.status == "disabled"
    on = await s.update(ADMIN, made.id, SkillChanges(enabled=True))
    assert on.status == "active"
    with pytest.raises(InvalidInput):
        await s.update(ADMIN, made.id, SkillChanges(name="-bad"))
    with pytest.raises(NotFound):
        await s.update(ADMIN, uuid.uuid4(), SkillChanges(enabled=True))


async def test_an_inline_skills_content_is_edited_into_a_new_version() -> None:
    s, _ = skills()
    made = await s.create(ADMIN, SkillDraft(content=skill_md("tea", body="one").decode()))
    same = await s.update(
        ADMIN, made.id, SkillChanges(content=skill_md("tea", body="one").decode())
    )
    assert same.version == 1  # the same content is no new version
    two = await s.update(
        ADMIN,
        made.id,
        SkillChanges(content=skill_md("tea", body="two").decode(), files={"x.md": "X"}),
    )
    assert (two.version, two.content.body, two.content.files) == (2, "two", {"x.md": b"X"})
    assert (await s.version(ADMIN, made.id, 1)).body == "one"
    # a new version's name is its SKILL.md's, unless the skill was renamed
    three = await s.update(ADMIN, made.id, SkillChanges(content=skill_md("chai").decode()))
    assert (three.name, three.version) == ("chai", 3)
    await s.update(ADMIN, made.id, SkillChanges(name="house-tea"))
    four = await s.update(ADMIN, made.id, SkillChanges(content=skill_md("oolong").decode()))
    assert (four.name, four.content.name, four.version) == ("house-tea", "oolong", 4)
    with pytest.raises(InvalidInput, match="files: only with content"):
        await s.update(ADMIN, made.id, SkillChanges(files={"x.md": "Y"}))
    with pytest.raises(NotFound, match="no version 9"):
        await s.version(ADMIN, made.id, 9)


async def test_a_fetched_skills_content_is_not_edited() -> None:
    s, _ = skills(None, TEA)
    made = await s.create(ADMIN, SkillDraft(registry_id="tea"))
    with pytest.raises(InvalidInput, match="only an inline skill's content is edited"):
        await s.update(ADMIN, made.id, SkillChanges(content=skill_md("tea", body="x").decode()))
    assert await s.get(ADMIN, made.id) == made


async def test_delete() -> None:
    s, _ = skills()
    made = await s.create(ADMIN, SkillDraft(content=skill_md("tea").decode()))
    await s.delete(ADMIN, made.id)
    with pytest.raises(NotFound):
        await s.get(ADMIN, made.id)
    with pytest.raises(NotFound):
        await s.delete(ADMIN, made.id)


# --- syncing ----------------------------------------------------------------------------


async def test_a_sync_keeps_a_new_version_only_when_the_content_changed() -> None:
    source = Source()
    source.files[REPO] = {"SKILL.md": skill_md("tea", body="one")}
    s, clock = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    clock.advance(60)
    same = await s.sync(ADMIN, made.id)
    assert (same.changed, same.from_version, same.to_version) == (False, 1, 1)
    assert same.skill.source.resolved_ref == "sha-2"  # the commit fetched, even unchanged
    assert same.skill.last_synced_at == clock.now()
    source.files[REPO] = {"SKILL.md": skill_md("tea", body="two"), "b.md": b"B"}
    clock.advance(60)
    moved = await s.sync(ADMIN, made.id)
    assert (moved.changed, moved.from_version, moved.to_version) == (True, 1, 2)
    assert (moved.skill.content.body, moved.skill.content.files) == ("two", {"b.md": b"B"})
    assert moved.skill == await s.get(ADMIN, made.id)
    assert (await s.version(ADMIN, made.id, 1)).body == "one"


async def test_a_failed_sync_keeps_the_last_good_version_and_says_why() -> None:
    source = Source()
    source.files[REPO] = {"SKILL.md": skill_md("tea", body="good")}
    s, clock = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    for failure, said in (
        (SkillSourceError("git.example could not be reached"), "could not be reached"),
        ({"SKILL.md": b"---\nname: tea\n---\n"}, "description: required"),
    ):
        source.files[REPO] = failure
        clock.advance(60)
        with pytest.raises(Upstream) as caught:
            await s.sync(ADMIN, made.id)
        assert caught.value.code == "SKILL_SYNC_FAILED"
        assert caught.value.detail.startswith("the sync failed, version 1 is kept: ")
        assert said in caught.value.detail
        kept = await s.get(ADMIN, made.id)
        assert (kept.version, kept.content, kept.status) == (1, made.content, "error")
        assert kept.sync_error is not None
        assert said in kept.sync_error
        assert kept.last_synced_at == clock.now()
    source.files[REPO] = {"SKILL.md": skill_md("tea", body="good")}
    healed = await s.sync(ADMIN, made.id)
    assert (healed.changed, healed.skill.status, healed.skill.sync_error) == (False, "active", None)


async def test_a_disabled_skill_stays_disabled_through_syncs() -> None:
    source = Source()
    source.files[REPO] = {"SKILL.md": skill_md("tea")}
    s, _ = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    await s.update(ADMIN, made.id, SkillChanges(enabled=False))
    source.files[REPO] = SkillSourceError("down")
    with pytest.raises(Upstream):
        await s.sync(ADMIN, made.id)
    assert (await s.get(ADMIN, made.id)).status == "disabled"
    source.files[REPO] = {"SKILL.md": skill_md("tea")}
    assert (await s.sync(ADMIN, made.id)).skill.status == "disabled"
    enabled = await s.update(ADMIN, made.id, SkillChanges(enabled=True))
    assert enabled.status == "active"


async def test_an_error_skill_enabled_again_is_still_in_error() -> None:
    source = Source()
    source.files[REPO] = {"SKILL.md": skill_md("tea")}
    s, _ = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    source.files[REPO] = SkillSourceError("down")
    with pytest.raises(Upstream):
        await s.sync(ADMIN, made.id)
    await s.update(ADMIN, made.id, SkillChanges(enabled=False))
    assert (await s.update(ADMIN, made.id, SkillChanges(enabled=True))).status == "error"


async def test_a_synced_name_follows_the_skill_md_unless_renamed() -> None:
    source = Source()
    source.files[REPO] = {"SKILL.md": skill_md("tea")}
    s, _ = skills(source)
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    source.files[REPO] = {"SKILL.md": skill_md("chai")}
    assert (await s.sync(ADMIN, made.id)).skill.name == "chai"
    await s.update(ADMIN, made.id, SkillChanges(name="house"))
    source.files[REPO] = {"SKILL.md": skill_md("oolong")}
    assert (await s.sync(ADMIN, made.id)).skill.name == "house"


async def test_a_sync_whose_name_is_taken_keeps_the_version_and_says_why() -> None:
    source = Source()
    source.files[REPO] = {"SKILL.md": skill_md("tea")}
    s, _ = skills(source)
    await s.create(ADMIN, SkillDraft(content=skill_md("chai").decode()))
    made = await s.create(ADMIN, SkillDraft(source=SourceDraft(type="git", url=REPO)))
    source.files[REPO] = {"SKILL.md": skill_md("chai")}
    with pytest.raises(Conflict) as caught:
        await s.sync(ADMIN, made.id)
    assert caught.value.code == "SKILL_NAME_TAKEN"
    kept = await s.get(ADMIN, made.id)
    assert (kept.name, kept.version, kept.status) == ("tea", 1, "error")
    assert kept.sync_error == "a skill named 'chai' exists already"


async def test_an_inline_skill_has_nothing_to_sync_and_a_registry_one_reads_the_package() -> None:
    s, _ = skills(None, TEA)
    inline = await s.create(ADMIN, SkillDraft(content=skill_md("mint").decode()))
    with pytest.raises(InvalidInput, match="an inline skill has no source to sync"):
        await s.sync(ADMIN, inline.id)
    tea = await s.create(ADMIN, SkillDraft(registry_id="tea"))
    synced = await s.sync(ADMIN, tea.id)
    assert (synced.changed, synced.to_version) == (False, 1)
    # the package upgraded: the registry's new version is picked up
    newer = msgspec.structs.replace(
        TEA, version="1.1.0", files={"SKILL.md": skill_md("tea", "Brew tea.", "Steep 4 min.")}
    )
    s._registry["tea"] = newer  # what a new release of the package ships
    moved = await s.sync(ADMIN, tea.id)
    assert (moved.changed, moved.to_version, moved.skill.content.body) == (True, 2, "Steep 4 min.")
    assert moved.skill.source.resolved_ref == "1.1.0"
    del s._registry["tea"]
    with pytest.raises(Upstream, match="the registry no longer has 'tea'"):
        await s.sync(ADMIN, tea.id)
