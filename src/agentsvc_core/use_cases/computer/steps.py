"""A runner's ``computer`` step: one shell command on the computer of the step's
agent (its shared instance, made or resumed as a model's command would), its
output the step's (docs/runners.md, docs/computer.md).

A step interrupted by a killed process runs its command again on the next
attempt: a command a runner repeats should be safe to repeat."""

from __future__ import annotations

from typing import Any

from agentsvc_core.entities.runner import RunnerRun, Step
from agentsvc_core.ports import AgentRepository
from agentsvc_core.ports.sandboxes import ExecExit, ExecOutput
from agentsvc_core.use_cases.computer.instances import Computers
from agentsvc_core.use_cases.runners.expressions import render
from agentsvc_core.use_cases.runners.transitions import MAX_OUTPUT_CHARS, Done, Failed, StepEnd

__all__ = ["ComputerSteps"]


class ComputerSteps:
    def __init__(self, computers: Computers, agents: AgentRepository) -> None:
        self._computers = computers
        self._agents = agents

    async def run(self, run: RunnerRun, step: Step, context: dict[str, Any]) -> StepEnd:
        assert step.agent_id is not None
        assert step.command is not None
        org = run.org_id
        agent = await self._agents.get(org, step.agent_id)
        config = await self._computers.settings.of(org, agent.id)
        if not config.enabled:
            return Failed(error="the agent's computer is not enabled")
        try:
            command = render(step.command, context)
        except ValueError as exc:
            return Failed(error=f"the step's command cannot be built: {exc}")
        execution = await self._computers.begin(
            org,
            agent,
            config,
            None,
            command,
            timeout_s=float(config.exec_timeout_s),
            max_output=MAX_OUTPUT_CHARS,
        )
        events = [e async for e in execution.events()]
        end = next((e for e in events if isinstance(e, ExecExit)), None)
        output = {
            "exit_code": None if end is None else end.exit_code,
            "stdout": "".join(
                e.data for e in events if isinstance(e, ExecOutput) and e.stream == "stdout"
            ),
            "stderr": "".join(
                e.data for e in events if isinstance(e, ExecOutput) and e.stream == "stderr"
            ),
            "timed_out": end is not None and end.timed_out,
        }
        if output["exit_code"] == 0:
            return Done(output=output)
        if output["timed_out"]:
            error = f"the command was killed after {config.exec_timeout_s} s (its time limit)"
        elif output["exit_code"] is None:
            error = "the command was killed"
        else:
            error = f"the command exited with {output['exit_code']}"
        return Failed(output=output, error=error)
