"""The computer's use cases (use_cases/computer) over memory storage and fake
sandboxes: the configuration and its bounds, where the sandboxes run, the model's
tools, instances made, shared, stopped, resumed and lost, the limits per agent,
the idle sweep by the test's clock, and the operator's commands."""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from typing import Any, cast

import msgspec
import pytest

from agentsvc_core.errors import InvalidInput, NotFound, RateLimited
from agentsvc_core.ports import ToolCallContext, ToolSpec
from agentsvc_core.ports.sandboxes import (
    ExecExit,
    ExecOutput,
    SandboxGone,
    SandboxSpec,
    SandboxStarted,
    SandboxUnavailable,
)
from agentsvc_core.use_cases import Agents
from agentsvc_core.use_cases.computer import (
    ComputerConfig,
    Computers,
    ComputerTools,
    resolve_provider,
)
from agentsvc_core.use_cases.computer.commands import CommandLimits
from agentsvc_core.use_cases.computer.events import (
    ExecEnded,
    ExecStarted,
    ExecStderr,
    ExecStdout,
    exec_events,
)
from agentsvc_core.use_cases.computer.settings import normalise_host
from agentsvc_core.use_cases.computer.tools import MAX_OUTPUT, MAX_READ, STATE_LOST, exec_answer
from tests.fakes.sandbox import FakeSandbox
from tests.unit.computer_world import ADMIN, ORG, World


def run(coro: Any) -> Any:
    return asyncio.run(coro)


# --- configuration ------------------------------------------------------------------


def test_the_defaults_are_off_thread_scoped_persistent_and_without_network() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        config = await w.settings.get(ADMIN, agent.id)
        assert config == ComputerConfig(agent_id=agent.id, org_id=ORG)
        assert config.enabled is False
        assert config.provider is None
        assert (config.scope, config.persistent, config.network) == ("thread", True, "none")
        assert (config.idle_timeout_s, config.exec_timeout_s, config.memory_mb) == (7200, 60, 512)
        assert config.allowed_hosts == ()

    run(go())


@pytest.mark.parametrize(
    ("field", "least", "most"),
    [("idle_timeout_s", 60, 604_800), ("exec_timeout_s", 1, 3600), ("memory_mb", 64, 16_384)],
)
def test_bounds_are_inclusive_and_refused_one_past(field: str, least: int, most: int) -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        for ok in (least, most):
            assert getattr(await w.settings.update(ADMIN, agent.id, {field: ok}), field) == ok
        for bad in (least - 1, most + 1):
            with pytest.raises(InvalidInput) as refused:
                await w.settings.update(ADMIN, agent.id, {field: bad})
            assert refused.value.field == field
            assert f"between {least} and {most}" in refused.value.detail
        assert getattr(await w.config(agent), field) == most  # the refusals changed nothing

    run(go())


def test_a_put_changes_only_the_given_fields_and_checks_choices() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        await w.settings.update(ADMIN, agent.id, {"enabled": True, "scope": "agent"})
        config = await w.settings.update(ADMIN, agent.id, {"provider": "e2b"})
        assert (config.enabled, config.scope, config.provider) == (True, "agent", "e2b")
        for field, value, problem in (
            ("provider", "docker", "one of local, e2b or null"),
            ("scope", "org", "thread or agent"),
            ("network", "open", "none or allowlist"),
        ):
            with pytest.raises(InvalidInput) as refused:
                await w.settings.update(ADMIN, agent.id, {field: value})
            assert (refused.value.field, refused.value.problem) == (field, problem)
        assert (await w.settings.update(ADMIN, agent.id, {"provider": None})).provider is None
        with pytest.raises(NotFound):
            await w.settings.update(ADMIN, uuid.uuid4(), {"enabled": True})

    run(go())


def test_allowed_hosts_are_host_names_normalised_and_deduplicated() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        config = await w.settings.update(
            ADMIN,
            agent.id,
            {"network": "allowlist", "allowed_hosts": ["PyPI.org.", "pypi.org", "bücher.example"]},
        )
        assert config.allowed_hosts == ("pypi.org", "xn--bcher-kva.example")
        for bad in (
            "https://pypi.org",
            "pypi.org:443",
            "*.pypi.org",
            "10.0.0.1",
            "a/b",
            "",
            "-x.org",
        ):
            with pytest.raises(InvalidInput) as refused:
                await w.settings.update(ADMIN, agent.id, {"allowed_hosts": [bad]})
            assert refused.value.field == "allowed_hosts"
        with pytest.raises(InvalidInput, match="at most 100"):
            await w.settings.update(
                ADMIN, agent.id, {"allowed_hosts": [f"h{i}.example" for i in range(101)]}
            )
        assert (
            len(
                (
                    await w.settings.update(
                        ADMIN, agent.id, {"allowed_hosts": [f"h{i}.example" for i in range(100)]}
                    )
                ).allowed_hosts
            )
            == 100
        )

    run(go())


def test_a_host_name_is_at_most_253_characters() -> None:
    name = ".".join(["a" * 63] * 3) + "." + "b" * 61  # 253
    assert normalise_host(name) == name
    with pytest.raises(InvalidInput):
        normalise_host(name + "b")


def test_the_provider_named_wins_else_the_agents_runtime_picks() -> None:
    aid = uuid.uuid4()
    unnamed = ComputerConfig(agent_id=aid, org_id=ORG)
    assert resolve_provider(unnamed, None) == "local"
    assert resolve_provider(unnamed, "native") == "local"
    assert resolve_provider(unnamed, "alternative") == "e2b"
    named = ComputerConfig(agent_id=aid, org_id=ORG, provider="local")
    assert resolve_provider(named, "alternative") == "local"
    hosted = ComputerConfig(agent_id=aid, org_id=ORG, provider="e2b")
    assert resolve_provider(hosted, "native") == "e2b"


# --- the tools ------------------------------------------------------------------------


def test_the_tools_are_offered_only_while_enabled_and_own_only_their_names() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        assert w.tools.kinds == ("computer",)
        assert await w.tools.list_tools(ADMIN, agent) == []
        thread = await w.thread(agent)
        off = await w.call(agent, thread, "computer_exec", command="true")
        assert off == "error: the computer is not enabled for this agent"
        assert w.sandboxes["local"].calls == []
        await w.settings.update(ADMIN, agent.id, {"enabled": True})
        names = [t.name for t in await w.tools.list_tools(ADMIN, agent)]
        assert names == [
            "computer_exec",
            "computer_read_file",
            "computer_write_file",
            "computer_list_files",
        ]
        assert not w.tools.owns("computer_other")
        assert not w.tools.owns("web_fetch")
        assert not w.tools.is_extension("computer_exec")
        other = await w.call(agent, thread, "computer_other")
        assert other == "error: no computer tool named 'computer_other'"

    run(go())


