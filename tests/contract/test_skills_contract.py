"""Skills: the memory and PostgreSQL adapters agree on the SkillStore contract
(agentsvc_core/ports/skills.py): a skill and its content round-trip (files and
front matter included), the list is the organization's oldest first, a name is one
skill's per organization, ``modify`` stores a new version only when the version
moves on and keeps every older one, ``entries`` answers the enabled bindings of
skills that are not disabled, at the version each pins, in the bindings' order."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentsvc_core.entities.skill import Skill, SkillBinding, SkillEntry, SkillOrigin
from agentsvc_core.errors import Conflict, NotFound
from agentsvc_core.use_cases.skills.content import content_of
from tests.contract.conftest import Backend, now
from tests.unit.skill_helpers import skill_md

text = st.text(st.characters(exclude_characters="\x00", exclude_categories=["Cs"]), max_size=60)


def skill_in(org: str, name: str = "tea", **over: object) -> Skill:
    t = now()
    base = Skill(
        id=uuid.uuid4(),
        org_id=org,
        name=name,
        renamed=False,
        source=SkillOrigin(type="inline"),
        version=1,
        content=content_of({"SKILL.md": skill_md(name, f"{name} things", f"all about {name}")}),
        status="active",
        sync_error=None,
        last_synced_at=None,
        created_at=t,
        updated_at=t,
    )
    return msgspec.structs.replace(base, **over)


def next_version(skill: Skill, body: str, files: dict[str, bytes] | None = None) -> Skill:
    content = content_of({"SKILL.md": skill_md(skill.name, "newer", body), **(files or {})})
    return msgspec.structs.replace(skill, version=skill.version + 1, content=content)


words = st.from_regex(r"[A-Za-z0-9 ,.:'é漢\-]{1,40}", fullmatch=True).filter(str.strip)


@given(body=text, description=words, data=st.binary(max_size=40))
@settings(max_examples=15, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_a_skill_round_trips(backend: Backend, body: str, description: str, data: bytes) -> None:
    org = backend.fresh_org()
    content = content_of(
        {
            "SKILL.md": (
                "---\nname: tea\ndescription: "
                + msgspec.json.encode(description).decode()
                + "\nallowed-tools: [web_fetch]\nlicense: MIT\n---\n"
                + body
            ).encode(),
            "scripts/a.bin": data,
            "notes.md": b"# notes",
        }
    )
    skill = skill_in(
        org,
        content=content,
        source=SkillOrigin(
            type="git", url="https://h/r.git", path="s", ref="v1", resolved_ref="ab"
        ),
        sync_error="was down",
        status="error",
        last_synced_at=now(),
        renamed=True,
    )
    backend.run(backend.storage.skills.add, skill)
    assert backend.run(backend.storage.skills.get, org, skill.id) == skill
    assert backend.run(backend.storage.skills.version, org, skill.id, 1) == content


def test_the_list_is_the_organizations_oldest_first(backend: Backend) -> None:
    store = backend.storage.skills
    org, other = backend.fresh_org(), backend.fresh_org()
    t = now()
    later = skill_in(org, "later", created_at=t + timedelta(seconds=1))
    first = skill_in(org, "first", created_at=t)
    for s in (later, first, skill_in(other, "first")):
        backend.run(store.add, s)
    assert backend.run(store.list, org) == [first, later]
    with pytest.raises(NotFound):
        backend.run(store.get, other, first.id)
    with pytest.raises(NotFound):
        backend.run(store.delete, other, first.id)
    with pytest.raises(NotFound):
        backend.run(store.modify, other, first.id, lambda s: s)
    assert backend.run(store.version, other, first.id, 1) is None


def test_a_name_is_one_skills_in_its_organization(backend: Backend) -> None:
    store = backend.storage.skills
    org = backend.fresh_org()
    tea = skill_in(org, "tea")
    coffee = skill_in(org, "coffee")
    backend.run(store.add, tea)
    backend.run(store.add, coffee)
    backend.run(store.add, skill_in(backend.fresh_org(), "tea"))  # another organization's
    with pytest.raises(Conflict) as caught:
        backend.run(store.add, skill_in(org, "tea"))
    assert caught.value.code == "SKILL_NAME_TAKEN"
    with pytest.raises(Conflict) as caught:
        backend.run(store.modify, org, coffee.id, lambda s: msgspec.structs.replace(s, name="tea"))
    assert caught.value.code == "SKILL_NAME_TAKEN"
    assert backend.run(store.get, org, coffee.id) == coffee  # the refused change left nothing
    assert [s.name for s in backend.run(store.list, org)] == ["tea", "coffee"]


def test_a_new_version_is_kept_beside_the_older_ones(backend: Backend) -> None:
    store = backend.storage.skills
    org = backend.fresh_org()
    tea = skill_in(org)
    backend.run(store.add, tea)
    v2 = next_version(tea, "second", {"ref/a.md": b"A"})
    got = backend.run(store.modify, org, tea.id, lambda s: v2)
    assert got == v2
    assert backend.run(store.get, org, tea.id) == v2
    assert backend.run(store.version, org, tea.id, 1) == tea.content
    assert backend.run(store.version, org, tea.id, 2) == v2.content
    assert backend.run(store.version, org, tea.id, 3) is None
    # a change that does not move the version keeps the stored content
    other = next_version(tea, "ignored")
    renamed = backend.run(
        store.modify,
        org,
        tea.id,
        lambda s: msgspec.structs.replace(s, name="green", renamed=True, content=other.content),
    )
    assert (renamed.name, renamed.renamed, renamed.version) == ("green", True, 2)
    assert renamed.content == v2.content
    assert backend.run(store.get, org, tea.id) == renamed


def test_a_refused_change_changes_nothing(backend: Backend) -> None:
    store = backend.storage.skills
    org = backend.fresh_org()
    tea = skill_in(org)
    backend.run(store.add, tea)

    def refuse(s: Skill) -> Skill:
        raise Conflict("no")

    with pytest.raises(Conflict):
        backend.run(store.modify, org, tea.id, refuse)
    assert backend.run(store.get, org, tea.id) == tea


def test_delete_takes_every_version(backend: Backend) -> None:
    store = backend.storage.skills
    org = backend.fresh_org()
    tea = skill_in(org)
    backend.run(store.add, tea)
    backend.run(store.modify, org, tea.id, lambda s: next_version(s, "two"))
    backend.run(store.delete, org, tea.id)
    with pytest.raises(NotFound):
        backend.run(store.get, org, tea.id)
    assert backend.run(store.version, org, tea.id, 1) is None
    assert backend.run(store.version, org, tea.id, 2) is None
    backend.run(store.add, skill_in(org, "tea"))  # the name is free again


def test_entries_are_the_enabled_bindings_of_skills_in_use(backend: Backend) -> None:
    store = backend.storage.skills
    org, other = backend.fresh_org(), backend.fresh_org()
    tea, coffee, off, theirs = (
        skill_in(org, "tea"),
        skill_in(org, "coffee"),
        skill_in(org, "off", status="disabled"),
        skill_in(other, "theirs"),
    )
    for s in (tea, coffee, off, theirs):
        backend.run(store.add, s)
    backend.run(store.modify, org, tea.id, lambda s: next_version(s, "two"))
    bindings = [
        SkillBinding(skill_id=coffee.id),
        SkillBinding(skill_id=uuid.uuid4()),  # no such skill
        SkillBinding(skill_id=off.id),  # disabled
        SkillBinding(skill_id=theirs.id),  # another organization's
        SkillBinding(skill_id=tea.id, pinned_version=1),
        SkillBinding(skill_id=tea.id),
        SkillBinding(skill_id=tea.id, pinned_version=7),  # no such version
        SkillBinding(skill_id=coffee.id, enabled=False),
    ]
    assert backend.run(store.entries, org, bindings) == [
        SkillEntry(skill_id=coffee.id, name="coffee", description="coffee things", version=1),
        SkillEntry(skill_id=tea.id, name="tea", description="tea things", version=1),
        SkillEntry(skill_id=tea.id, name="tea", description="newer", version=2),
    ]
    assert backend.run(store.entries, org, []) == []
    assert backend.run(store.entries, org, [SkillBinding(skill_id=tea.id, enabled=False)]) == []


def test_concurrent_versions_are_not_lost(backend: Backend) -> None:
    store = backend.storage.skills
    org = backend.fresh_org()
    tea = skill_in(org)
    backend.run(store.add, tea)

    async def bump_many() -> None:
        await asyncio.gather(
            *(
                store.modify(org, tea.id, lambda s: next_version(s, f"v{s.version}"))
                for _ in range(5)
            )
        )

    backend.run(bump_many)
    got = backend.run(store.get, org, tea.id)
    assert got.version == 6
    for v in range(2, 7):
        content = backend.run(store.version, org, tea.id, v)
        assert content is not None
        assert content.body == f"v{v - 1}"
