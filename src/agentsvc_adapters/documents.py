"""``FileParser``: uploaded files (plain text, Markdown, HTML, PDF) to a
``ParsedDocument`` whose sections follow the document's headings or pages.

- Text is UTF-8 (a BOM allowed), or UTF-16 when a BOM says so; nothing is guessed:
  a file in another encoding is refused with a message that says so, rather than
  indexed as mojibake nobody can find.
- Markdown is sectioned at its real headings, ATX (``## x``) and setext (``x`` over
  ``===``), found by markdown-it-py (CommonMark): a ``#`` line in a code fence is not
  a heading. Headings nested in a block quote or a list item do not cut sections.
  Sections are the Markdown as written, so offsets point into the original.
- HTML goes through trafilatura (the main content, boilerplate, navigation and
  scripts dropped) as Markdown, headings kept, then through the Markdown sectioning;
  a page it finds no main content in is taken whole with lxml (no scripts, styles).
  ``html.py``'s ``html_to_text``, the one ``web_fetch`` uses too.
- PDF goes through pypdf, one section per page with text (``page`` 1-based). An
  encrypted PDF is opened with the empty password (many are "encrypted" only to
  restrict printing) or refused. Pages beyond ``max_pages`` refuse the file rather
  than index part of it silently. Any exception pypdf raises on a malformed file
  becomes a ``DocumentError`` naming its class.

trafilatura and pypdf are imported on first use (trafilatura brings ~20 MB of
modules a service that never indexes a document need not hold).
"""

from __future__ import annotations

import io
import logging
import re
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from markdown_it import MarkdownIt

from agentsvc_adapters.html import html_to_text
from agentsvc_core.ports.documents import DocumentError, DocumentParser, ParsedDocument, Section

if TYPE_CHECKING:
    from markdown_it.token import Token

__all__ = ["FileParser"]

_MIME_KINDS = {
    "text/plain": "text/plain",
    "text/markdown": "text/markdown",
    "text/x-markdown": "text/markdown",
    "text/html": "text/html",
    "application/xhtml+xml": "text/html",
    "application/pdf": "application/pdf",
    "application/x-pdf": "application/pdf",
}
_EXTENSION_KINDS = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".mdown": "text/markdown",
    ".mkd": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".xhtml": "text/html",
    ".pdf": "application/pdf",
}
_SNIFF_BYTES = 1024  # a PDF header may follow some junk within its first 1024 bytes
_HTML_STARTS = (b"<!doctype html", b"<html")

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_SPACES = re.compile(r"[ \t\r\f\v]+")
_MARKDOWN = MarkdownIt("commonmark")
# Its rule chains compile on the first parse: done here, once, rather than raced by
# the worker threads documents are parsed in.
_MARKDOWN.parse("")


def _clean(text: str) -> str:
    """Text PostgreSQL can store: no NUL, no lone surrogate (pypdf can produce both)."""
    text = text.replace("\x00", "")
    return text.encode("utf-8", "replace").decode("utf-8")


def _decode_text(data: bytes) -> str:
    """UTF-8 (BOM or not), or UTF-16 with its BOM; anything else is refused."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError as exc:
            raise DocumentError("the file is not valid UTF-16 text") from exc
    else:
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise DocumentError(
                "the file is not valid UTF-8 text (save it as UTF-8 and upload it again)"
            ) from exc
    if "\x00" in text:
        raise DocumentError("the file is not text (it holds NUL characters)")
    return _clean(text)  # UTF-16 may pair into nothing: lone surrogates


def _line_starts(text: str) -> list[int]:
    """Offset of each line, as markdown-it counts lines (CR, LF and CRLF each end
    one); one extra entry, the text's length, closes the last line."""
    starts = [0]
    starts.extend(m.end() for m in _LINE_BREAK.finditer(text))
    starts.append(len(text))
    return starts


def _inline_text(token: Token) -> str:
    """A heading's words without their Markdown (``*x*`` -> ``x``)."""
    parts = []
    for child in token.children or ():
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return _SPACES.sub(" ", "".join(parts)).strip()


def _headings(text: str) -> Iterator[tuple[int, int, str]]:
    """(first line, level, words) of each top-level heading, in order."""
    tokens = _MARKDOWN.parse(text)
    for i, token in enumerate(tokens):
        if token.type == "heading_open" and token.level == 0 and token.map is not None:
            words = _inline_text(tokens[i + 1]) if i + 1 < len(tokens) else ""
            yield token.map[0], int(token.tag[1:]), words


def _section(text: str, start: int, end: int, path: tuple[str, ...]) -> Section | None:
    """``text[start:end]`` trimmed of surrounding whitespace, or None when blank."""
    piece = text[start:end]
    stripped = piece.strip()
    if not stripped:
        return None
    lead = len(piece) - len(piece.lstrip())
    return Section(headings=path, text=stripped, start=start + lead)


