"""Uploaded files to sections (agentsvc_adapters/documents.py)."""

from __future__ import annotations

import io

import pypdf
import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_adapters.documents import FileParser
from agentsvc_core.ports.documents import DocumentError, ParsedDocument
from agentsvc_core.use_cases.knowledge.chunking import chunk
from tests.fakes.web import PAGE
from tests.pdfs import make_pdf

PARSER = FileParser()


def _markdown(text: str) -> ParsedDocument:
    return PARSER.parse(text.encode(), filename="notes.md", mime_type="text/markdown")


def _slices_hold(doc: ParsedDocument) -> None:
    for section in doc.sections:
        assert doc.text[section.start : section.start + len(section.text)] == section.text


# --- kind --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filename", "mime_type", "head", "kind"),
    [
        # a supported mime type decides
        ("x.bin", "application/pdf", b"", "application/pdf"),
        ("x.txt", "text/markdown; charset=utf-8", b"", "text/markdown"),
        ("x", "text/x-markdown", b"", "text/markdown"),
        ("x", "TEXT/HTML", b"", "text/html"),
        ("x", "application/xhtml+xml", b"", "text/html"),
        ("x", "application/x-pdf", b"", "application/pdf"),
        ("page.pdf", "text/html", b"%PDF-1.7", "text/html"),
        # text/plain is what browsers send for any text: a known extension overrides it
        ("notes.md", "text/plain", b"", "text/markdown"),
        ("notes.txt", "text/plain", b"", "text/plain"),
        ("notes", "text/plain", b"%PDF-", "text/plain"),
        # no or a generic mime type: the extension
        ("Guide.MD", None, b"", "text/markdown"),
        ("a.markdown", "application/octet-stream", b"", "text/markdown"),
        ("a.htm", None, b"", "text/html"),
        ("a.xhtml", "", b"", "text/html"),
        ("report.pdf", "application/octet-stream", b"", "application/pdf"),
        ("read.me.txt", None, b"", "text/plain"),
        ("C:\\docs\\a.pdf", None, b"", "application/pdf"),
        # then the first bytes
        ("upload", None, b"%PDF-1.4\n", "application/pdf"),
        ("upload", "application/octet-stream", b"junk\n%PDF-1.4", "application/pdf"),
        ("upload", None, b"\xef\xbb\xbf  <!DOCTYPE html><html>", "text/html"),
        ("upload", None, b"\n<HTML lang=en>", "text/html"),
        # nothing says it is supported
        ("photo.png", "image/png", b"\x89PNG", None),
        ("upload", None, b"plain words", None),
        ("archive.zip", None, b"PK\x03\x04", None),
        ("upload", None, b"", None),
    ],
)
def test_kind_decides_from_mime_type_then_extension_then_first_bytes(
    filename: str, mime_type: str | None, head: bytes, kind: str | None
) -> None:
    assert PARSER.kind(filename=filename, mime_type=mime_type, head=head) == kind


def test_an_unsupported_file_is_refused_by_parse() -> None:
    with pytest.raises(DocumentError, match="unsupported file type"):
        PARSER.parse(b"\x89PNG\r\n", filename="photo.png", mime_type="image/png")


# --- text --------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        "Café notes\n\n# not a heading in plain text\n".encode(),
        b"\xef\xbb\xbf" + "Café notes\n\n# not a heading in plain text\n".encode(),
        "Café notes\n\n# not a heading in plain text\n".encode("utf-16"),
    ],
    ids=["utf-8", "utf-8-bom", "utf-16-bom"],
)
def test_text_is_one_section_in_utf8_with_or_without_bom_or_utf16_with_bom(data: bytes) -> None:
    doc = PARSER.parse(data, filename="notes.txt", mime_type="text/plain")
    assert doc.title is None
    assert doc.text == "Café notes\n\n# not a heading in plain text\n"
    assert len(doc.sections) == 1
    assert doc.sections[0].headings == ()
    assert doc.sections[0].text == doc.text.strip()
    assert doc.sections[0].page is None


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ("Café".encode("latin-1"), "not valid UTF-8"),
        (b"ok \xff\xfe", "not valid UTF-8"),
        (b"\xff\xfeA", "not valid UTF-16"),
        (b"abc\x00def", "NUL"),
        (b"", "no text"),
        (b" \n\t\n", "no text"),
    ],
)
def test_undecodable_or_empty_text_is_refused(data: bytes, message: str) -> None:
    for filename in ("a.txt", "a.md"):
        with pytest.raises(DocumentError, match=message) as caught:
            PARSER.parse(data, filename=filename, mime_type=None)
        assert "Caf" not in caught.value.detail  # never the file's content


