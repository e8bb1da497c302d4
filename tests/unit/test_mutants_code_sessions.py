"""The code agents' and sessions' routes' use cases (use_cases/code_sessions/agents.py,
sessions.py) pinned down field by field: what is stored, each refusal's field and
words, each boundary, which job is queued under which key. Written for the
mutation run (``make mutation``): each assertion is a rule of the docs."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from agentsvc_core.entities.code_session import Computer, Turn
from agentsvc_core.errors import Conflict, InvalidInput, NotFound
from agentsvc_core.use_cases.code_sessions import CodeAgentChanges, ComputerDraft, SessionDraft
from agentsvc_core.use_cases.code_sessions.agents import check_ref, check_repo_url
from agentsvc_core.use_cases.code_sessions.sessions import SessionJob
from tests.unit.code_sessions_world import REPO, TOKEN, World, world
from tests.unit.turn_world import BOX, WHO


async def refused(w: World, field: str, **given: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as caught:
        await w.agent(**given)
    assert caught.value.field == field
    return caught.value


# --- code agents -----------------------------------------------------------------


async def test_a_code_agent_is_stored_as_given() -> None:
    w = world()
    agent_id = await w.agent(
        name="  fixer  ",
        repo_url=REPO,
        starting_ref="release/1.2",
        preamble="Be brief.",
        branch_prefix="bot.x_y-z/",
        auto_create_pr=False,
        computer={
            "provider": "local",
            "memoryMb": 2048,
            "execTimeoutS": 30,
            "network": "allowlist",
            "allowedHosts": ["pypi.org", "*.example.com"],
        },
    )
    a = await w.agents.get(WHO, agent_id)
    assert a.org_id == WHO.org_id
    assert a.name == "  fixer  "
    assert a.model == "local"
    assert a.repo_url == REPO
    assert a.starting_ref == "release/1.2"
    assert a.preamble == "Be brief."
    assert a.branch_prefix == "bot.x_y-z/"
    assert a.auto_create_pr is False
    assert a.computer == Computer(
        provider="local",
        memory_mb=2048,
        exec_timeout_s=30,
        network="allowlist",
        allowed_hosts=("pypi.org", "*.example.com"),
    )
    assert a.created_at == w.clock.now()
    assert a.updated_at == w.clock.now()
    assert a.git_credential_sealed is not None
    context = f"code-agent:{WHO.org_id}:{agent_id}"
    assert BOX.open(a.git_credential_sealed, context) == TOKEN.encode()


async def test_a_code_agent_defaults() -> None:
    w = world()
    agent_id = await w.agent(repo_url=None, git_credential=None)
    a = await w.agents.get(WHO, agent_id)
    assert a.repo_url is None
    assert a.starting_ref is None
    assert a.preamble == ""
    assert a.branch_prefix == "agentsvc/"
    assert a.auto_create_pr is True
    assert a.git_credential_sealed is None
    assert a.computer == Computer()


async def test_code_agent_refusals_name_their_field_and_reason() -> None:
    w = world()
    assert (await refused(w, "name", name=" ")).problem == "must not be empty"
    assert (await refused(w, "model", model="gpt-nothing")).field == "model"
    got = await refused(w, "repoUrl", repo_url="https://u:p@git.example/a.git")
    assert got.problem == "must not carry credentials; set gitCredential instead"
    got = await refused(w, "repoUrl", repo_url="https://u@git.example/a.git")
    assert got.problem == "must not carry credentials; set gitCredential instead"
    got = await refused(w, "repoUrl", repo_url="git.example/a.git")
    assert got.problem == "must be an http(s) URL of a git repository"
    assert (await refused(w, "repoUrl", repo_url="https:///a.git")).field == "repoUrl"
    assert (await refused(w, "repoUrl", repo_url="x" * 2049)).field == "repoUrl"
    got = await refused(w, "startingRef", starting_ref="a b")
    assert got.problem == "is not a valid git ref"
    got = await refused(w, "branchPrefix", branch_prefix="a..b")
    assert got.problem == "1 to 60 of letters, digits, '.', '_', '/' and '-'; no '..'"
    got = await refused(w, "computer.provider", computer={"provider": "e2b"})
    assert got.problem == "this deployment has no such provider (it has: local)"
    got = await refused(w, "computer.allowedHosts", computer={"allowedHosts": ["a b"]})
    assert got.problem == "'a b' is not a host name"
    assert (await refused(w, "gitCredential", git_credential=" ")).field == "gitCredential"
    assert (await refused(w, "gitCredential", git_credential="x" * 4097)).field == "gitCredential"
    assert (await refused(w, "preamble", preamble="x" * 20_001)).field == "preamble"


async def test_the_provider_list_in_the_refusal_is_sorted_or_none() -> None:
    w = world()
    w.agents._providers = {"zeta": w.sandbox, "alpha": w.sandbox}
    got = await refused(w, "computer.provider", computer={"provider": "local"})
    assert got.problem == "this deployment has no such provider (it has: alpha, zeta)"
    w.agents._providers = {}
    got = await refused(w, "computer.provider", computer={"provider": "local"})
    assert got.problem == "this deployment has no such provider (it has: none)"


@pytest.mark.parametrize("prefix", ["a", "x" * 60, "a/b/", "v1.2_x-y"])
async def test_branch_prefixes_taken(prefix: str) -> None:
    w = world()
    agent_id = await w.agent(branch_prefix=prefix)
    assert (await w.agents.get(WHO, agent_id)).branch_prefix == prefix


@pytest.mark.parametrize("prefix", ["", "x" * 61, "/a", "-a", "a b", "a..b", "a~"])
async def test_branch_prefixes_refused(prefix: str) -> None:
    await refused(world(), "branchPrefix", branch_prefix=prefix)


@pytest.mark.parametrize(
    "ref", ["a..b", "a b", "a~1", "a^", "a:b", "a?", "a*", "a[", "a\\b", "/a", "-a", "", "x" * 256]
)
def test_refs_refused(ref: str) -> None:
    with pytest.raises(InvalidInput) as caught:
        check_ref("ref", ref)
    assert caught.value.field == "ref"


@pytest.mark.parametrize("ref", ["main", "feature/x-1", "v1.2.3", "x" * 255, "a" * 40])
def test_refs_taken(ref: str) -> None:
    assert check_ref("ref", ref) == ref
    assert check_ref("ref", None) is None


@pytest.mark.parametrize("url", ["http://git.example/a.git", "https://git.example:8443/a"])
def test_repository_urls_taken(url: str) -> None:
    assert check_repo_url("repoUrl", url) == url


async def test_update_changes_each_field_alone() -> None:
    w = world()
    agent_id = await w.agent(starting_ref="main", preamble="p")
    before = await w.agents.get(WHO, agent_id)
    cases: list[tuple[CodeAgentChanges, dict[str, Any]]] = [
        (CodeAgentChanges(name="renamed"), {"name": "renamed"}),
        (CodeAgentChanges(model="local"), {"model": "local"}),
        (
            CodeAgentChanges(repo_url="https://git.example/b.git"),
            {"repo_url": "https://git.example/b.git"},
        ),
        (CodeAgentChanges(repo_url=None), {"repo_url": None}),
        (CodeAgentChanges(starting_ref="dev"), {"starting_ref": "dev"}),
        (CodeAgentChanges(starting_ref=None), {"starting_ref": None}),
        (CodeAgentChanges(preamble="q"), {"preamble": "q"}),
        (CodeAgentChanges(branch_prefix="x/"), {"branch_prefix": "x/"}),
        (CodeAgentChanges(auto_create_pr=False), {"auto_create_pr": False}),
        (CodeAgentChanges(git_credential=None), {"git_credential_sealed": None}),
        (
            CodeAgentChanges(computer=ComputerDraft(memory_mb=512)),
            {"computer": Computer(memory_mb=512)},
        ),
    ]
    for changes, expected in cases:
        w.clock.advance(1)
        after = await w.agents.update(WHO, agent_id, changes)
        want = msgspec.structs.replace(before, **expected, updated_at=w.clock.now())
        assert after == want, changes
        before = after


async def test_update_seals_a_new_credential_and_checks_each_field() -> None:
    w = world()
    agent_id = await w.agent()
    after = await w.agents.update(WHO, agent_id, CodeAgentChanges(git_credential="new-token-1"))
    assert after.git_credential_sealed is not None
    assert (
        BOX.open(after.git_credential_sealed, f"code-agent:{WHO.org_id}:{agent_id}")
        == b"new-token-1"
    )
    bad: list[tuple[CodeAgentChanges, str]] = [
        (CodeAgentChanges(name=" "), "name"),
        (CodeAgentChanges(model="gpt-nothing"), "model"),
        (CodeAgentChanges(repo_url="ftp://x/a"), "repoUrl"),
        (CodeAgentChanges(starting_ref="a..b"), "startingRef"),
        (CodeAgentChanges(preamble="\x00"), "preamble"),
        (CodeAgentChanges(branch_prefix=".."), "branchPrefix"),
        (CodeAgentChanges(git_credential=""), "gitCredential"),
        (CodeAgentChanges(computer=ComputerDraft(provider="e2b")), "computer.provider"),
    ]
    for changes, field in bad:
        with pytest.raises(InvalidInput) as caught:
            await w.agents.update(WHO, agent_id, changes)
        assert caught.value.field == field
    with pytest.raises(NotFound):
        await w.agents.update(WHO, uuid.uuid4(), CodeAgentChanges(name="x"))


async def test_delete_says_what_was_not_found() -> None:
    w = world()
    with pytest.raises(NotFound) as caught:
        await w.agents.delete(WHO, uuid.uuid4())
    assert caught.value.detail == "code agent not found"


# --- sessions -----------------------------------------------------------------------


async def test_a_session_starts_with_what_it_needs_of_its_code_agent() -> None:
    w = world()
    agent_id = await w.agent(
        preamble="Be brief.",
        branch_prefix="bot/",
        auto_create_pr=False,
        starting_ref="dev",
        computer={"memoryMb": 512},
    )
    s = await w.start("  First line\nsecond line", code_agent_id=agent_id)
    assert s.org_id == WHO.org_id
    assert s.code_agent_id == agent_id
    assert s.status == "pending"
    assert s.title == "First line"
    assert s.prompt == "  First line\nsecond line"
    assert s.repo_url == REPO
    assert s.ref == "dev"
    assert (s.branch, s.pr_url, s.error) == (None, None, None)
    assert s.archived is False
    assert s.last_event_seq == 2
    assert s.created_at == w.clock.now()
    assert s.updated_at == w.clock.now()
    work = s.work
    assert (work.model, work.preamble, work.branch_prefix) == ("local", "Be brief.", "bot/")
    assert work.auto_create_pr is False
    assert work.computer == Computer(memory_mb=512)
    assert work.transcript == (Turn(role="user", content="  First line\nsecond line"),)
    assert len(work.trace_id) == 32
    events = await w.events(s.id)
    assert [(e.seq, e.type, e.data) for e in events] == [
        (1, "status", {"status": "pending"}),
        (2, "message", {"role": "user", "content": "  First line\nsecond line"}),
    ]
    [(kind, payload, key)] = w.jobs.queued
    assert kind == "code_session.run"
    assert key == f"code-session:{s.id}:start"
    assert msgspec.json.decode(payload, type=SessionJob) == SessionJob(WHO.org_id, s.id)


async def test_a_session_takes_its_own_repository_ref_and_title() -> None:
    w = world()
    agent_id = await w.agent(starting_ref="main", git_credential=None)
    s = await w.start(
        "do it",
        code_agent_id=agent_id,
        repo_url="https://git.example/other.git",
        ref="v2",
        title="T",
    )
    assert (s.repo_url, s.ref, s.title) == ("https://git.example/other.git", "v2", "T")
    assert s.work.credential_sealed is None
    long = await w.start("x" * 300, code_agent_id=agent_id)
    assert long.title == "x" * 200
    for given, field in (
        ({"title": " "}, "title"),
        ({"title": "x" * 201}, "title"),
        ({"ref": "a..b"}, "ref"),
        ({"repo_url": "ftp://x/a"}, "repoUrl"),
    ):
        with pytest.raises(InvalidInput) as caught:
            await w.start("p", code_agent_id=agent_id, **given)
        assert caught.value.field == field
    with pytest.raises(InvalidInput) as caught:
        await w.start("x" * 100_001, code_agent_id=agent_id)
    assert caught.value.field == "prompt"
    with pytest.raises(NotFound):
        await w.sessions.start(WHO, SessionDraft(code_agent_id=uuid.uuid4(), prompt="p"))


async def test_a_session_without_any_repository_is_refused() -> None:
    w = world()
    agent_id = await w.agent(repo_url=None)
    with pytest.raises(InvalidInput) as caught:
        await w.start(code_agent_id=agent_id)
    assert caught.value.field == "repoUrl"
    assert caught.value.problem == "required: the code agent names no repository"


async def test_pages_say_whether_more_follow() -> None:
    w = world()
    agent_id = await w.agent()
    for _ in range(2):
        await w.start(code_agent_id=agent_id)
        w.clock.advance(1)
    rows, more = await w.sessions.page(WHO, before=None, limit=2)
    assert len(rows) == 2
    assert more is False
    rows, more = await w.sessions.page(WHO, before=None, limit=1)
    assert len(rows) == 1
    assert more is True
    other = await w.agent()
    rows, _ = await w.sessions.page(WHO, before=None, limit=5, code_agent_id=other)
    assert rows == []


async def test_retitle_and_its_bounds() -> None:
    w = world()
    s = await w.start()
    w.clock.advance(1)
    after = await w.sessions.retitle(WHO, s.id, "New")
    assert after.title == "New"
    assert after.updated_at == w.clock.now()
    assert after.last_event_seq == s.last_event_seq
    for title in (" ", "x" * 201):
        with pytest.raises(InvalidInput):
            await w.sessions.retitle(WHO, s.id, title)


async def test_a_follow_up_queues_the_job_only_when_the_session_waits() -> None:
    w = world()
    s = await w.start()
    w.jobs.queued.clear()
    await w.sessions.send(WHO, s.id, "while pending")
    assert w.jobs.queued == []
    await w.store.change(
        WHO.org_id, s.id, lambda x: (msgspec.structs.replace(x, status="awaiting_input"), [])
    )
    after = await w.sessions.send(WHO, s.id, "an answer")
    assert after.work.queued == ("while pending", "an answer")
    [(kind, _, key)] = w.jobs.queued
    assert kind == "code_session.run"
    assert key == f"code-session:{s.id}:message-{after.last_event_seq}"
    for content in (" ", "x" * 100_001):
        with pytest.raises(InvalidInput):
            await w.sessions.send(WHO, s.id, content)
    await w.sessions.cancel(WHO, s.id)
    with pytest.raises(Conflict) as caught:
        await w.sessions.send(WHO, s.id, "late")
    assert caught.value.code == "SESSION_ENDED"
    assert caught.value.detail == "the session has ended (cancelled)"


async def test_a_cancel_queues_the_job_to_stop_a_sandbox_only_when_there_is_one() -> None:
    w = world()
    s = await w.start()
    w.jobs.queued.clear()
    await w.sessions.cancel(WHO, s.id)
    assert w.jobs.queued == []  # pending: no sandbox yet
    t = await w.start()
    await w.store.change(
        WHO.org_id,
        t.id,
        lambda x: (
            msgspec.structs.replace(
                x,
                status="awaiting_input",
                work=msgspec.structs.replace(x.work, sandbox_ref="sbx-1", provider="local"),
            ),
            [],
        ),
    )
    w.jobs.queued.clear()
    after = await w.sessions.cancel(WHO, t.id)
    assert after.status == "cancelled"
    [(_, _, key)] = w.jobs.queued
    assert key == f"code-session:{t.id}:cancelled"
    w.jobs.queued.clear()
    await w.sessions.cancel(WHO, t.id)
    assert w.jobs.queued == []


async def test_archive_destroys_only_a_sandbox_it_has() -> None:
    w = world()
    s = await w.start()
    archived = await w.sessions.archive(WHO, s.id)
    assert archived.status == "cancelled"
    assert archived.archived is True
    assert w.sandbox.calls == []
    t = await w.start()

    def with_sandbox(**work: Any) -> Any:
        return lambda x: (
            msgspec.structs.replace(
                x, status="finished", work=msgspec.structs.replace(x.work, **work)
            ),
            [],
        )

    await w.store.change(WHO.org_id, t.id, with_sandbox(sandbox_ref="sbx-9", provider="nowhere"))
    await w.sessions.archive(WHO, t.id)
    assert w.sandbox.calls == []  # a provider this deployment does not have
    u = await w.start()
    await w.store.change(
        WHO.org_id, u.id, with_sandbox(sandbox_ref="sbx-8", provider="local", sandbox_gone=True)
    )
    await w.sessions.archive(WHO, u.id)
    assert w.sandbox.calls == []  # gone already
    v = await w.start()
    await w.store.change(WHO.org_id, v.id, with_sandbox(sandbox_ref="sbx-7", provider="local"))
    await w.sessions.archive(WHO, v.id)
    assert w.sandbox.calls == [("destroy", "sbx-7")]
    again = await w.sessions.archive(WHO, v.id)  # archived already: the same answer
    assert again.archived is True


@pytest.mark.parametrize("status", ["creating", "running"])
async def test_archive_refuses_a_running_session(status: str) -> None:
    w = world()
    s = await w.start()
    await w.store.change(
        WHO.org_id,
        s.id,
        lambda x: (
            msgspec.structs.replace(
                x,
                status=status,
                work=msgspec.structs.replace(x.work, sandbox_ref="sbx-1", provider="local"),
            ),
            [],
        ),
    )
    with pytest.raises(Conflict) as caught:
        await w.sessions.archive(WHO, s.id)
    assert caught.value.code == "SESSION_RUNNING"
    assert caught.value.detail == "the session is running; cancel it before archiving"
    assert w.sandbox.calls == []


async def test_events_page_and_another_organization() -> None:
    w = world()
    s = await w.start()
    rows, next_after = await w.sessions.events(WHO, s.id, after=0, limit=2)
    assert [r.seq for r in rows] == [1, 2]
    assert next_after == 2
    rows, next_after = await w.sessions.events(WHO, s.id, after=0, limit=3)
    assert next_after is None
    stranger = msgspec.structs.replace(WHO, org_id="another")
    with pytest.raises(NotFound):
        await w.sessions.events(stranger, s.id, after=0, limit=2)
    with pytest.raises(NotFound):
        await w.sessions.follow(stranger, s.id, 0, 5)