def test_exec_runs_python_and_answers_its_output_on_an_instance_made_at_first_use() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        assert await w.storage.computers.of_agent(ORG, agent.id) == []
        answer = await w.call(
            agent, thread, "computer_exec", command="python3 -c 'print(6 * 7)'; echo oops >&2"
        )
        assert answer == "exit code 0\nstdout:\n42\n\nstderr:\noops\n"
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert (instance.thread_id, instance.provider, instance.status) == (
            thread.id,
            "local",
            "idle",
        )
        assert instance.persistent is True
        assert instance.ref is not None
        assert instance.last_used_at == w.clock.now()
        failed = await w.call(agent, thread, "computer_exec", command="exit 3")
        assert failed == "exit code 3\nstdout: (empty)\nstderr: (empty)"
        # the same instance again
        assert len(await w.storage.computers.of_agent(ORG, agent.id)) == 1

    run(go())


def test_a_command_past_its_time_is_killed_with_its_output_so_far() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, exec_timeout_s=1)
        thread = await w.thread(agent)
        answer = await w.call(
            agent, thread, "computer_exec", command="echo started; sleep 20; echo never"
        )
        assert answer.startswith("killed after 1 s (its time limit): the output so far follows")
        assert "started" in answer
        assert "never" not in answer
        # the model may ask for less, never more
        short = await w.call(agent, thread, "computer_exec", command="sleep 20", timeout_s=0.2)
        assert short.startswith("killed after 0.2 s")
        long = await w.call(agent, thread, "computer_exec", command="echo hi", timeout_s=99)
        assert long.startswith("exit code 0")

    run(go())


def test_output_is_capped() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        answer = await w.call(
            agent,
            thread,
            "computer_exec",
            command=f"head -c {MAX_OUTPUT + 5000} /dev/zero | tr '\\0' x",
        )
        assert f"(output beyond {MAX_OUTPUT} bytes per stream was dropped)" in answer
        assert answer.split("stdout:\n", 1)[1].split("\nstderr")[0] == "x" * MAX_OUTPUT

    run(go())


def test_files_are_written_read_and_listed_inside_the_workspace_only() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        wrote = await w.call(
            agent, thread, "computer_write_file", path="src/a.py", content="print(1)\n"
        )
        assert wrote == "wrote 9 bytes to src/a.py"
        assert await w.call(agent, thread, "computer_read_file", path="src/a.py") == "print(1)\n"
        await w.call(agent, thread, "computer_write_file", path="b.txt", content="bb")
        assert await w.call(agent, thread, "computer_list_files") == "src/\nb.txt  2 bytes"
        assert await w.call(agent, thread, "computer_list_files", path="src") == "src/a.py  9 bytes"
        ran = await w.call(agent, thread, "computer_exec", command="python3 src/a.py")
        assert ran.startswith("exit code 0\nstdout:\n1\n")
        escape = await w.call(agent, thread, "computer_read_file", path="../../etc/passwd")
        assert escape.startswith("error: ")
        missing = await w.call(agent, thread, "computer_read_file", path="nope.txt")
        assert missing == "error: no file nope.txt"
        invalid = await w.call(agent, thread, "computer_read_file")
        assert invalid.startswith("error: invalid arguments")

    run(go())


def test_a_long_file_is_cut_for_the_model() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_write_file", path="big", content="y" * 50_010)
        read = await w.call(agent, thread, "computer_read_file", path="big")
        assert read == "y" * 50_000 + "\n[cut: 10 more characters]"

    run(go())


def test_scope_thread_gives_each_thread_its_own_and_scope_agent_one_shared() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        one, two = await w.thread(agent), await w.thread(agent)
        await w.call(agent, one, "computer_write_file", path="f", content="one")
        missing = await w.call(agent, two, "computer_read_file", path="f")
        assert missing == "error: no file f"
        assert len(await w.storage.computers.of_agent(ORG, agent.id)) == 2
        no_thread = await w.call(agent, None, "computer_exec", command="true")
        assert no_thread == "error: this computer works inside a conversation only (scope: thread)"

        shared = await w.agent(enabled=True, scope="agent")
        a, b = await w.thread(shared), await w.thread(shared)
        await w.call(shared, a, "computer_write_file", path="f", content="shared")
        assert await w.call(shared, b, "computer_read_file", path="f") == "shared"
        assert await w.call(shared, None, "computer_read_file", path="f") == "shared"
        [instance] = await w.storage.computers.of_agent(ORG, shared.id)
        assert instance.thread_id is None
        assert (await w.computers.of_thread(ADMIN, a.id)).id == instance.id

    run(go())


def test_the_runtime_provider_picks_the_sandbox_unless_the_configuration_names_one() -> None:
    async def go() -> None:
        w = World()
        hosted = await w.agent(runtime_provider="alternative", enabled=True)
        thread = await w.thread(hosted)
        await w.call(hosted, thread, "computer_exec", command="true")
        assert [i.provider for i in await w.storage.computers.of_agent(ORG, hosted.id)] == ["e2b"]
        assert w.sandboxes["e2b"].calls[0][0] == "start"
        assert w.sandboxes["local"].calls == []
        named = await w.agent(runtime_provider="alternative", enabled=True, provider="local")
        await w.call(named, await w.thread(named), "computer_exec", command="true")
        assert [i.provider for i in await w.storage.computers.of_agent(ORG, named.id)] == ["local"]

    run(go())


def test_without_its_provider_the_computer_says_what_to_install_and_makes_nothing() -> None:
    async def go() -> None:
        w = World(providers=())
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        answer = await w.call(agent, thread, "computer_exec", command="true")
        assert answer.startswith("error: the computer's sandbox provider 'local' is not available")
        assert "apt-get install bubblewrap" in answer
        hosted = await w.agent(runtime_provider="alternative", enabled=True)
        hosted_answer = await w.call(
            hosted, await w.thread(hosted), "computer_exec", command="true"
        )
        assert "AGENTSVC_E2B_API_KEY" in hosted_answer
        assert await w.storage.computers.of_agent(ORG, agent.id) == []
        with pytest.raises(SandboxUnavailable):
            w.computers.provider("local")

    run(go())


def test_a_provider_that_fails_to_start_leaves_the_instance_in_error() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        w.sandboxes["local"].unavailable = "the provider is out of capacity"
        answer = await w.call(agent, thread, "computer_exec", command="true")
        assert answer == "error: the provider is out of capacity"
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert (instance.status, instance.error) == ("error", "the provider is out of capacity")
        w.sandboxes["local"].unavailable = None
        assert (await w.call(agent, thread, "computer_exec", command="echo ok")).startswith(
            "exit code 0"
        )
        [again] = await w.storage.computers.of_agent(ORG, agent.id)
        assert (again.id, again.status, again.error) == (instance.id, "idle", None)

    run(go())


# --- stop, resume, lost state, destroy --------------------------------------------------


