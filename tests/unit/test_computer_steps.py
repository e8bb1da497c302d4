"""A runner's ``computer`` step: its checks when the runner is saved, and its work
(a command on the agent's shared computer instance, its output the step's)."""

from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace
from typing import Any, cast

import pytest

from agentsvc_core.entities.runner import RunnerRun, Step
from agentsvc_core.errors import InvalidInput, NotFound
from agentsvc_core.use_cases.computer.steps import ComputerSteps
from agentsvc_core.use_cases.runners.steps import StepChecks, StepDraft
from agentsvc_core.use_cases.runners.transitions import Done, Failed
from agentsvc_core.use_cases.runners.work import StepWork
from tests.unit.computer_world import ORG, World
from tests.unit.runner_world import AnyUrl
from tests.unit.turn_world import BOX


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def _run() -> RunnerRun:
    return cast("RunnerRun", SimpleNamespace(org_id=ORG, id=uuid.uuid4(), input={"n": 5}, steps=()))


def _step(agent_id: uuid.UUID, command: str) -> Step:
    return Step(id="sh", kind="computer", agent_id=agent_id, command=command)


def test_a_computer_step_names_its_agent_and_a_command() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        checks = StepChecks(w.storage.agents, BOX, AnyUrl())
        runner_id = uuid.uuid4()
        [step] = await checks.steps(
            ORG,
            runner_id,
            [StepDraft(id="sh", kind="computer", agent_id=agent.id, command="echo {{ input.n }}")],
            (),
        )
        assert (step.kind, step.agent_id, step.command) == (
            "computer",
            agent.id,
            "echo {{ input.n }}",
        )
        assert step.prompt is None
        [other] = await checks.steps(
            ORG,
            runner_id,
            [StepDraft(id="w", kind="webhook", url="https://x.example", command="ls")],
            (),
        )
        assert other.command is None  # only a computer step keeps a command
        for draft, field in (
            (StepDraft(id="sh", kind="computer", command="ls"), "steps[sh].agent_id"),
            (StepDraft(id="sh", kind="computer", agent_id=agent.id), "steps[sh].command"),
            (
                StepDraft(id="sh", kind="computer", agent_id=agent.id, command="  "),
                "steps[sh].command",
            ),
            (
                StepDraft(id="sh", kind="computer", agent_id=agent.id, command="{{ input[ }}"),
                "steps[sh].command",
            ),
        ):
            with pytest.raises(InvalidInput) as refused:
                await checks.steps(ORG, runner_id, [draft], ())
            assert refused.value.field == field
        with pytest.raises(NotFound):
            await checks.steps(
                ORG,
                runner_id,
                [StepDraft(id="sh", kind="computer", agent_id=uuid.uuid4(), command="ls")],
                (),
            )

    run(go())


def test_a_computer_step_runs_its_command_and_fails_unless_it_exits_0() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True, exec_timeout_s=1)
        steps = ComputerSteps(w.computers, w.storage.agents)
        context = {"input": {"n": 5}, "steps": {}}
        done = await steps.run(
            _run(), _step(agent.id, "python3 -c 'print({{ input.n }} * 2)'"), context
        )
        assert done == Done(
            output={"exit_code": 0, "stdout": "10\n", "stderr": "", "timed_out": False}
        )
        [instance] = await w.storage.computers.of_agent(ORG, agent.id)
        assert instance.thread_id is None  # the agent's shared instance
        failed = await steps.run(_run(), _step(agent.id, "echo no >&2; exit 3"), context)
        assert failed == Failed(
            error="the command exited with 3",
            output={"exit_code": 3, "stdout": "", "stderr": "no\n", "timed_out": False},
        )
        slow = await steps.run(_run(), _step(agent.id, "echo a; sleep 10"), context)
        assert isinstance(slow, Failed)
        assert slow.error == "the command was killed after 1 s (its time limit)"
        assert slow.output["stdout"] == "a\n"
        # through the step work, by its kind
        work = StepWork(cast("Any", None), cast("Any", None), steps)
        state = cast("Any", None)
        through = await work.do(_run(), None, _step(agent.id, "echo hi"), state, None, False)
        assert isinstance(through, Done)
        assert through.output["stdout"] == "hi\n"
        # a path that is not there is empty; an expression that cannot be read fails
        empty = await steps.run(_run(), _step(agent.id, "echo [{{ input.n.x }}]"), context)
        assert isinstance(empty, Done)
        assert empty.output["stdout"] == "[]\n"
        bad = await steps.run(_run(), _step(agent.id, "echo {{ foo( }}"), context)
        assert isinstance(bad, Failed)
        assert bad.error.startswith("the step's command cannot be built: ")

    run(go())


def test_a_computer_step_of_an_agent_whose_computer_is_off_fails() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent()
        steps = ComputerSteps(w.computers, w.storage.agents)
        off = await steps.run(_run(), _step(agent.id, "true"), {"input": {}, "steps": {}})
        assert off == Failed(error="the agent's computer is not enabled")
        assert w.sandboxes["local"].calls == []
        without = StepWork(cast("Any", None), cast("Any", None))
        unknown = await without.do(
            _run(), None, _step(agent.id, "true"), cast("Any", None), None, False
        )
        assert unknown == Failed(error="unknown step kind 'computer'")

    run(go())


def test_a_computer_step_killed_by_a_signal_and_its_streams_whole() -> None:
    async def go() -> None:
        w = World()
        agent = await w.agent(enabled=True)
        steps = ComputerSteps(w.computers, w.storage.agents)
        context: dict[str, Any] = {"input": {}, "steps": {}}
        killed = await steps.run(_run(), _step(agent.id, "kill -9 $$"), context)
        assert killed == Failed(
            error="the command was killed",
            output={"exit_code": None, "stdout": "", "stderr": "", "timed_out": False},
        )
        both = await steps.run(
            _run(), _step(agent.id, "echo a >&2; sleep 0.1; echo b >&2; exit 0"), context
        )
        assert isinstance(both, Done)
        assert both.output["stderr"] == "a\nb\n"

    run(go())
