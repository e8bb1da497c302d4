"""A parsed document cut into chunks for search (full-text, and embeddings when
configured). Pure: no I/O, no dependency beyond the port's structs.

The rules (chunks follow headings, about 500-800 tokens, about 15% overlap, offsets
stored: a chunk that keeps to one topic and a heading path ranks and reads better
than a window of fixed size, and the offsets let a citation point back into the
document):

- Tokens are estimated as ``ceil(len(text) / 4)``: cheap, deterministic, no
  tokenizer to ship, and close to what BPE tokenizers give for English prose
  (denser text such as code or CJK gives more real tokens; the estimate is a size
  bound, not a bill).
- A chunk never crosses a section boundary in the sense that matters: it never
  holds part of one section and part of another. Whole small sections are merged
  while the merged chunk stays within ``target_tokens``, when they are on the same
  page and each one after the first sits under the first one's parent heading (its
  siblings and their subsections: "## A" then "### A.1" merge, "### A.2" then "## B"
  do not). A merged chunk carries the heading path its sections share.
- A section longer than ``max_tokens`` is split, preferring a paragraph break, then
  a sentence end, then a space, each as close to ``target_tokens`` as can be found
  between half the target and the maximum; consecutive chunks of one section
  overlap by about ``overlap`` of the target (the overlap starts at a word).
- No chunk is longer than ``max_tokens``: a word longer than that (a base64 blob,
  a URL with a huge query) is cut inside.
- A chunk's text is exactly ``document.text[start:end]``; chunks start and end on
  a non-space character, so whitespace between two chunks of a section belongs to
  neither when ``overlap`` is 0. Every other character of every section is in a chunk.
"""

from __future__ import annotations

import math
import re

import msgspec

from agentsvc_core.ports.documents import ParsedDocument, Section

__all__ = ["CHARS_PER_TOKEN", "Chunk", "chunk", "estimate_tokens", "search_text"]

CHARS_PER_TOKEN = 4

_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_SENTENCE = re.compile(r"[.!?\u3002][\"')\]\u201d\u2019]*(?=\s)")
_SPACE = re.compile(r"\s+")


class Chunk(msgspec.Struct, frozen=True):
    ordinal: int  # 0, 1, 2... in document order
    text: str  # == document.text[start:end]
    start: int
    end: int
    headings: tuple[str, ...]  # the heading path, outermost first
    page: int | None  # the PDF page it starts on
    tokens: int  # estimate_tokens(text)


def estimate_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def search_text(chunk: Chunk) -> str:
    """What full-text search indexes for ``chunk``: its heading path, then its text,
    so the words of a heading find every chunk under it (a later piece of a long
    section no longer shows the heading line itself)."""
    path = " / ".join(h for h in chunk.headings if h)  # a bare "#" has no words
    return f"{path}\n\n{chunk.text}" if path else chunk.text


def _best(pattern: re.Pattern[str], text: str, lo: int, hi: int, aim: int, *, after: bool) -> int:
    """The boundary of ``pattern`` in ``[lo, hi]`` nearest ``aim``, or -1. A boundary
    is where a chunk would end: the match's end for a sentence (``after``), the
    match's start (the whitespace) for a paragraph break or a space. A match that
    starts within ``[lo, hi]`` counts whole, wherever it ends (a paragraph break
    starting at ``hi`` is one)."""
    best = -1
    for m in pattern.finditer(text, lo):
        if m.start() > hi:
            break
        at = m.end() if after else m.start()
        if lo <= at <= hi and (best < 0 or abs(at - aim) < abs(best - aim)):
            best = at
    return best


def _split(text: str, target: int, most: int, overlap: int) -> list[tuple[int, int]]:
    """(start, end) of each piece of ``text`` (stripped, non-empty), in characters:
    pieces at most ``most`` long, aiming at ``target``, each after the first starting
    about ``overlap`` before the previous one's end."""
    pieces: list[tuple[int, int]] = []
    pos = 0
    while True:
        if len(text) - pos <= most:
            pieces.append((pos, len(text)))
            return pieces
        lo, hi, aim = pos + max(1, target // 2), pos + most, pos + target
        end = _best(_PARAGRAPH, text, lo, hi, aim, after=False)
        if end < 0:
            end = _best(_SENTENCE, text, lo, hi, aim, after=True)
        if end < 0:
            end = _best(_SPACE, text, lo, hi, aim, after=False)
        if end < 0:
            end = hi  # one word longer than a chunk: cut inside it
        end = len(text[pos:end].rstrip()) + pos
        pieces.append((pos, end))
        # the next piece starts ``overlap`` back, at a word, and after this one's middle;
        # when no word starts there, it starts after this one (a fragment of a word
        # is no overlap worth having)
        back = max(end - overlap, pos + (end - pos) // 2 + 1)
        if back < end:
            space = _SPACE.search(text, back - 1, end)
            back = end if space is None else space.end()
        nxt = min(back, end)
        while nxt < len(text) and text[nxt].isspace():
            nxt += 1
        pos = nxt


def _mergeable(first: Section, last: Section, candidate: Section, text: str) -> bool:
    """Whether ``candidate`` may join a chunk of whole sections ``first``..``last``."""
    parent = first.headings[:-1]
    between = text[last.start + len(last.text) : candidate.start]
    return (
        candidate.page == first.page
        and candidate.headings[: len(parent)] == parent
        and not between.strip()
    )


def _common(paths: list[tuple[str, ...]]) -> tuple[str, ...]:
    shared = paths[0]
    for path in paths[1:]:
        n = 0
        while n < min(len(shared), len(path)) and shared[n] == path[n]:
            n += 1
        shared = shared[:n]
    return shared


def chunk(
    doc: ParsedDocument,
    *,
    target_tokens: int = 600,
    max_tokens: int = 800,
    overlap: float = 0.15,
) -> list[Chunk]:
    """``doc`` cut into chunks (the module docstring gives the rules). Raises
    ``ValueError`` when ``0 < target_tokens <= max_tokens`` or ``0 <= overlap < 1``
    does not hold."""
    if not 0 < target_tokens <= max_tokens or not 0 <= overlap < 1:
        raise ValueError("chunk: need 0 < target_tokens <= max_tokens and 0 <= overlap < 1")
    target = target_tokens * CHARS_PER_TOKEN
    most = max_tokens * CHARS_PER_TOKEN
    back = int(overlap * target)
    spans: list[tuple[int, int, tuple[str, ...], int | None]] = []
    group: list[Section] = []

    def close() -> None:
        if group:
            end = group[-1].start + len(group[-1].text)
            spans.append((group[0].start, end, _common([s.headings for s in group]), group[0].page))
            group.clear()

    for given in doc.sections:
        text = given.text.strip()
        if not text:
            continue
        start = given.start + len(given.text) - len(given.text.lstrip())
        section = Section(headings=given.headings, text=text, start=start, page=given.page)
        if len(text) > most:
            close()
            for a, b in _split(text, target, most, back):
                spans.append((start + a, start + b, section.headings, section.page))
            continue
        if group:
            merged = section.start + len(text) - group[0].start
            if merged > target or not _mergeable(group[0], group[-1], section, doc.text):
                close()
        group.append(section)
    close()
    return [
        Chunk(
            ordinal=i,
            text=doc.text[a:b],
            start=a,
            end=b,
            headings=headings,
            page=page,
            tokens=estimate_tokens(doc.text[a:b]),
        )
        for i, (a, b, headings, page) in enumerate(spans)
    ]
