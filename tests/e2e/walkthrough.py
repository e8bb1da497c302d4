"""Run a page's shell blocks in order, as a reader pasting them would, and check each
answer against the page.

A page's ```sh blocks are its walk-through: one bash session runs them all, so the
variables one command sets are there for the next. A block that cannot run says so
on the line before its fence: ``<!-- not run: why -->``.

The comment lines right under a command (no blank line between) are the answer it
expects, from the last ``curl`` it runs (printed or captured by ``$(...)``)::

    # 201 {"id": ..., "name": "Support", ...}
    # 422 {"error": "VALIDATION_ERROR", "detail": "name: ..."}
    # 200 event: meta ... event: done data: {"ok": true, ...}

- the status comes first, when given; without one, and for every ``curl`` of a
  command without an answer, the status must be 2xx;
- ``...`` stands for any value; in an object, for any other members (without it the
  members are exactly those listed); in a list or an event stream, for any run of
  elements; inside a string, for any text;
- an event stream is a list of ``event: NAME`` with, optionally, ``data: PATTERN``.

Every command must also exit with status 0.

Hosts: the commands may name only loopback addresses and the page hosts of the
table given to :func:`walk`, which maps each to a loopback stand-in (the service,
a receiver); answers are mapped back before they are compared, so a page shows its
own hosts. A command naming any other host is refused before anything runs.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.sse import parse

ANY = "\x00any"  # `...` as a value
REST = "\x00rest"  # `...` as an object's member: other members allowed
LOOPBACK = {"127.0.0.1", "localhost", "[::1]"}
_FENCE = re.compile(r"^```(\w*)\s*$")
_NOT_RUN = re.compile(r"^<!--\s*not run:\s*(\S.*?)\s*-->\s*$")
_URL_HOST = re.compile(r"\b[a-z][a-z0-9+.-]*://(?:[^/\s@'\"]*@)?(\[[^\]]*\]|[^/:\s?'\"\\]+)")


class PageError(AssertionError):
    """The page breaks the harness's conventions (not a wrong answer)."""


@dataclass
class Command:
    block: int  # 1-based index of the page's sh block
    line: int  # 1-based line of the page where the command starts
    text: str
    answer: str = ""  # the comment under it, without the `#`s


@dataclass
class Block:
    line: int
    lang: str
    text: str
    not_run: str | None


@dataclass
class Outcome:
    command: Command
    exit: int | None
    statuses: list[int] = field(default_factory=list)
    body: str = ""


# --- the page ----------------------------------------------------------------


def blocks(markdown: str) -> list[Block]:
    """Every fenced block, with the not-run reason on the line above it, if any."""
    out: list[Block] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j].strip() != "```":
            j += 1
        above = next((s for s in reversed(lines[:start]) if s.strip()), "")
        reason = _NOT_RUN.match(above.strip())
        out.append(Block(start + 1, lang, "\n".join(lines[i + 1 : j]), reason and reason.group(1)))
        i = j + 1
    return out


def commands(markdown: str) -> list[Command]:
    """The commands of the page's shell blocks that run, in order."""
    out: list[Command] = []
    for n, block in enumerate(
        (b for b in blocks(markdown) if b.lang in ("sh", "bash", "shell")), start=1
    ):
        if block.not_run is None:
            out.extend(split(block.text, n, block.line + 1))
    return out


def split(text: str, block: int, first_line: int) -> list[Command]:
    """A block's top-level commands, each with the comment lines right under it."""
    out: list[Command] = []
    current: list[str] = []
    stack: list[str] = []  # open quotes and substitutions
    start = 0
    answering: Command | None = None  # the command a comment line would answer
    for k, line in enumerate(text.split("\n")):
        if not current:
            stripped = line.strip()
            if stripped.startswith("#"):
                if answering is not None:
                    answering.answer += stripped[1:].strip() + "\n"
                continue
            if not stripped:
                answering = None
                continue
            start = k
        current.append(line)
        if _scan(line, stack):
            continue
        out.append(Command(block, first_line + start, "\n".join(current)))
        answering = out[-1]
        current = []
    if current:
        raise PageError(f"block {block}: an unfinished command: {current[0]!r}")
    return out


