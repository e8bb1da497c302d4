"""The computer tools an agent's computer configuration gives the model while
``enabled``: ``computer_exec``, ``computer_read_file``, ``computer_write_file``,
``computer_list_files`` (docs/computer.md). Each works on the instance of the
turn's thread (or the agent's shared one), made or resumed on first use.

What the model reads is capped: a command's output at ``MAX_OUTPUT`` bytes per
stream, a file at ``MAX_READ`` characters. A command past its time is killed and
its output so far answered, with the reason. When the instance's earlier files
were lost (its sandbox was gone at the provider) the answer starts by saying so.
"""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from msgspec import Meta

from agentsvc_core.entities import Agent, Principal
from agentsvc_core.entities.computer import ComputerInstance
from agentsvc_core.ports import ToolCallContext, ToolSpec
from agentsvc_core.ports.sandboxes import ExecExit, ExecOutput
from agentsvc_core.use_cases.agent_settings import GatedTools, ToolRefused
from agentsvc_core.use_cases.computer.instances import Computers
from agentsvc_core.use_cases.computer.settings import (
    EXEC_TOOL,
    LIST_TOOL,
    READ_TOOL,
    TOOL_NAMES,
    WRITE_TOOL,
    ComputerConfig,
)

__all__ = [
    "EXEC_TOOL",
    "LIST_TOOL",
    "MAX_OUTPUT",
    "MAX_READ",
    "READ_TOOL",
    "STATE_LOST",
    "TOOL_NAMES",
    "WRITE_TOOL",
    "ComputerTools",
    "exec_answer",
]

MAX_OUTPUT = 16_000  # bytes of each stream of a command the model reads
MAX_READ = 50_000  # characters of a file the model reads
MAX_COMMAND = 100_000
MAX_WRITE = 1_000_000  # characters of a file the model writes
MAX_PATH = 4096
STATE_LOST = (
    "note: this computer's earlier files were lost (its sandbox was gone at the "
    "provider); the workspace was made again, empty.\n"
)

Path = Annotated[str, Meta(min_length=1, max_length=MAX_PATH)]


class _Exec(msgspec.Struct, frozen=True, kw_only=True):
    command: Annotated[str, Meta(min_length=1, max_length=MAX_COMMAND)]
    timeout_s: Annotated[float, Meta(gt=0)] | None = None


class _Read(msgspec.Struct, frozen=True, kw_only=True):
    path: Path


class _Write(msgspec.Struct, frozen=True, kw_only=True):
    path: Path
    content: Annotated[str, Meta(max_length=MAX_WRITE)]


class _List(msgspec.Struct, frozen=True, kw_only=True):
    path: Path = "."


def _spec(name: str, description: str, properties: dict[str, Any], required: list[str]) -> ToolSpec:
    return ToolSpec(
        name=name,
        description=description,
        parameters={"type": "object", "properties": properties, "required": required},
    )


_PATH = {"type": "string", "description": "A path relative to the workspace (/workspace)"}


def _specs() -> list[ToolSpec]:
    """The tools as the model sees them (made per call: a few small objects)."""
    return [
        _spec(
            EXEC_TOOL,
            "Run a shell command (sh -c) on your computer, in its workspace (/workspace). "
            "Answers the exit code and what it printed (each stream cut past "
            f"{MAX_OUTPUT} bytes). A command past its time limit is killed; what it printed "
            "so far is answered.",
            {
                "command": {"type": "string", "description": "The shell command"},
                "timeout_s": {
                    "type": "number",
                    "description": "Seconds it may run (at most the computer's limit)",
                },
            },
            ["command"],
        ),
        _spec(
            READ_TOOL, "Read a text file of your computer's workspace.", {"path": _PATH}, ["path"]
        ),
        _spec(
            WRITE_TOOL,
            "Write a text file in your computer's workspace (folders are made; a file "
            "there is replaced).",
            {"path": _PATH, "content": {"type": "string"}},
            ["path", "content"],
        ),
        _spec(
            LIST_TOOL,
            "List a folder of your computer's workspace (folders first, with sizes).",
            {"path": {**_PATH, "description": "The folder (the workspace when absent)"}},
            [],
        ),
    ]