def test_a_persistent_instance_keeps_its_files_across_a_stop() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_write_file", path="keep.txt", content="kept")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        stopped = await w.computers.stop(ADMIN, agent.id, instance.id)
        assert stopped.status == "stopped"
        assert w.sandboxes["local"].calls[-1] == ("stop", instance.ref)
        assert await w.call(agent, thread, "computer_read_file", path="keep.txt") == "kept"
        resumed = await w.storage.computers.get(ORG, instance.id)
        assert (resumed.status, resumed.ref, resumed.state_lost) == ("idle", instance.ref, False)
        assert w.sandboxes["local"].calls[-1] == ("start", instance.ref)
        # a second stop answers it as it is
        await w.computers.stop(ADMIN, agent.id, instance.id)
        assert (await w.computers.stop(ADMIN, agent.id, instance.id)).status == "stopped"

    run(go())


def test_a_non_persistent_instance_starts_empty_after_a_stop_without_calling_it_lost() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, persistent=False)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_write_file", path="tmp.txt", content="gone")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert instance.persistent is False
        await w.computers.stop(ADMIN, agent.id, instance.id)
        assert await w.call(agent, thread, "computer_read_file", path="tmp.txt") == (
            "error: no file tmp.txt"
        )
        assert (await w.storage.computers.get(ORG, instance.id)).state_lost is False

    run(go())


def test_files_the_provider_lost_are_announced_never_hidden() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_write_file", path="a", content="a")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        await w.computers.stop(ADMIN, agent.id, instance.id)
        assert instance.ref is not None
        w.sandboxes["local"].lose(instance.ref)
        answer = await w.call(agent, thread, "computer_exec", command="ls")
        assert answer == STATE_LOST + "exit code 0\nstdout: (empty)\nstderr: (empty)"
        lost = await w.storage.computers.get(ORG, instance.id)
        assert lost.state_lost is True
        assert lost.ref != instance.ref
        # while running, a sandbox gone at the provider is made again, and said so
        assert lost.ref is not None
        w.sandboxes["local"].lose(lost.ref)
        listed = await w.call(agent, thread, "computer_list_files")
        assert listed == STATE_LOST + "(empty folder)"
        gone_in_exec = await w.storage.computers.get(ORG, instance.id)
        assert gone_in_exec.ref is not None
        w.sandboxes["local"].lose(gone_in_exec.ref)
        ran = await w.call(agent, thread, "computer_exec", command="echo back")
        assert ran.startswith(STATE_LOST + "exit code 0\nstdout:\nback")
        # a stop clears the announcement
        await w.computers.stop(ADMIN, agent.id, instance.id)
        assert (await w.storage.computers.get(ORG, instance.id)).state_lost is False

    run(go())


def test_destroy_removes_the_sandbox_and_a_later_use_makes_a_new_instance() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_write_file", path="a", content="a")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        await w.computers.destroy(ADMIN, agent.id, instance.id)
        assert w.sandboxes["local"].calls[-1] == ("destroy", instance.ref)
        gone = await w.storage.computers.get(ORG, instance.id)
        assert (gone.status, gone.ref) == ("destroyed", None)
        await w.computers.destroy(ADMIN, agent.id, instance.id)  # idempotent
        with pytest.raises(NotFound):
            await w.computers.of_thread(ADMIN, thread.id)
        w.clock.advance(1)
        assert await w.call(agent, thread, "computer_read_file", path="a") == "error: no file a"
        newest, old = await w.storage.computers.of_agent(ORG, agent.id)
        assert (newest.status, old.id) == ("idle", instance.id)
        assert (await w.computers.of_thread(ADMIN, thread.id)).id == newest.id

    run(go())


def test_an_instance_is_another_agents_or_organizations_404() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        other = await w.agent()
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        with pytest.raises(NotFound):
            await w.computers.stop(ADMIN, other.id, instance.id)
        stranger = ADMIN.__class__(org_id="org-other", method="api_key")
        with pytest.raises(NotFound):
            await w.computers.destroy(stranger, agent.id, instance.id)
        with pytest.raises(NotFound):
            await w.computers.instances(stranger, agent.id)
        with pytest.raises(NotFound):
            await w.computers.of_thread(stranger, thread.id)
        with pytest.raises(NotFound):
            await w.computers.of_thread(ADMIN, (await w.thread(other)).id)

    run(go())


# --- the idle sweep -----------------------------------------------------------------------


def test_the_sweep_stops_instances_idle_for_their_timeout_by_the_clock() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, idle_timeout_s=600)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        w.clock.advance(599)
        assert await w.computers.sweep_idle() == 0
        assert (await w.storage.computers.get(ORG, instance.id)).status == "idle"
        w.clock.advance(1)
        assert await w.computers.sweep_idle() == 1
        assert (await w.storage.computers.get(ORG, instance.id)).status == "stopped"
        assert w.sandboxes["local"].calls[-1] == ("stop", instance.ref)
        assert await w.computers.sweep_idle() == 0  # stopped ones are not running

    run(go())


def test_the_sweep_leaves_an_instance_with_a_command_in_flight() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, idle_timeout_s=60)
        config = await w.config(agent)
        execution = await w.computers.begin(
            ORG, agent, config, None, "sleep 1", timeout_s=5, max_output=100
        )
        events = execution.events()
        first = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.1)
        w.clock.advance(3600)
        assert await w.computers.sweep_idle() == 0
        assert isinstance(await first, ExecExit)
        await events.aclose()

    run(go())


# --- limits -------------------------------------------------------------------------------


def test_at_most_three_commands_at_once_per_agent() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        other = await w.agent(enabled=True, scope="agent")
        config = await w.config(agent)
        held = [
            await w.computers.begin(ORG, agent, config, None, "true", timeout_s=5, max_output=10)
            for _ in range(3)
        ]
        with pytest.raises(RateLimited) as refused:
            await w.computers.begin(ORG, agent, config, None, "true", timeout_s=5, max_output=10)
        assert refused.value.detail == "at most 3 commands run at once on an agent's computer"
        answer = await w.call(agent, None, "computer_exec", command="true")
        assert answer == "error: at most 3 commands run at once on an agent's computer"
        # another agent's computer is not held up
        assert (await w.call(other, None, "computer_exec", command="true")).startswith(
            "exit code 0"
        )
        [e async for e in held[0].events()]
        held[1].close()
        held[1].close()  # once only
        assert (await w.call(agent, None, "computer_exec", command="true")).startswith(
            "exit code 0"
        )
        assert (await w.call(agent, None, "computer_exec", command="true")).startswith(
            "exit code 0"
        )
        held[2].close()

    run(go())


def test_sixty_commands_a_minute_per_agent() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        for _ in range(60):
            assert (await w.call(agent, None, "computer_exec", command="true")).startswith("exit")
        refused = await w.call(agent, None, "computer_exec", command="true")
        assert refused == "error: too many requests on this agent's computer; try again later"
        w.mono[0] += 1.0  # one more a second
        assert (await w.call(agent, None, "computer_exec", command="true")).startswith("exit")
        assert (await w.call(agent, None, "computer_exec", command="true")).startswith("error")

    run(go())