def _scan(line: str, stack: list[str]) -> bool:
    """Moves through one line; True when the command goes on to the next line."""
    code, i = line, 0
    while i < len(line):
        top = stack[-1] if stack else ""
        if top == "'":
            if line[i] == "'":
                stack.pop()
            i += 1
        elif line[i] == "\\":
            if i + 1 == len(line):
                return True
            i += 2
        elif top != '"' and line[i] == "#" and (i == 0 or line[i - 1] in " \t;|&("):
            code = line[:i]
            break
        else:
            i += _token(line, i, stack)
    return bool(stack) or code.rstrip().endswith(("|", "&&", "||"))


def _token(line: str, i: int, stack: list[str]) -> int:
    """Opens or closes a quote or a substitution at ``i``; the characters it takes."""
    c, top = line[i], stack[-1] if stack else ""
    if line.startswith("$(", i):
        stack.append("$(")
        return 2
    if top == '"':
        if c == '"':
            stack.pop()
    elif c in "'\"(":
        stack.append(c)
    elif c == ")" and stack:
        stack.pop()
    return 1


# --- the answers ---------------------------------------------------------------


@dataclass
class Expected:
    status: int | None
    body: Any  # a JSON pattern, an event list pattern, or None
    events: bool = False


def expected(answer: str) -> Expected:
    text = answer.strip()
    m = re.match(r"(\d{3})\b\s*", text)
    status = int(m.group(1)) if m else None
    rest = text[m.end() :] if m else text
    if not rest:
        if status is None:
            raise PageError(f"an empty answer: {answer!r}")
        return Expected(status, None)
    if rest.startswith(("event:", "...")) and "event:" in rest:
        return Expected(status, _events(rest), events=True)
    if rest[0] in '{["':
        value, end = _pattern(rest, 0)
        if rest[end:].strip():
            raise PageError(f"text after the answer: {rest[end:].strip()!r}")
        return Expected(status, value)
    raise PageError(
        f"the comment under a command is its answer (`# STATUS JSON` or `# STATUS event:"
        f" ...`); move prose above the command: {answer.strip()!r}"
    )


def _pattern(text: str, start: int) -> tuple[Any, int]:
    """The JSON pattern at ``start`` (one value, `...` allowed) and where it ends."""
    out: list[str] = []
    stack: list[str] = []
    i, in_string = start, False
    while i < len(text):
        c = text[i]
        if in_string:
            out.append(" " if c == "\n" else c)  # a string wrapped on the next comment line
            if c == "\\":
                out.append(text[i + 1])
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
            out.append(c)
        elif text.startswith("...", i):
            prev = "".join(out).rstrip()[-1:]
            member = stack[-1:] == ["{"] and prev in ("{", ",")
            out.append(json.dumps(REST) + ": 0" if member else json.dumps(ANY))
            i += 3
            if not stack:
                break
            continue
        else:
            out.append(c)
            if c in "{[":
                stack.append(c)
            elif c in "}]":
                stack.pop()
        i += 1
        if not stack and not in_string and "".join(out).strip():
            break
    try:
        return json.loads("".join(out)), i
    except json.JSONDecodeError as exc:
        raise PageError(f"not a JSON pattern: {text[start:i]!r}: {exc}") from exc


def _events(text: str) -> list[Any]:
    """``event: NAME [data: PATTERN]`` and `...` items."""
    items: list[Any] = []
    i = 0
    while True:
        while i < len(text) and text[i] in " \t\n/":
            i += 1
        if i >= len(text):
            return items
        if text.startswith("...", i):
            items.append(ANY)
            i += 3
            continue
        m = re.compile(r"event:\s*([a-z_][a-z_.]*)\s*").match(text, i)
        if m is None:
            raise PageError(f"expected `event: NAME` or `...` at {text[i:]!r}")
        i = m.end()
        data: Any = ANY
        if text.startswith("data:", i):
            data, i = _pattern(text, i + 5 + len(text[i + 5 :]) - len(text[i + 5 :].lstrip()))
        items.append({"event": m.group(1), "data": data})


