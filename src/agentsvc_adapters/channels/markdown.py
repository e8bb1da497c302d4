"""A reply's Markdown, read into styled runs of text and packed into a messaging
platform's markup in parts within its length limit (Telegram HTML, Slack mrkdwn).

A model writes CommonMark-ish Markdown; chat platforms each render their own small
subset. ``parse`` reads what they can show (bold, italic, strikethrough, inline
code, fenced code blocks, links, headings as bold, list items, block quotes) into
``Run`` s: a piece of plain text and the marks on it, outermost first. Everything
else stays text. ``pack`` writes runs in a ``Dialect`` and cuts them into parts,
each at most ``limit`` long as the dialect measures: a mark cut by a part's end is
closed there and opened again in the next part, so every part is well formed on
its own; text is cut at a paragraph, line or word boundary when one fits (the one
whitespace character cut at is dropped), mid-word only for a word longer than a
part, and never inside an escape (escaping is per character, after cutting).
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import accumulate

__all__ = ["Dialect", "Mark", "Run", "pack", "parse"]

Mark = tuple[str, str]  # (kind, argument): b, i, s, code, q (quote), pre (language), a (URL)
BOLD: Mark = ("b", "")
ITALIC: Mark = ("i", "")
STRIKE: Mark = ("s", "")
CODE: Mark = ("code", "")
QUOTE: Mark = ("q", "")


@dataclass(frozen=True)
class Run:
    text: str
    marks: tuple[Mark, ...] = ()


@dataclass(frozen=True)
class Dialect:
    """How a platform writes marks and text. ``escape`` is applied per character
    (with the marks the character is under); ``measure`` is the platform's length."""

    limit: int
    open: Callable[[Mark], str]
    close: Callable[[Mark], str]
    escape: Callable[[str, tuple[Mark, ...]], str]
    measure: Callable[[str], int] = len


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})\s*([\w+#.-]*)")
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)([-*+]|\d{1,9}[.)])\s+(.*)$")
_QUOTE = re.compile(r"^ {0,3}>\s?(.*)$")
_RULE = re.compile(r"^ {0,3}([-*_])(\s*\1){2,}\s*$")
_LINK = re.compile(r"\[([^\]\n]+)\]\(\s*<?([^)\s>]+)>?\s*\)")
_AUTOLINK = re.compile(r"<((?:https?://|mailto:)[^\s<>]+)>")
_SAFE_URL = re.compile(r"(?:https?://|mailto:)\S+", re.IGNORECASE)
MAX_URL = 2048  # a longer link stays text: its tag alone could overflow a part
_ESCAPABLE = frozenset("\\`*_{}[]()#+-.!~>|<")
# (delimiter, mark), longest first: ** before *
_EMPHASIS = (("**", BOLD), ("__", BOLD), ("~~", STRIKE), ("*", ITALIC), ("_", ITALIC))


