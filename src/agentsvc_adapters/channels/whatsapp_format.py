"""WhatsApp's text formatting, shared by the Cloud and Web adapters.

WhatsApp renders ``*bold*``, ``_italic_``, ``~strike~`` and monospace between
triple backticks, and shows everything else as typed. ``render`` turns a reply's
Markdown into that: ``**b**`` and ``__b__`` become ``*b*``, ``*i*`` and ``_i_``
become ``_i_``, ``~~s~~`` becomes ``~s~``, headings become bold lines, a link
``[text](url)`` becomes ``text (url)``, ``* item`` bullets become ``- item``, and
code (fenced blocks and inline spans) becomes a triple-backtick span, left as it
was inside. A message holds at most 4096 characters: longer text is cut into
parts at a paragraph break, else a line break, else a space, else anywhere, and
the parts joined give the rendered text back whole.
"""

from __future__ import annotations

import re

__all__ = ["WHATSAPP_MAX_CHARS", "render", "render_whatsapp", "split_text"]

WHATSAPP_MAX_CHARS = 4096

# a fenced block (its info string dropped) or an inline code span
_CODE = re.compile(r"```[^\n`]*\n?(.*?)```|`([^`\n]+)`", re.DOTALL)
_BOLD_ITALIC = re.compile(r"\*\*\*(?=\S)(.+?)(?<=\S)\*\*\*")
_BOLD = re.compile(r"\*\*(?=\S)(.+?)(?<=\S)\*\*|__(?=\S)(.+?)(?<=\S)__")
_ITALIC = re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_BULLET = re.compile(r"^([ \t]*)[*+][ \t]+", re.MULTILINE)
_LINK = re.compile(r"\[([^\]\n]+)\]\(([^)\s]+)\)")
_BOLD_MARK = "\x00"  # stands for WhatsApp's bold ``*`` until italics are done


def _link(match: re.Match[str]) -> str:
    text, url = match.group(1), match.group(2)
    return url if text == url else f"{text} ({url})"


def _plain(text: str) -> str:
    """Markdown outside code, in WhatsApp's formatting."""
    text = _BOLD_ITALIC.sub(lambda m: f"{_BOLD_MARK}_{m.group(1)}_{_BOLD_MARK}", text)
    text = _BOLD.sub(lambda m: f"{_BOLD_MARK}{m.group(1) or m.group(2)}{_BOLD_MARK}", text)
    # a heading is one bold line (bold inside it would close and reopen it)
    text = _HEADING.sub(
        lambda m: f"{_BOLD_MARK}{m.group(1).replace(_BOLD_MARK, '')}{_BOLD_MARK}", text
    )
    text = _BULLET.sub(r"\1- ", text)
    text = _LINK.sub(_link, text)
    text = _ITALIC.sub(r"_\1_", text)
    text = _STRIKE.sub(r"~\1~", text)
    return text.replace(_BOLD_MARK, "*")


def render_whatsapp(markdown: str) -> str:
    """The Markdown in WhatsApp's formatting (code spans kept as they are)."""
    markdown = markdown.replace(_BOLD_MARK, "")
    out: list[str] = []
    last = 0
    for match in _CODE.finditer(markdown):
        out.append(_plain(markdown[last : match.start()]))
        code = match.group(1) if match.group(1) is not None else match.group(2)
        out.append(f"```{code.rstrip(chr(10))}```")
        last = match.end()
    out.append(_plain(markdown[last:]))
    return "".join(out).strip()


def split_text(text: str, limit: int = WHATSAPP_MAX_CHARS) -> tuple[str, ...]:
    """``text`` in parts of at most ``limit`` characters whose concatenation is
    ``text``; each cut is after the last paragraph break, else line break, else
    space, within the limit (a part with none of them is cut at the limit)."""
    parts: list[str] = []
    rest = text
    while len(rest) > limit:
        window = rest[:limit]
        cut = 0
        for separator in ("\n\n", "\n", " "):
            at = window.rfind(separator)
            if at > 0:
                cut = at + len(separator)
                break
        if cut == 0:
            cut = limit
        parts.append(rest[:cut])
        rest = rest[cut:]
    if rest:
        parts.append(rest)
    return tuple(parts)


def render(markdown: str) -> tuple[str, ...]:
    """The reply in WhatsApp's formatting, in parts each within 4096 characters
    (none for a blank reply)."""
    return split_text(render_whatsapp(markdown))