# --- Markdown ----------------------------------------------------------------


MARKDOWN = """Preamble before any heading.

Handbook
========

Welcome to the handbook.

```sh
# this is a shell comment, not a heading
echo hi
```

## Setup *quickly*

Setext second level
-------------------

Text under the setext heading.

> # quoted, not a section

- # in a list, not a section

### Deep `config`

Details.

# Appendix
The end.
"""


def test_markdown_sections_follow_real_atx_and_setext_headings() -> None:
    doc = _markdown(MARKDOWN)
    _slices_hold(doc)
    assert doc.text == MARKDOWN
    assert doc.title == "Handbook"
    assert [s.headings for s in doc.sections] == [
        (),
        ("Handbook",),
        ("Handbook", "Setup quickly"),
        ("Handbook", "Setext second level"),
        ("Handbook", "Setext second level", "Deep config"),
        ("Appendix",),
    ]
    texts = [s.text for s in doc.sections]
    assert texts[0] == "Preamble before any heading."
    assert texts[1].startswith("Handbook\n========\n")
    assert "echo hi\n```" in texts[1]
    assert texts[2] == "## Setup *quickly*"  # raw Markdown, as written
    assert "> # quoted" in texts[3]
    assert "- # in a list" in texts[3]
    assert texts[5] == "# Appendix\nThe end."


def test_markdown_offsets_hold_with_crlf_and_cr_line_ends() -> None:
    for newline in ("\r\n", "\r"):
        text = MARKDOWN.replace("\n", newline)
        doc = _markdown(text)
        _slices_hold(doc)
        assert len(doc.sections) == 6
        assert doc.sections[-1].text == f"# Appendix{newline}The end."


def test_markdown_without_a_first_level_heading_has_no_title() -> None:
    doc = _markdown("## Only second\n\ntext\n")
    assert doc.title is None
    assert [s.headings for s in doc.sections] == [("Only second",)]


@given(st.text(alphabet="#=-`> \n\r\tab*_[]()1.", max_size=200))
def test_any_markdown_gives_sections_that_are_slices_in_order(text: str) -> None:
    try:
        doc = _markdown(text)
    except DocumentError:
        assert not text.strip()
        return
    _slices_hold(doc)  # ParsedDocument checks order too
    chunk(doc, target_tokens=5, max_tokens=8)  # and the chunker takes it


# --- HTML --------------------------------------------------------------------


def test_html_main_content_keeps_headings_and_drops_the_furniture() -> None:
    doc = PARSER.parse(PAGE, filename="tea.html", mime_type="text/html; charset=utf-8")
    _slices_hold(doc)
    assert doc.title == "Brewing Green Tea - The Tea Journal"
    assert [s.headings for s in doc.sections] == [
        ("How to brew green tea",),
        ("How to brew green tea", "Water temperature"),
    ]
    assert doc.sections[1].text.startswith("## Water temperature\n")
    for furniture in ("Home", "Popular posts", "Copyright", "tracking-script-body", "sans-serif"):
        assert furniture not in doc.text


def test_html_without_a_title_tag_takes_the_first_heading() -> None:
    html = (
        b"<html><body><article><h1>Release notes</h1><p>Version two brings faster "
        b"indexing, a new search page and many fixes reported by users.</p></article>"
        b"<script>leak()</script></body></html>"
    )
    doc = PARSER.parse(html, filename="notes.html", mime_type=None)
    assert doc.title == "Release notes"
    assert "leak" not in doc.text
    assert "faster indexing" in doc.text


def test_a_page_trafilatura_finds_no_content_in_is_read_whole_without_scripts() -> None:
    html = b"<ul><li>One</li><li>Two</li></ul><script>leak()</script><style>p{}</style>"
    doc = PARSER.parse(html, filename="f.htm", mime_type=None)
    assert doc.text == "One\nTwo"


def test_html_with_no_text_is_refused() -> None:
    with pytest.raises(DocumentError, match="no text"):
        PARSER.parse(b"<html><script>x()</script></html>", filename="a.html", mime_type=None)


# --- PDF ---------------------------------------------------------------------