_ARGS: dict[str, type[msgspec.Struct]] = {
    EXEC_TOOL: _Exec,
    READ_TOOL: _Read,
    WRITE_TOOL: _Write,
    LIST_TOOL: _List,
}


def exec_answer(events: list[ExecOutput | ExecExit], timeout_s: float) -> str:
    """What the model reads of a command: its exit, then each stream's text."""
    out = "".join(e.data for e in events if isinstance(e, ExecOutput) and e.stream == "stdout")
    err = "".join(e.data for e in events if isinstance(e, ExecOutput) and e.stream == "stderr")
    end = next((e for e in events if isinstance(e, ExecExit)), None)
    if end is None:
        head = "the command ended without an exit status"
    elif end.timed_out:
        head = f"killed after {timeout_s:g} s (its time limit): the output so far follows"
    elif end.exit_code is None:
        head = f"killed by {end.signal or 'a signal'}"
    else:
        head = f"exit code {end.exit_code}"
    lines = [head]
    if end is not None and end.truncated:
        lines.append(f"(output beyond {MAX_OUTPUT} bytes per stream was dropped)")
    lines.append(f"stdout:\n{out}" if out else "stdout: (empty)")
    lines.append(f"stderr:\n{err}" if err else "stderr: (empty)")
    return "\n".join(lines)


class ComputerTools(GatedTools[ComputerConfig]):
    """The computer tools of an agent whose computer is enabled."""

    names = TOOL_NAMES
    noun = "computer"
    disabled = "the computer is not enabled for this agent"

    def __init__(self, computers: Computers) -> None:
        super().__init__(computers.settings)
        self._computers = computers

    def specs(self, config: ComputerConfig) -> list[ToolSpec]:
        """The tools, those the configuration names in ``require_approval`` marked
        (their calls wait for a person's approval)."""
        if not config.require_approval:
            return _specs()
        return [
            msgspec.structs.replace(s, approval=True) if s.name in config.require_approval else s
            for s in _specs()
        ]

    async def run(
        self,
        who: Principal,
        agent: Agent,
        name: str,
        arguments: dict[str, Any],
        ctx: ToolCallContext,
        config: ComputerConfig,
    ) -> str:
        if config.scope == "thread" and ctx.thread_id is None:
            raise ToolRefused("this computer works inside a conversation only (scope: thread)")
        args = msgspec.convert(arguments, _ARGS[name])
        c, org, thread = self._computers, who.org_id, ctx.thread_id
        match args:
            case _Exec():
                limit = float(config.exec_timeout_s)
                timeout = min(args.timeout_s or limit, limit)
                execution = await c.begin(
                    org,
                    agent,
                    config,
                    thread,
                    args.command,
                    timeout_s=timeout,
                    max_output=MAX_OUTPUT,
                )
                events = [e async for e in execution.events()]
                return _noted(execution.instance, exec_answer(events, timeout))
            case _Read():
                instance, data = await c.read_file(org, agent, config, thread, args.path)
                text = data.decode("utf-8", "replace")
                if len(text) > MAX_READ:
                    text = f"{text[:MAX_READ]}\n[cut: {len(text) - MAX_READ} more characters]"
                return _noted(instance, text)
            case _Write():
                data = args.content.encode()
                instance = await c.write_file(org, agent, config, thread, args.path, data)
                return _noted(instance, f"wrote {len(data)} bytes to {args.path}")
        assert isinstance(args, _List)
        instance, entries = await c.list_files(org, agent, config, thread, args.path)
        lines = [f"{e.path}/" if e.is_dir else f"{e.path}  {e.size} bytes" for e in entries]
        return _noted(instance, "\n".join(lines) or "(empty folder)")


def _noted(instance: ComputerInstance, answer: str) -> str:
    return STATE_LOST + answer if instance.state_lost else answer