def mismatch(pattern: Any, value: Any, path: str = "$") -> str | None:
    """None when ``value`` fits ``pattern``, else where and how it does not."""
    if pattern == ANY:
        return None
    if isinstance(pattern, dict):
        return _object(pattern, value, path)
    if isinstance(pattern, list):
        if not isinstance(value, list):
            return f"{path}: {value!r} is not a list"
        return _glob(pattern, value, path)
    if isinstance(pattern, str) and "..." in pattern:
        rx = ".*".join(re.escape(part) for part in pattern.split("..."))
        if isinstance(value, str) and re.fullmatch(rx, value, re.S):
            return None
        return f"{path}: {value!r} does not fit {pattern!r}"
    if type(pattern) is not type(value) and not {type(pattern), type(value)} <= {int, float}:
        return f"{path}: {value!r} is not {pattern!r}"
    return None if pattern == value else f"{path}: {value!r} is not {pattern!r}"


def _object(pattern: dict[str, Any], value: Any, path: str) -> str | None:
    if not isinstance(value, dict):
        return f"{path}: {value!r} is not an object"
    for key, sub in pattern.items():
        if key == REST:
            continue
        if key not in value:
            return f"{path}: no member {key!r} in {sorted(value)}"
        found = mismatch(sub, value[key], f"{path}.{key}")
        if found:
            return found
    extra = set(value) - set(pattern)
    if extra and REST not in pattern:
        return f"{path}: members the page does not list: {sorted(extra)}"
    return None


def _glob(pattern: list[Any], value: list[Any], path: str) -> str | None:
    """A list pattern whose `...` elements stand for any run of elements."""
    if not pattern:
        return None if not value else f"{path}: {len(value)} elements more than the page lists"
    if pattern[0] == ANY:
        tries = []
        for skip in range(len(value) + 1):
            found = _glob(pattern[1:], value[skip:], path)
            if found is None:
                return None
            tries.append(found)
        # the try that got furthest into an element says the most
        return max(tries, key=lambda t: len(t.split(":", 1)[0]))
    if not value:
        return f"{path}: the answer ends where the page lists more"
    return mismatch(pattern[0], value[0], path) or _glob(pattern[1:], value[1:], path)


def check(outcome: Outcome) -> str | None:
    """None when the command's outcome is what the page says, else why not."""
    cmd = outcome.command
    if outcome.exit != 0:
        failed = [s for s in outcome.statuses if not 200 <= s < 300]
        return f"exited with {outcome.exit}" + (f" (a curl got {failed[0]})" if failed else "")
    want = expected(cmd.answer) if cmd.answer else Expected(None, None)
    if (want.status is not None or want.body is not None) and not outcome.statuses:
        return "the page gives an answer, but the command ran no curl"
    if want.status is not None and outcome.statuses[-1] != want.status:
        return f"status {outcome.statuses[-1]}, the page says {want.status}"
    ok = [s for s in outcome.statuses[:-1] if not 200 <= s < 300]
    if want.status is None and outcome.statuses:
        ok += [s for s in outcome.statuses[-1:] if not 200 <= s < 300]
    if ok:
        return f"status {ok[0]}: a curl without an answer on the page must succeed"
    if want.body is None:
        return None
    if want.events:
        events = [{"event": e.event, "data": e.data} for e in parse(outcome.body)]
        return mismatch(want.body, events)
    try:
        value = json.loads(outcome.body)
    except json.JSONDecodeError:
        return f"the answer is not JSON: {outcome.body[:300]!r}"
    return mismatch(want.body, value)


# --- running --------------------------------------------------------------------

_PRELUDE = r"""
# the harness's curl: the status of each call, and the body of the last one
curl() {
  command curl -w '%{stderr}\n@@status %{http_code}\n' "$@" \
    2>>"$WALK_DIR/$WALK_I.err" | tee "$WALK_DIR/$WALK_I.body"
  return "${PIPESTATUS[0]}"
}
"""


_WAIT_FOR = (
    "for _ in $(seq 200); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break;"
    " sleep 0.05; done\n"
)


def hosts_named(text: str) -> set[str]:
    return {m.group(1).lower() for m in _URL_HOST.finditer(text)}


# what a walk-through may run: requests, and the small tools that read their answers
_RUNS = {"curl", "python3", "echo", "export", "read", "until", "while", "sleep"}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=(\S*)")