# --- operators ----------------------------------------------------------------------------


def test_an_operator_runs_a_command_on_a_stopped_instance_which_resumes() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_write_file", path="n", content="7")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        await w.computers.stop(ADMIN, agent.id, instance.id)
        execution = await w.computers.operator_exec(
            ADMIN, agent.id, instance.id, "cat n; echo x >&2; exit 2", max_output=1000
        )
        events = [e async for e in execution.events()]
        assert [e for e in events if isinstance(e, ExecOutput)] in (
            [ExecOutput(stream="stdout", data="7"), ExecOutput(stream="stderr", data="x\n")],
            [ExecOutput(stream="stderr", data="x\n"), ExecOutput(stream="stdout", data="7")],
        )
        assert isinstance(events[-1], ExecExit)
        assert events[-1].exit_code == 2
        after = await w.storage.computers.get(ORG, instance.id)
        assert after.status == "idle"
        assert after.disk_bytes == 1
        await w.computers.destroy(ADMIN, agent.id, instance.id)
        with pytest.raises(NotFound):
            await w.computers.operator_exec(ADMIN, agent.id, instance.id, "true", max_output=10)

    run(go())


def test_the_instance_list_is_newest_first() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        first, second = await w.thread(agent), await w.thread(agent)
        await w.call(agent, first, "computer_exec", command="true")
        w.clock.advance(1)
        await w.call(agent, second, "computer_exec", command="true")
        listed = await w.computers.instances(ADMIN, agent.id)
        assert [i.thread_id for i in listed] == [second.id, first.id]

    run(go())


def test_leaving_a_command_early_kills_it_and_frees_its_place() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        config = await w.config(agent)
        execution = await w.computers.begin(
            ORG, agent, config, None, "echo a; sleep 30; echo b", timeout_s=60, max_output=100
        )
        events = execution.events()
        assert await anext(events) == ExecOutput(stream="stdout", data="a\n")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert instance.status == "ready"  # a command runs
        assert instance.disk_bytes == 0
        began = asyncio.get_running_loop().time()
        await events.aclose()
        assert asyncio.get_running_loop().time() - began < 5
        after = await w.storage.computers.get(ORG, instance.id)
        assert after.status == "idle"
        held = [
            await w.computers.begin(ORG, agent, config, None, "true", timeout_s=5, max_output=10)
            for _ in range(3)
        ]
        for h in held:
            h.close()

    run(go())


# --- details the mutants look at -------------------------------------------------------


class Recording(FakeSandbox):
    """The fake sandbox, keeping the specs it was started and run with."""

    def __init__(self) -> None:
        super().__init__("local")
        self.specs: list[SandboxSpec] = []

    async def start(self, spec: SandboxSpec, *, resume: str | None = None) -> SandboxStarted:
        self.specs.append(spec)
        return await super().start(spec, resume=resume)


def test_a_sandbox_is_made_with_the_configuration() -> None:
    async def go() -> None:
        w = World()
        recording = Recording()
        w.sandboxes["local"] = recording
        agent = await w.agent(
            enabled=True,
            memory_mb=2048,
            network="allowlist",
            allowed_hosts=["pypi.org"],
            idle_timeout_s=900,
            persistent=False,
        )
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert recording.specs == [
            SandboxSpec(
                instance_id=str(instance.id),
                org_id=ORG,
                persistent=False,
                memory_mb=2048,
                network="allowlist",
                allowed_hosts=("pypi.org",),
            )
        ]
        assert instance.idle_timeout_s == 900
        assert instance.persistent is False

    run(go())


def test_a_non_persistent_sandbox_is_destroyed_before_a_new_one_starts() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, persistent=False)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        await w.computers.stop(ADMIN, agent.id, instance.id)
        await w.call(agent, thread, "computer_exec", command="true")
        calls = w.sandboxes["local"].calls
        assert calls[-3:-1] == [("destroy", instance.ref), ("start", "")]
        assert (await w.storage.computers.get(ORG, instance.id)).ref != instance.ref

    run(go())


def test_the_configuration_answers_the_effective_provider_and_what_is_available() -> None:
    async def go() -> None:
        w = World(providers=("local",))
        assert w.computers.available == ["local"]
        both = World()
        assert both.computers.available == ["e2b", "local"]
        both.sandboxes["e2b"].lacks = "set AGENTSVC_E2B_API_KEY"
        assert both.computers.available == ["local"]  # one that cannot serve is not offered
        agent = await w.agent(runtime_provider="alternative")
        config, effective = await w.computers.configuration(ADMIN, agent.id)
        assert (config.enabled, effective) == (False, "e2b")
        config, effective = await w.computers.configure(ADMIN, agent.id, {"provider": "local"})
        assert (config.provider, effective) == ("local", "local")
        with pytest.raises(NotFound):
            await w.computers.configuration(ADMIN, uuid.uuid4())

    run(go())


def test_a_shared_computer_not_used_yet_is_no_threads_instance() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        thread = await w.thread(agent)
        with pytest.raises(NotFound, match="the thread has no computer instance"):
            await w.computers.of_thread(ADMIN, thread.id)

    run(go())


def test_the_sweep_goes_on_when_a_provider_cannot_stop_one() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, idle_timeout_s=60)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        w.clock.advance(60)
        w.sandboxes["local"].unavailable = "the provider is down"
        assert await w.computers.sweep_idle() == 0
        assert (await w.storage.computers.get(ORG, instance.id)).status == "idle"
        w.sandboxes["local"].unavailable = None
        assert await w.computers.sweep_idle() == 1

    run(go())


def test_an_instance_without_a_sandbox_is_destroyed_without_its_provider() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        w.sandboxes["local"].unavailable = "down"
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert (instance.status, instance.ref) == ("error", None)
        await w.computers.destroy(ADMIN, agent.id, instance.id)  # no call to the provider
        assert (await w.storage.computers.get(ORG, instance.id)).status == "destroyed"
        assert (await w.computers.stop(ADMIN, agent.id, instance.id)).status == "destroyed"

    run(go())


def test_what_the_model_reads_of_a_command() -> None:
    out = ExecOutput(stream="stdout", data="o")
    err = ExecOutput(stream="stderr", data="e")
    assert exec_answer([out], 5) == (
        "the command ended without an exit status\nstdout:\no\nstderr: (empty)"
    )
    killed = ExecExit(exit_code=None, signal="SIGKILL")
    assert exec_answer([err, killed], 5) == "killed by SIGKILL\nstdout: (empty)\nstderr:\ne"
    assert exec_answer([ExecExit(exit_code=None)], 5).startswith("killed by a signal\n")
    timed = ExecExit(exit_code=None, timed_out=True, truncated=True)
    assert exec_answer([out, timed], 2.5) == (
        "killed after 2.5 s (its time limit): the output so far follows\n"
        f"(output beyond {MAX_OUTPUT} bytes per stream was dropped)\nstdout:\no\nstderr: (empty)"
    )


