"""Knowledge documents as text: an uploaded file (plain text, Markdown, HTML, PDF)
turned into its extracted text cut into sections that follow the document's own
structure (headings, PDF pages), for ``use_cases/knowledge/chunking.py`` to cut into chunks.
Adapter: ``agentsvc_adapters/documents.py``.

Offsets matter: a chunk is stored with where it sits in the document's text, so
a citation can point back into it. Every section is a slice of ``ParsedDocument.text``
and says where it starts.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from agentsvc_core.errors import DomainError

__all__ = [
    "KINDS",
    "DocumentError",
    "DocumentParser",
    "ParsedDocument",
    "Section",
]

# The canonical mime types a parser answers from ``kind()``.
KINDS = ("text/plain", "text/markdown", "text/html", "application/pdf")


class DocumentError(DomainError):
    """A file could not be turned into text; ``detail`` says why in words for the
    person who uploaded it ("the PDF is encrypted", "the file is not valid UTF-8
    text"...). It never quotes the file beyond a few characters."""


class Section(msgspec.Struct, frozen=True):
    """A run of the document under one heading path (or one PDF page)."""

    headings: tuple[str, ...]  # outermost first; () for text before any heading
    text: str  # as written: raw Markdown for Markdown and HTML, a page's text for PDF
    start: int  # offset of ``text`` in ``ParsedDocument.text``
    page: int | None = None  # 1-based, PDF only


class ParsedDocument(msgspec.Struct, frozen=True):
    """A file's extracted text and its sections, in document order.

    Invariant (checked on construction): each section is the slice of ``text``
    its ``start`` says, sections do not overlap, and they come in order. ``text``
    holds no NUL character (PostgreSQL ``text`` refuses it) and no lone surrogate.
    """

    title: str | None  # the document's own: <title>/h1, a Markdown h1, PDF metadata
    text: str
    sections: tuple[Section, ...]

    def __post_init__(self) -> None:
        previous_end = 0
        for section in self.sections:
            end = section.start + len(section.text)
            if section.start < previous_end or self.text[section.start : end] != section.text:
                raise ValueError("a section is not the slice of the text its start says")
            previous_end = end


class DocumentParser(Protocol):
    """Turns a file's bytes into a ``ParsedDocument``."""

    def kind(self, *, filename: str, mime_type: str | None, head: bytes = b"") -> str | None:
        """The canonical mime type (one of ``KINDS``) the file would be parsed as,
        or None when it is not supported. Decided from ``mime_type`` when it names a
        supported type (``text/plain`` is weak: a known extension overrides it), then
        from the file name's extension, then from ``head`` (the first bytes, when the
        caller has them: ``%PDF-``, ``<!doctype html``, ``<html``)."""
        ...

    def parse(self, data: bytes, *, filename: str, mime_type: str | None) -> ParsedDocument:
        """Parse ``data`` as ``kind()`` decides. Synchronous and CPU-bound (a large
        PDF takes seconds): run it in a worker thread. Raises ``DocumentError`` and
        nothing else: an unsupported type, undecodable text, an encrypted or broken
        PDF, a document with no text at all."""
        ...