def _encrypted(data: bytes, user_password: str) -> bytes:
    writer = pypdf.PdfWriter(clone_from=io.BytesIO(data))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_make_pdf_writes_a_file_pypdf_reads_strictly() -> None:
    data = make_pdf(["Hello (world) \\ back\nsecond line", "Café"], title="A (title)")
    reader = pypdf.PdfReader(io.BytesIO(data), strict=True)
    assert [p.extract_text().strip() for p in reader.pages] == [
        "Hello (world) \\ back\nsecond line",
        "Café",
    ]
    assert reader.metadata is not None
    assert reader.metadata.title == "A (title)"


def test_pdf_sections_are_its_pages_with_numbers_and_its_title() -> None:
    data = make_pdf(["First page text.", "", "Third page\nhas two lines."], title="Manual")
    doc = PARSER.parse(data, filename="manual.pdf", mime_type="application/pdf")
    _slices_hold(doc)
    assert doc.title == "Manual"
    assert [(s.page, s.text, s.headings) for s in doc.sections] == [
        (1, "First page text.", ()),
        (3, "Third page\nhas two lines.", ()),
    ]
    assert [c.page for c in chunk(doc)] == [1, 3]


def test_a_pdf_without_a_title_has_none() -> None:
    doc = PARSER.parse(make_pdf(["Words."]), filename="a.pdf", mime_type=None)
    assert doc.title is None


def test_a_pdf_the_empty_password_opens_is_read() -> None:
    data = _encrypted(make_pdf(["Printing restricted, reading free."]), "")
    doc = PARSER.parse(data, filename="a.pdf", mime_type=None)
    assert doc.sections[0].text == "Printing restricted, reading free."


def test_a_pdf_locked_with_a_password_is_refused() -> None:
    data = _encrypted(make_pdf(["Secret plans."]), "hunter2")
    with pytest.raises(DocumentError, match="encrypted") as caught:
        PARSER.parse(data, filename="a.pdf", mime_type=None)
    assert "hunter2" not in caught.value.detail
    assert "Secret" not in caught.value.detail


def test_a_pdf_without_text_is_refused() -> None:
    with pytest.raises(DocumentError, match=r"no extractable text \(scanned images\?\)"):
        PARSER.parse(make_pdf(["", "  "]), filename="scan.pdf", mime_type=None)


def test_a_pdf_over_the_page_cap_is_refused() -> None:
    data = make_pdf(["one", "two", "three"])
    with pytest.raises(DocumentError, match="3 pages; at most 2"):
        FileParser(max_pages=2).parse(data, filename="a.pdf", mime_type=None)
    assert len(FileParser(max_pages=3).parse(data, filename="a.pdf", mime_type=None).sections) == 3


@pytest.mark.parametrize(
    "data",
    [b"%PDF-1.4\ngarbage", b"%PDF-", b"%PDF-1.7\n" + bytes(range(256)) * 4],
)
def test_a_broken_pdf_is_refused_with_the_exception_class(data: bytes) -> None:
    with pytest.raises(DocumentError, match=r"the PDF could not be read: \w+"):
        PARSER.parse(data, filename="a.pdf", mime_type=None)


def test_a_truncated_pdf_is_refused_or_read_but_never_crashes() -> None:
    data = make_pdf(["Some words on a page.", "More words."])
    for cut in range(0, len(data), 37):
        try:
            doc = PARSER.parse(data[:cut], filename="a.pdf", mime_type=None)
        except DocumentError:
            continue
        _slices_hold(doc)


# --- anything at all ---------------------------------------------------------


@given(
    st.sampled_from(["a.txt", "a.md", "a.html", "a.pdf", "upload"]),
    st.one_of(
        st.binary(max_size=400),
        st.binary(max_size=400).map(lambda b: b"%PDF-1.4\n" + b),
        st.binary(max_size=400).map(lambda b: b"<!doctype html>" + b),
        st.text(max_size=300).map(str.encode),
    ),
)
def test_no_exception_but_document_error_escapes_for_any_bytes(filename: str, data: bytes) -> None:
    try:
        doc = PARSER.parse(data, filename=filename, mime_type=None)
    except DocumentError as exc:  # a refusal, in words
        refusal: str | None = exc.detail
    else:
        refusal = None
    assert refusal != ""
    if refusal is not None:
        return
    _slices_hold(doc)
    assert doc.sections
    assert "\x00" not in doc.text
    doc.text.encode("utf-8")  # no lone surrogate: PostgreSQL can store it