def parse(markdown: str) -> list[Run]:
    """The runs of ``markdown``: blocks joined by ``\\n`` (a blank line between
    paragraphs), inline marks read within each line."""
    runs: list[Run] = []
    lines = iter(markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    blank = False
    for line in lines:  # every loop here takes lines from this one iterator: bounded
        if not line.strip():
            blank = bool(runs)
            continue
        if runs:
            joint = "\n\n" if blank else "\n"
            quoted = not blank and _QUOTE.match(line) and QUOTE in runs[-1].marks
            runs.append(Run(joint, (QUOTE,) if quoted else ()))
        blank = False
        fence = _FENCE.match(line)
        if fence:
            _code_block(lines, fence, runs)
            continue
        runs.extend(_line(line))
    return runs


def _code_block(lines: Iterator[str], fence: re.Match[str], runs: list[Run]) -> None:
    """Read the fenced block ``fence`` opened, up to its closing line."""
    marker = fence.group(1)
    body: list[str] = []
    for line in lines:
        if line.strip().startswith(marker):
            break
        body.append(line)
    text = "\n".join(body)
    if text.strip():
        runs.append(Run(text, (("pre", fence.group(2)),)))


def _line(line: str) -> list[Run]:
    if _RULE.match(line):
        return [Run("———")]
    if heading := _HEADING.match(line):
        return inline(heading.group(1), (BOLD,))
    if item := _ITEM.match(line):
        indent = "  " * (len(item.group(1).expandtabs(4)) // 2)
        bullet = item.group(2) if item.group(2)[0].isdigit() else "•"
        return [Run(f"{indent}{bullet} "), *inline(item.group(3), ())]
    if quote := _QUOTE.match(line):
        return inline(quote.group(1), (QUOTE,)) or [Run(" ", (QUOTE,))]
    return inline(line.strip(), ())


def inline(text: str, marks: tuple[Mark, ...]) -> list[Run]:
    """The runs of one line of Markdown under ``marks``."""
    out: list[Run] = []
    buf: list[str] = []

    def flush() -> None:
        if buf:
            out.append(Run("".join(buf), marks))
            buf.clear()

    after = 0  # the index after the last span read (a for loop: bounded)
    for i in range(len(text)):
        if i < after:
            continue
        found = _span(text, i, marks)
        if found is None:
            escaped = text[i] == "\\" and text[i + 1 : i + 2] in _ESCAPABLE
            buf.append(text[i + 1] if escaped else text[i])
            after = i + 2 if escaped else i + 1
            continue
        runs, after = found
        flush()
        out.extend(runs)
    flush()
    return [r for r in out if r.text]


def _span(text: str, i: int, marks: tuple[Mark, ...]) -> tuple[list[Run], int] | None:
    """The marked span that starts at ``text[i]``, if one does: its runs and the
    index after it."""
    char = text[i]
    if char == "`":
        return _code_span(text, i, marks)
    if char == "[" and (link := _LINK.match(text, i)):
        return _linked(link.group(1), link.group(2), marks), link.end()
    if char == "<" and (auto := _AUTOLINK.match(text, i)):
        return _linked(auto.group(1), auto.group(1), marks), auto.end()
    for delim, mark in _EMPHASIS:
        if text.startswith(delim, i) and mark not in marks:
            end = _closer(text, i, delim)
            if end is not None:
                return inline(text[i + len(delim) : end], (*marks, mark)), end + len(delim)
    return None


def _code_span(text: str, i: int, marks: tuple[Mark, ...]) -> tuple[list[Run], int] | None:
    ticks = len(text[i:]) - len(text[i:].lstrip("`"))
    end = text.find("`" * ticks, i + ticks)
    if end < 0:
        return None
    body = text[i + ticks : end]
    if any(m[0] == "a" for m in marks):  # a link cannot hold code: its text plain
        return [Run(body, marks)], end + ticks
    return [Run(body, (*marks, CODE))], end + ticks


def _linked(label: str, url: str, marks: tuple[Mark, ...]) -> list[Run]:
    if len(url) > MAX_URL or not _SAFE_URL.fullmatch(url) or any(m[0] == "a" for m in marks):
        shown = label if label == url else f"{label} ({url})"
        return [Run(shown, marks)]
    return inline(label, (*marks, ("a", url)))


def _closer(text: str, i: int, delim: str) -> int | None:
    """Where the emphasis opened by ``delim`` at ``text[i]`` closes, if it does:
    the opener is followed by a non-space, the closer preceded by one; ``_`` only
    at word boundaries (``snake_case_name`` stays text)."""
    start = i + len(delim)
    if start >= len(text) or text[start].isspace() or text[start] == delim[0]:
        return None
    if delim[0] == "_" and i > 0 and text[i - 1].isalnum():
        return None
    for at in range(start + 1, len(text)):
        if not text.startswith(delim, at):
            continue
        rest = text[at + len(delim) :]
        j = at + len(rest) - len(rest.lstrip(delim[0]))  # ***: the inner * closes first
        after = text[j + len(delim) : j + len(delim) + 1]
        ok = not text[j - 1].isspace() and (len(delim) > 1 or text[j - 1] != delim)
        if delim[0] == "_" and after.isalnum():
            ok = False
        if ok:
            return j
    return None


# --- packing ----------------------------------------------------------------------


def _moves(dialect: Dialect, stack: tuple[Mark, ...], marks: tuple[Mark, ...]) -> str:
    """What going from the marks ``stack`` to ``marks`` writes: the closing of the
    marks left, the opening of the new ones."""
    keep = 0
    for old, new in zip(stack, marks, strict=False):
        if old != new:
            break
        keep += 1
    moves = "".join(dialect.close(m) for m in reversed(stack[keep:]))
    return moves + "".join(dialect.open(m) for m in marks[keep:])


def _pre(marks: tuple[Mark, ...]) -> bool:
    return any(m[0] == "pre" for m in marks)


@dataclass
class _Part:
    dialect: Dialect
    runs: list[Run] = field(default_factory=list)
    stack: tuple[Mark, ...] = ()
    size: int = 0  # as written so far, without the closing of ``stack``
    text: bool = False  # holds some non-blank text

    def cost_to(self, marks: tuple[Mark, ...]) -> tuple[str, str]:
        """What moving from ``stack`` to ``marks`` writes, and what then closes all."""
        return _moves(self.dialect, self.stack, marks), _moves(self.dialect, marks, ())

    def add(self, moves: str, written: str, run: Run) -> None:
        self.runs.append(run)
        self.size += self.dialect.measure(moves) + self.dialect.measure(written)
        self.stack = run.marks
        self.text = self.text or bool(run.text.strip())

    def finish(self) -> str:
        """The part written, without the blanks it ends with (outside code blocks):
        no longer than measured, since only trailing runs go."""
        runs = list(self.runs)
        while runs and not runs[-1].text.strip():
            runs.pop()
        if runs and not _pre(runs[-1].marks):
            runs[-1] = Run(runs[-1].text.rstrip(), runs[-1].marks)
        out: list[str] = []
        stack: tuple[Mark, ...] = ()
        for run in runs:
            out.append(_moves(self.dialect, stack, run.marks))
            out.extend(self.dialect.escape(c, run.marks) for c in run.text)
            stack = run.marks
        out.append(_moves(self.dialect, stack, ()))
        return "".join(out)


def _cut(text: str, fits: int, whole_part: bool, code: bool) -> tuple[int, int]:
    """Where to cut ``text`` of which ``fits`` characters fit: (end of the taken
    text, start of the rest). At the last paragraph break, else line break, else
    space within the fitting text (one in its second half preferred; in a code
    block only a line break), mid-word only in a part that has nothing else."""
    if fits >= len(text):
        return len(text), len(text)
    seps = ("\n",) if code else ("\n\n", "\n", " ")
    found = [(text.rfind(sep, 0, fits + len(sep)), len(sep)) for sep in seps]
    good = [(at, n) for at, n in found if at > 0]
    late = [(at, n) for at, n in good if at >= fits // 2]
    if late or good:
        at, n = (late or good)[0]
        return at, at + n
    if whole_part:
        return max(fits, 1), max(fits, 1)
    return 0, 0


def _lead(text: str, marks: tuple[Mark, ...]) -> str:
    """A part's first text without the blank lines or spaces a cut left before it
    (in a code block only the line breaks: indentation is content)."""
    if _pre(marks):
        return text.lstrip("\n")
    return text.lstrip()


def pack(runs: Iterable[Run], dialect: Dialect) -> tuple[str, ...]:
    """``runs`` in ``dialect``, in parts each at most ``dialect.limit`` long."""
    parts: list[str] = []
    part = _Part(dialect)

    def close() -> None:
        nonlocal part
        if part.text:
            parts.append(part.finish())
        part = _Part(dialect)

    for run in runs:
        text, marks = run.text, run.marks
        # each step takes a character, or closes a part, or drops the marks: bounded
        for _ in range(2 * len(text) + 2):
            if not text:
                break
            if not part.text:
                text = _lead(text, marks)
                if not text:
                    break
            moves, closing = part.cost_to(marks)
            room = dialect.limit - part.size - dialect.measure(moves + closing)
            written = [dialect.escape(c, marks) for c in text]
            sizes = list(accumulate(dialect.measure(w) for w in written))
            if marks and not part.text and sizes[0] > room:
                marks = ()  # the marks alone fill a part: this text goes unmarked
                continue
            end, rest = _cut(text, bisect_right(sizes, room), not part.text, _pre(marks))
            if end == 0:
                close()
                continue
            part.add(moves, "".join(written[:end]), Run(text[:end], marks))
            text = text[rest:]
            if text:
                close()
    close()
    return tuple(parts)