def test_a_file_of_exactly_the_cap_is_read_whole() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_write_file", path="f", content="z" * MAX_READ)
        assert await w.call(agent, thread, "computer_read_file", path="f") == "z" * MAX_READ

    run(go())


def test_an_operators_command_streams_its_events() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        await w.call(agent, None, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        execution = await w.computers.operator_exec(
            ADMIN, agent.id, instance.id, "echo o; sleep 0.1; echo e >&2; exit 1", max_output=100
        )
        events = [e async for e in exec_events(execution, "the command")]
        assert events[0] == ExecStarted(instance_id=instance.id, command="the command")
        assert events[1:3] == [ExecStdout(data="o\n"), ExecStderr(data="e\n")]
        end = events[3]
        assert isinstance(end, ExecEnded)
        assert (end.exit_code, end.timed_out, end.truncated, end.signal) == (1, False, False, None)
        assert end.duration_ms >= 100
        assert len(events) == 4

    run(go())


def test_hosts_that_idna_refuses_or_that_are_not_a_list() -> None:
    with pytest.raises(InvalidInput):
        normalise_host("a\u200db.example")  # a joiner IDNA refuses here
    with pytest.raises(InvalidInput):
        normalise_host("example.123")

    async def go() -> None:
        w = World()
        agent = await w.agent()
        with pytest.raises(InvalidInput, match="must be a list of host names"):
            await w.settings.update(ADMIN, agent.id, {"allowed_hosts": "pypi.org"})

    run(go())


def test_the_tools_as_the_model_sees_them() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        specs = {t.name: t for t in await w.tools.list_tools(ADMIN, agent)}
        path = {"type": "string", "description": "A path relative to the workspace (/workspace)"}
        assert specs["computer_exec"] == ToolSpec(
            name="computer_exec",
            description="Run a shell command (sh -c) on your computer, in its workspace "
            "(/workspace). Answers the exit code and what it printed (each stream cut past "
            "16000 bytes). A command past its time limit is killed; what it printed so far "
            "is answered.",
            parameters={
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The shell command"},
                    "timeout_s": {
                        "type": "number",
                        "description": "Seconds it may run (at most the computer's limit)",
                    },
                },
                "required": ["command"],
            },
        )
        assert specs["computer_read_file"] == ToolSpec(
            name="computer_read_file",
            description="Read a text file of your computer's workspace.",
            parameters={"type": "object", "properties": {"path": path}, "required": ["path"]},
        )
        assert specs["computer_write_file"] == ToolSpec(
            name="computer_write_file",
            description="Write a text file in your computer's workspace (folders are made; "
            "a file there is replaced).",
            parameters={
                "type": "object",
                "properties": {"path": path, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        )
        assert specs["computer_list_files"] == ToolSpec(
            name="computer_list_files",
            description="List a folder of your computer's workspace (folders first, with sizes).",
            parameters={
                "type": "object",
                "properties": {
                    "path": {**path, "description": "The folder (the workspace when absent)"}
                },
                "required": [],
            },
        )

    run(go())


def test_streams_in_several_chunks_and_bytes_that_are_not_utf8() -> None:
    out = [ExecOutput(stream="stderr", data="a"), ExecOutput(stream="stderr", data="b")]
    assert exec_answer([*out, ExecExit(exit_code=0)], 1).endswith("stderr:\nab")

    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="printf 'a\\377b' > bin")
        assert await w.call(agent, thread, "computer_read_file", path="bin") == "a\ufffdb"

    run(go())


def test_a_command_killed_by_a_signal() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        answer = await w.call(agent, None, "computer_exec", command="kill -9 $$")
        assert answer.startswith("killed by SIGKILL\n")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        execution = await w.computers.operator_exec(
            ADMIN, agent.id, instance.id, "kill -9 $$", max_output=100
        )
        events = [e async for e in exec_events(execution, "k")]
        end = events[-1]
        assert isinstance(end, ExecEnded)
        assert (end.exit_code, end.signal) == (None, "SIGKILL")

    run(go())


def test_host_refusals_name_the_field_and_say_why() -> None:
    with pytest.raises(InvalidInput) as refused:
        normalise_host("10.0.0.1")
    assert (refused.value.field, refused.value.problem) == (
        "allowed_hosts",
        "'10.0.0.1' is not a host name (such as pypi.org: no scheme, port, path, "
        "address or wildcard)",
    )
    # full-width letters are mapped (UTS 46) before the name is encoded
    assert normalise_host("\uff42\u00fccher.example") == "xn--bcher-kva.example"

    async def go() -> None:
        w = World()
        agent = await w.agent()
        for value, problem in (
            ("pypi.org", "must be a list of host names"),
            ([f"h{i}.example" for i in range(101)], "at most 100 hosts"),
        ):
            with pytest.raises(InvalidInput) as refused:
                await w.settings.update(ADMIN, agent.id, {"allowed_hosts": value})
            assert (refused.value.field, refused.value.problem) == ("allowed_hosts", problem)

    run(go())


class Specs(FakeSandbox):
    """The fake sandbox, keeping the spec of every stop and command."""

    def __init__(self) -> None:
        super().__init__("local")
        self.seen: list[tuple[str, SandboxSpec]] = []

    async def stop(self, ref: str, spec: SandboxSpec) -> None:
        self.seen.append(("stop", spec))
        await super().stop(ref, spec)

    def exec(self, ref: str, spec: SandboxSpec, command: str, **kw: Any) -> Any:
        self.seen.append(("exec", spec))
        return super().exec(ref, spec, command, **kw)


def test_stops_and_commands_are_given_the_configurations_spec() -> None:
    async def go() -> None:
        w = World()
        specs = Specs()
        w.sandboxes["local"] = specs
        agent = await w.agent(enabled=True, memory_mb=777, scope="agent", idle_timeout_s=60)
        await w.call(agent, None, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        execution = await w.computers.operator_exec(
            ADMIN, agent.id, instance.id, "true", max_output=10
        )
        [e async for e in execution.events()]
        await w.computers.stop(ADMIN, agent.id, instance.id)
        await w.call(agent, None, "computer_exec", command="true")
        w.clock.advance(60)
        assert await w.computers.sweep_idle() == 1
        expected = SandboxSpec(
            instance_id=str(instance.id), org_id=ORG, persistent=True, memory_mb=777
        )
        assert specs.seen == [
            ("exec", expected),
            ("exec", expected),
            ("stop", expected),
            ("exec", expected),
            ("stop", expected),
        ]

    run(go())


def test_an_operators_command_keeps_to_the_configurations_time_limit() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent", exec_timeout_s=1)
        await w.call(agent, None, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        starts = len([c for c in w.sandboxes["local"].calls if c[0] == "start"])
        execution = await w.computers.operator_exec(
            ADMIN, agent.id, instance.id, "sleep 5", max_output=10
        )
        [*_, end] = [e async for e in execution.events()]
        assert isinstance(end, ExecExit)
        assert end.timed_out is True
        # a running instance is used as it is, not started again
        assert len([c for c in w.sandboxes["local"].calls if c[0] == "start"]) == starts

    run(go())


def test_the_limits_of_operators_commands_are_per_agent() -> None:
    async def go() -> None:
        w = World()
        a = await w.agent(enabled=True, scope="agent")
        b = await w.agent(enabled=True, scope="agent")
        for agent in (a, b):
            await w.call(agent, None, "computer_exec", command="true")
        [ia] = await w.storage.computers.of_agent(ORG, a.id)
        [ib] = await w.storage.computers.of_agent(ORG, b.id)
        held = [
            await w.computers.operator_exec(ADMIN, a.id, ia.id, "true", max_output=10)
            for _ in range(3)
        ]
        with pytest.raises(RateLimited):
            await w.computers.operator_exec(ADMIN, a.id, ia.id, "true", max_output=10)
        other = await w.computers.operator_exec(ADMIN, b.id, ib.id, "true", max_output=10)
        other.close()
        for h in held:
            h.close()

    run(go())


def test_an_instance_stays_ready_while_another_command_runs_on_it() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        config = await w.config(agent)
        slow = await w.computers.begin(
            ORG, agent, config, None, "echo s; sleep 30", timeout_s=60, max_output=100
        )
        slow_events = slow.events()
        assert await anext(slow_events) == ExecOutput(stream="stdout", data="s\n")
        quick = await w.computers.begin(
            ORG, agent, config, None, "true", timeout_s=5, max_output=100
        )
        [e async for e in quick.events()]
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert instance.status == "ready"  # the slow one still runs
        await slow_events.aclose()
        assert (await w.storage.computers.get(ORG, instance.id)).status == "idle"

    run(go())


def test_leaving_a_command_early_kills_its_process() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        config = await w.config(agent)
        execution = await w.computers.begin(
            ORG, agent, config, None, "echo $$; sleep 30", timeout_s=60, max_output=100
        )
        events = execution.events()
        first = await anext(events)
        assert isinstance(first, ExecOutput)
        pid = int(first.data)
        os.kill(pid, 0)  # it runs
        await events.aclose()
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)

    run(go())


def test_the_sweep_stops_every_due_instance_past_a_busy_one() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, idle_timeout_s=60)
        threads = [await w.thread(agent) for _ in range(3)]
        await w.call(agent, threads[0], "computer_exec", command="true")
        config = await w.config(agent)
        busy = await w.computers.begin(  # the oldest use: the sweep meets it first
            ORG, agent, config, threads[0].id, "sleep 30", timeout_s=60, max_output=10
        )
        events = busy.events()
        waiting = asyncio.ensure_future(anext(events))
        await asyncio.sleep(0.1)
        for t in threads[1:]:
            w.clock.advance(1)
            await w.call(agent, t, "computer_exec", command="printf 12345 > f")
        shown = await w.storage.computers.active(ORG, agent.id, threads[1].id)
        assert shown is not None
        assert shown.disk_bytes == 5  # what the workspace holds after the command
        w.clock.advance(3600)
        assert await w.computers.sweep_idle() == 2  # the oldest is busy: the others stop
        waiting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiting
        await events.aclose()

    run(go())


def test_destroy_clears_what_the_instance_said_of_its_files() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_write_file", path="f", content="12345")
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        await w.storage.computers.modify(
            ORG, instance.id, lambda i: msgspec.structs.replace(i, state_lost=True)
        )
        assert instance.disk_bytes == 5
        await w.computers.destroy(ADMIN, agent.id, instance.id)
        gone = await w.storage.computers.get(ORG, instance.id)
        assert (gone.state_lost, gone.disk_bytes, gone.ref) == (False, 0, None)
        # a stopped instance is not stopped at its provider again
        other = await w.thread(agent)
        await w.call(agent, other, "computer_exec", command="true")
        second = await w.storage.computers.active(ORG, agent.id, other.id)
        assert second is not None
        await w.computers.stop(ADMIN, agent.id, second.id)
        calls = len(w.sandboxes["local"].calls)
        await w.computers.stop(ADMIN, agent.id, second.id)
        assert len(w.sandboxes["local"].calls) == calls

    run(go())


def test_not_found_says_what() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        other = await w.agent()
        await w.call(agent, None, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        with pytest.raises(NotFound) as wrong_agent:
            await w.computers.stop(ADMIN, other.id, instance.id)
        assert wrong_agent.value.detail == "computer instance not found"
        await w.computers.destroy(ADMIN, agent.id, instance.id)
        with pytest.raises(NotFound) as destroyed:
            await w.computers.operator_exec(ADMIN, agent.id, instance.id, "true", max_output=1)
        assert destroyed.value.detail == "computer instance not found"
        thread = await w.thread(other)
        with pytest.raises(NotFound) as none:
            await w.computers.of_thread(ADMIN, thread.id)
        assert none.value.detail == "the thread has no computer instance"

    run(go())


def test_the_configuration_read_and_changed_is_the_agents() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(runtime_provider="alternative")
        config, effective = await w.computers.configure(ADMIN, agent.id, {"enabled": True})
        assert (config.enabled, effective) == (True, "e2b")
        config, effective = await w.computers.configuration(ADMIN, agent.id)
        assert (config.enabled, config.agent_id, effective) == (True, agent.id, "e2b")

    run(go())


def test_an_agents_sandboxes_go_before_the_agent() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        one, two = await w.thread(agent), await w.thread(agent)
        await w.call(agent, one, "computer_exec", command="true")
        await w.call(agent, two, "computer_exec", command="true")
        refs = {i.ref for i in await w.storage.computers.of_agent(ORG, agent.id)}
        other = await w.agent(enabled=True)
        await w.call(other, await w.thread(other), "computer_exec", command="true")
        agents = Agents(w.storage.agents, w.clock, "local", before_delete=(w.computers.drop_agent,))
        await agents.delete(ADMIN, agent.id)
        destroyed = {ref for name, ref in w.sandboxes["local"].calls if name == "destroy"}
        assert destroyed == refs
        assert await w.storage.computers.of_agent(ORG, agent.id) == []
        assert len(await w.storage.computers.of_agent(ORG, other.id)) == 1

    run(go())


def test_a_sandbox_that_cannot_be_reached_does_not_stop_the_agents_deletion(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, scope="agent")
        await w.call(agent, None, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        w.sandboxes["local"].unavailable = "the provider is down"
        await w.computers.drop_agent(ORG, agent.id)
        assert f"the sandbox of computer instance {instance.id} stays: the provider is down" in [
            r.getMessage() for r in caplog.records
        ]
        w.sandboxes["local"].unavailable = None
        errored = await w.agent(enabled=True, scope="agent")
        w.sandboxes["local"].unavailable = "down"
        await w.call(errored, None, "computer_exec", command="true")  # error: no sandbox
        w.sandboxes["local"].unavailable = None
        calls = len(w.sandboxes["local"].calls)
        await w.computers.drop_agent(ORG, errored.id)
        assert len(w.sandboxes["local"].calls) == calls  # nothing to remove
        # an instance without a sandbox listed first does not hide an older one
        mixed = await w.agent(enabled=True)
        await w.call(mixed, await w.thread(mixed), "computer_exec", command="true")
        [older] = await w.storage.computers.of_agent(ORG, mixed.id)
        w.clock.advance(1)
        w.sandboxes["local"].unavailable = "down"
        await w.call(mixed, await w.thread(mixed), "computer_exec", command="true")
        w.sandboxes["local"].unavailable = None
        await w.computers.drop_agent(ORG, mixed.id)
        assert w.sandboxes["local"].calls[-1] == ("destroy", older.ref)

    run(go())


def test_a_provider_that_cannot_serve_here_makes_no_instance() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        w.sandboxes["local"].lacks = "install bubblewrap"
        answer = await w.call(agent, thread, "computer_exec", command="true")
        assert answer == "error: install bubblewrap"
        assert await w.storage.computers.of_agent(ORG, agent.id) == []
        assert w.sandboxes["local"].calls == []

    run(go())


def test_command_limits_give_back_each_place_once() -> None:
    spent: list[tuple[object, str]] = []
    limits = CommandLimits(lambda key, what: spent.append((key, what)), concurrent=2)
    agent, other = uuid.uuid4(), uuid.uuid4()
    first = limits.take(ORG, agent)
    second = limits.take(ORG, agent)
    assert spent == [((ORG, agent), "on this agent's computer")] * 2
    with pytest.raises(RateLimited) as refused:
        limits.take(ORG, agent)
    assert (refused.value.detail, refused.value.retry_after_s) == (
        "at most 2 commands run at once on an agent's computer",
        1,
    )
    assert len(spent) == 2  # a refused command spends nothing
    limits.take(ORG, other)()  # another agent's place
    first()
    first()  # once only
    third = limits.take(ORG, agent)
    with pytest.raises(RateLimited):
        limits.take(ORG, agent)  # one place came back, not two
    second()
    third()
    for _ in range(2):  # all given back: both places again
        limits.take(ORG, agent)
    one = CommandLimits(lambda key, what: None, concurrent=1)
    one.take(ORG, agent)  # a first command is within a limit of one


class Blind:
    """A computer store whose first reads of a thread's instance miss it, as a
    process that raced another to the thread's first command sees it."""

    def __init__(self, store: Any, misses: int) -> None:
        self._store = store
        self.misses = misses

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def active(self, org: str, agent_id: uuid.UUID, thread_id: Any) -> Any:
        if self.misses:
            self.misses -= 1
            return None
        return await self._store.active(org, agent_id, thread_id)


class Watching(FakeSandbox):
    """The fake sandbox, noting the instance's stored status while it starts."""

    def __init__(self, w: World) -> None:
        super().__init__("local")
        self.w = w
        self.during: list[str] = []

    async def start(self, spec: SandboxSpec, *, resume: str | None = None) -> SandboxStarted:
        stored = await self.w.storage.computers.get(ORG, uuid.UUID(spec.instance_id))
        self.during.append(stored.status)
        return await super().start(spec, resume=resume)


def test_a_race_to_a_threads_first_command_uses_the_winners_instance() -> None:
    async def go() -> None:
        w = World()
        watching = Watching(w)
        w.sandboxes["local"] = watching
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [winner] = await w.storage.computers.of_agent(ORG, agent.id)
        assert watching.during == ["bootstrapping"]
        assert (winner.last_used_at, winner.idle_timeout_s) == (w.clock.now(), 7200)
        blind = Blind(w.storage.computers, misses=1)  # as the loser of the race reads it
        loser = ComputerTools(
            Computers(
                cast("Any", blind),
                w.storage.agents,
                w.threads,
                w.settings,
                w.sandboxes,
                w.clock,
                lambda key, what: None,
            )
        )
        w.clock.advance(5)
        ctx = ToolCallContext(tool_call_id="c2", thread_id=thread.id)
        answer = await loser.call(ADMIN, agent, "computer_exec", {"command": "true"}, ctx)
        assert answer.startswith("exit code 0")
        assert blind.misses == 0
        assert [i.id for i in await w.storage.computers.of_agent(ORG, agent.id)] == [winner.id]
        assert len(watching.during) == 1  # the winner's sandbox, not a second one

    run(go())


class Phantom:
    """A computer store whose idle list begins with an instance gone since (its
    agent deleted meanwhile, in another process)."""

    def __init__(self, store: Any, gone: Any) -> None:
        self._store = store
        self.gone = gone

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def idle_since(self, now: Any) -> Any:
        return [self.gone, *await self._store.idle_since(now)]


def fresh(w: World, store: Any = None) -> Computers:
    """The computer's use cases as another process (or this one restarted) has
    them: nothing held in memory."""
    return Computers(
        store or w.storage.computers,
        w.storage.agents,
        w.threads,
        w.settings,
        w.sandboxes,
        w.clock,
        w.buckets.spend,
    )


def test_the_sweep_goes_on_past_an_instance_gone_since_it_was_listed() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, idle_timeout_s=60)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        gone = msgspec.structs.replace(instance, id=uuid.uuid4(), ref=None)
        w.clock.advance(60)
        assert await fresh(w, Phantom(w.storage.computers, gone)).sweep_idle() == 1
        assert (await w.storage.computers.get(ORG, instance.id)).status == "stopped"

    run(go())


def test_an_operators_command_resumes_a_stopped_instance_in_a_fresh_process() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_write_file", path="n", content="7")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        await w.computers.stop(ADMIN, agent.id, instance.id)
        execution = await fresh(w).operator_exec(
            ADMIN, agent.id, instance.id, "cat n", max_output=100
        )
        events = [e async for e in execution.events()]
        assert events[0] == ExecOutput(stream="stdout", data="7")
        assert isinstance(events[1], ExecExit)
        assert (len(events), events[1].exit_code) == (2, 0)
        assert (await w.storage.computers.get(ORG, instance.id)).status == "idle"

    run(go())


def test_a_command_on_a_sandbox_lost_while_running_streams_each_event_once() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert instance.ref is not None
        w.sandboxes["local"].lose(instance.ref)
        execution = await w.computers.begin(
            ORG, agent, await w.config(agent), thread.id, "echo back", timeout_s=5, max_output=100
        )
        events = [e async for e in execution.events()]
        assert events[0] == ExecOutput(stream="stdout", data="back\n")
        assert isinstance(events[1], ExecExit)
        assert len(events) == 2
        after = await w.storage.computers.get(ORG, instance.id)
        assert (after.state_lost, after.ref != instance.ref) == (True, True)

    run(go())


# --- from the fourth mutation run's survivors ----------------------------------------


def test_an_unknown_provider_is_told_to_be_configured() -> None:
    w = World()
    with pytest.raises(SandboxUnavailable) as refused:
        w.computers.provider("modal")
    assert refused.value.detail == (
        "the computer's sandbox provider 'modal' is not available on this service:"
        " configure it (docs/computer.md)"
    )


def test_a_stopped_instance_restarts_bootstrapping_and_takes_the_new_idle_timeout() -> None:
    """Resumed for a file read the sandbox refuses (so no use is noted after the
    start): the start itself says bootstrapping while it runs, then stamps the
    instance with the time and the configuration's idle timeout of now."""

    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, idle_timeout_s=600)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        await w.computers.stop(ADMIN, agent.id, instance.id)
        await w.settings.update(ADMIN, agent.id, {"idle_timeout_s": 900})
        w.clock.advance(100)
        watching = Watching(w)
        watching.root = w.sandboxes["local"].root
        w.sandboxes["local"] = watching
        refused = await w.call(agent, thread, "computer_read_file", path="/etc/passwd")
        assert refused.startswith("error: ")
        assert watching.during == ["bootstrapping"]
        again = await w.storage.computers.get(ORG, instance.id)
        assert (again.status, again.last_used_at, again.idle_timeout_s) == (
            "idle",
            w.clock.now(),
            900,
        )

    run(go())


class Forgetful(FakeSandbox):
    """A provider that answers ``SandboxGone`` for a sandbox it no longer has,
    even when asked to destroy it (as a real one does); ``measure`` fails the
    workspace's measure with it; counts the measures."""

    def __init__(self, measure: Exception | None = None) -> None:
        super().__init__("local")
        self.measure = measure
        self.measured = 0

    async def destroy(self, ref: str) -> None:
        if not (self.root / ref).is_dir():
            raise SandboxGone(f"sandbox {ref} is gone")
        await super().destroy(ref)

    async def disk_bytes(self, ref: str) -> int:
        self.measured += 1
        if self.measure is not None:
            raise self.measure
        return await super().disk_bytes(ref)


def test_a_lost_non_persistent_sandbox_is_started_anew() -> None:
    async def go() -> None:
        w = World()
        forgetful = Forgetful()
        w.sandboxes["local"] = forgetful
        agent = await w.agent(enabled=True, persistent=False)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert instance.ref is not None
        forgetful.lose(instance.ref)
        ran = await w.call(agent, thread, "computer_exec", command="echo again")
        assert ran.startswith("exit code 0\nstdout:\nagain\n")

    run(go())


@pytest.mark.parametrize(
    "failure", [SandboxGone("gone meanwhile"), SandboxUnavailable("the host is away")]
)
def test_a_workspace_that_cannot_be_measured_leaves_its_size_as_it_was(
    failure: Exception,
) -> None:
    async def go() -> None:
        w = World()
        w.sandboxes["local"] = Forgetful(measure=failure)
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        ran = await w.call(agent, thread, "computer_exec", command="printf 123 > f")
        assert ran.startswith("exit code 0")
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert (instance.status, instance.disk_bytes) == ("idle", 0)

    run(go())


def test_a_command_measures_the_workspace_once_when_it_ends_and_stamps_each_use() -> None:
    async def go() -> None:
        w = World()
        forgetful = Forgetful()
        w.sandboxes["local"] = forgetful
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        await w.call(agent, thread, "computer_exec", command="true")
        forgetful.measured = 0
        w.clock.advance(50)
        await w.call(agent, thread, "computer_exec", command="printf 12 > f")
        assert forgetful.measured == 1
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert (instance.last_used_at, instance.disk_bytes) == (w.clock.now(), 2)

    run(go())


class Vanishing:
    """A computer store whose instance rows are gone (their agent deleted) once
    ``gone`` is set: every change of one is ``NotFound``."""

    def __init__(self, store: Any) -> None:
        self._store = store
        self.gone = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    async def modify(self, org: str, instance_id: Any, change: Any) -> Any:
        if self.gone:
            raise NotFound("computer instance not found")
        return await self._store.modify(org, instance_id, change)


def test_a_command_whose_instance_went_meanwhile_still_ends() -> None:
    async def go() -> None:
        w = World()
        vanishing = Vanishing(w.storage.computers)
        computers = Computers(
            cast("Any", vanishing),
            w.storage.agents,
            w.threads,
            w.settings,
            w.sandboxes,
            w.clock,
            w.buckets.spend,
        )
        agent = await w.agent(enabled=True)
        thread = await w.thread(agent)
        config = await w.config(agent)
        run_ = await computers.begin(
            ORG, agent, config, thread.id, "echo hi", timeout_s=10, max_output=100
        )
        events = run_.events()
        first = await anext(events)
        vanishing.gone = True
        rest = [e async for e in events]
        assert isinstance([first, *rest][-1], ExecExit)

    run(go())


def test_the_computers_concurrency_limit_is_the_one_it_was_given() -> None:
    async def go() -> None:
        w = World()
        computers = Computers(
            w.storage.computers,
            w.storage.agents,
            w.threads,
            w.settings,
            w.sandboxes,
            w.clock,
            w.buckets.spend,
            concurrent=1,
        )
        agent = await w.agent(enabled=True, scope="agent")
        config = await w.config(agent)
        held = await computers.begin(ORG, agent, config, None, "true", timeout_s=10, max_output=10)
        with pytest.raises(RateLimited, match="at most 1 commands"):
            await computers.begin(ORG, agent, config, None, "true", timeout_s=10, max_output=10)
        held.close()

    run(go())


class StartWatch(FakeSandbox):
    """The fake sandbox, keeping the instance as stored while it starts."""

    def __init__(self, w: World) -> None:
        super().__init__("local")
        self.w = w
        self.during: list[Any] = []

    async def start(self, spec: SandboxSpec, *, resume: str | None = None) -> SandboxStarted:
        self.during.append(await self.w.storage.computers.get(ORG, uuid.UUID(spec.instance_id)))
        return await super().start(spec, resume=resume)


def test_a_new_instance_is_stored_stamped_with_its_idle_timeout_before_it_starts() -> None:
    async def go() -> None:
        w = World()
        recording = StartWatch(w)
        w.sandboxes["local"] = recording
        agent = await w.agent(enabled=True, idle_timeout_s=900)
        await w.call(agent, await w.thread(agent), "computer_exec", command="true")
        [starting] = recording.during
        assert (starting.status, starting.last_used_at, starting.idle_timeout_s) == (
            "bootstrapping",
            w.clock.now(),
            900,
        )

    run(go())