def _first_word(code: str) -> str | None:
    """The command's name after its leading assignments (None: only assignments)."""
    rest = code.strip()
    if re.match(r"\w+\(\)", rest):
        return None  # a function's definition
    while m := _ASSIGNMENT.match(rest):
        if m.group(1).startswith(("$(", "'", '"')):
            return None  # a value spanning words: the pages keep those alone on a line
        rest = rest[m.end() :].lstrip()
    return rest.split(None, 1)[0] if rest else None


def functions(cmds: Sequence[Command]) -> set[str]:
    """The shell functions the page defines (``name() { ... }``)."""
    return {m.group(1) for c in cmds if (m := re.match(r"(\w+)\(\)\s*\{", c.text.strip()))}


def prepare(cmd: Command, table: Sequence[tuple[str, str]], defined: set[str]) -> str:
    """The command as it runs: page hosts and placeholders replaced by the table's."""
    if cmd.answer:
        expected(cmd.answer)  # the page's mistakes before anything runs
    text = cmd.text
    for page, local in table:
        text = text.replace(page, local)
    code = "\n".join(_code(line) for line in text.split("\n"))
    if "..." in code:
        raise PageError(f"line {cmd.line}: a placeholder nothing fills: {cmd.text!r}")
    word = _first_word(code)
    if word is not None and word not in _RUNS and word not in defined:
        raise PageError(
            f"line {cmd.line}: the harness does not run `{word}`: mark the block"
            f" `<!-- not run: why -->`, or run it here: {cmd.text!r}"
        )
    strange = hosts_named(code) - LOOPBACK
    if strange:
        raise PageError(
            f"line {cmd.line}: names {sorted(strange)}, neither loopback nor in the host table"
        )
    return text


def _code(line: str) -> str:
    """A line without its comment (an approximation good for the pages' lines)."""
    m = re.search(r"(^|\s)#", line)
    quotes = line[: m.start()].count("'") % 2 if m else 0
    return line[: m.start()] if m and not quotes else line


def run(
    cmds: Sequence[Command],
    table: Sequence[tuple[str, str]],
    cwd: Path,
    listens: Sequence[int] = (),
    timeout: float = 120,
) -> tuple[list[Outcome], str]:
    """One bash session runs the commands in order: each one's outcome, and the
    session's output (for a failure's message). ``listens``: the loopback ports of
    what the page starts in the background (`... &`); the session waits for them to
    accept connections before it goes on, as a reader would see a server start."""
    script, defined = [_PRELUDE], functions(cmds)
    for i, cmd in enumerate(cmds):
        text = prepare(cmd, table, defined)
        script.append(f'WALK_I={i}\n{text}\necho $? > "$WALK_DIR/{i}.exit"\n')
        if _code(text.split("\n")[-1]).rstrip().endswith("&"):
            script.extend(_WAIT_FOR.format(port=port) for port in listens)
    with tempfile.TemporaryDirectory(prefix="walk-") as tmp:
        out = Path(tmp) / "output"
        with open(out, "wb") as sink:
            proc = subprocess.Popen(
                ["bash", "--noprofile", "--norc", "-c", "\n".join(script)],
                cwd=cwd,
                env={**os.environ, "WALK_DIR": tmp},
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                proc.wait(timeout=timeout)
            finally:
                # the session and what the page started in the background (a receiver)
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                proc.wait()
        outcomes = [_outcome(Path(tmp), i, cmd, table) for i, cmd in enumerate(cmds)]
        return outcomes, out.read_text(errors="replace")


def _outcome(tmp: Path, i: int, cmd: Command, table: Sequence[tuple[str, str]]) -> Outcome:
    def read(suffix: str) -> str:
        f = tmp / f"{i}.{suffix}"
        return f.read_text(errors="replace") if f.exists() else ""

    body = read("body")
    for page, local in sorted(table, key=lambda row: -len(row[1])):
        body = body.replace(local, page)
    statuses = [int(s) for s in re.findall(r"^@@status (\d+)$", read("err"), re.M)]
    exit_text = read("exit").strip()
    return Outcome(cmd, int(exit_text) if exit_text else None, statuses, body)