def markdown_document(text: str) -> ParsedDocument:
    """Sections of Markdown ``text`` at its top-level headings; the title is the
    first first-level heading's words."""
    try:
        found = list(_headings(text))
    except Exception:  # noqa: BLE001 - a parser bug must not lose the document: no headings
        found = []
    starts = _line_starts(text)
    sections: list[Section] = []
    stack: list[tuple[int, str]] = []  # (level, words) of the headings enclosing here
    begin = 0
    path: tuple[str, ...] = ()
    title = None
    for line, level, words in found:
        offset = starts[min(line, len(starts) - 1)]
        if (section := _section(text, begin, offset, path)) is not None:
            sections.append(section)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, words))
        begin, path = offset, tuple(w for _, w in stack)
        if title is None and level == 1 and words:
            title = words
    if (section := _section(text, begin, len(text), path)) is not None:
        sections.append(section)
    return ParsedDocument(title=title, text=text, sections=tuple(sections))


def _html_document(data: bytes) -> ParsedDocument:
    try:
        title, text = html_to_text(data)
    except Exception as exc:  # lxml and trafilatura raise many kinds
        raise DocumentError(f"the HTML could not be read: {type(exc).__name__}") from exc
    parsed = markdown_document(_clean(text).strip())
    return ParsedDocument(title=title or parsed.title, text=parsed.text, sections=parsed.sections)


def _pdf_title(reader: object) -> str | None:
    try:
        metadata = reader.metadata  # type: ignore[attr-defined]
        title = metadata.title if metadata is not None else None
    except Exception:  # noqa: BLE001 - a broken info dictionary only loses the title
        return None
    if not isinstance(title, str):
        return None
    return _clean(_SPACES.sub(" ", title)).strip() or None


def _pdf_document(data: bytes, max_pages: int) -> ParsedDocument:
    import pypdf  # noqa: PLC0415 - needed only once a PDF is indexed

    logging.getLogger("pypdf").setLevel(logging.ERROR)  # its warnings are about the file
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError("the PDF is encrypted with a password; upload it unlocked")
        count = len(reader.pages)
        if count > max_pages:
            raise DocumentError(f"the PDF has {count} pages; at most {max_pages} are accepted")
        pages = [_clean(page.extract_text() or "") for page in reader.pages]
        title = _pdf_title(reader)
    except DocumentError:
        raise
    except Exception as exc:  # pypdf raises far more than PyPdfError on bad files
        raise DocumentError(f"the PDF could not be read: {type(exc).__name__}") from exc
    parts: list[str] = []
    sections: list[Section] = []
    offset = 0
    for number, page in enumerate(pages, start=1):
        page_text = page.strip()
        if not page_text:
            continue
        if parts:
            parts.append("\n\n")
            offset += 2
        sections.append(Section(headings=(), text=page_text, start=offset, page=number))
        parts.append(page_text)
        offset += len(page_text)
    if not sections:
        raise DocumentError("the PDF has no extractable text (scanned images?)")
    return ParsedDocument(title=title, text="".join(parts), sections=tuple(sections))


class FileParser(DocumentParser):
    """Plain text, Markdown, HTML and PDF. ``max_pages`` bounds the work one PDF
    can ask for."""

    def __init__(self, *, max_pages: int = 2000) -> None:
        self._max_pages = max_pages

    def kind(self, *, filename: str, mime_type: str | None, head: bytes = b"") -> str | None:
        mime = (mime_type or "").split(";", 1)[0].strip().lower()
        by_mime = _MIME_KINDS.get(mime)
        if by_mime is not None and by_mime != "text/plain":
            return by_mime
        by_name = _EXTENSION_KINDS.get(PurePosixPath(filename.replace("\\", "/")).suffix.lower())
        if by_name is not None:
            return by_name
        if by_mime is not None:
            return by_mime
        if b"%PDF-" in head[:_SNIFF_BYTES]:
            return "application/pdf"
        start = head[:_SNIFF_BYTES].removeprefix(b"\xef\xbb\xbf").lstrip().lower()
        if start.startswith(_HTML_STARTS):
            return "text/html"
        return None

    def parse(self, data: bytes, *, filename: str, mime_type: str | None) -> ParsedDocument:
        kind = self.kind(filename=filename, mime_type=mime_type, head=data[:_SNIFF_BYTES])
        if kind is None:
            raise DocumentError("unsupported file type: upload plain text, Markdown, HTML or PDF")
        if kind == "application/pdf":
            document = _pdf_document(data, self._max_pages)
        elif kind == "text/html":
            document = _html_document(data)
        else:
            text = _decode_text(data)
            if kind == "text/markdown":
                document = markdown_document(text)
            else:
                section = _section(text, 0, len(text), ())
                sections = (section,) if section is not None else ()
                document = ParsedDocument(title=None, text=text, sections=sections)
        if not document.sections:
            raise DocumentError("the document has no text")
        return document
