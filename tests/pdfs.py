"""A minimal PDF writer for tests and benchmarks: text pages in Helvetica, an
optional title in the document information dictionary, a correct cross-reference
table. No PDF library needed to make a file (pypdf is what reads them back).

Only text Windows-1252 can encode is shown (the font's WinAnsiEncoding); other
characters become ``?``.
"""

from __future__ import annotations

__all__ = ["make_pdf"]


def _string(text: str) -> bytes:
    """A PDF literal string: ``(...)`` with its delimiters and backslash escaped."""
    raw = text.encode("cp1252", "replace")
    raw = raw.replace(b"\\", b"\\\\").replace(b"(", b"\\(").replace(b")", b"\\)")
    raw = raw.replace(b"\r", b"\\r").replace(b"\n", b"\\n")
    return b"(" + raw + b")"


def _content(text: str) -> bytes:
    """A page's content stream: one ``Tj`` per line, 14 points apart, from the top."""
    ops = [b"BT", b"/F1 12 Tf", b"14 TL", b"72 760 Td"]
    ops.extend(_string(line) + b" Tj T*" for line in text.split("\n"))
    ops.append(b"ET")
    return b"\n".join(ops)


def make_pdf(pages: list[str], *, title: str | None = None) -> bytes:
    """A valid PDF 1.4 file with one page per string of ``pages`` (``\\n`` starts a
    new line), and ``title`` in its information dictionary."""
    objects: list[bytes] = []  # object n is objects[n - 1]
    n_pages = len(pages)
    page_ids = [4 + 2 * i for i in range(n_pages)]
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    kids = b" ".join(b"%d 0 R" % pid for pid in page_ids)
    objects.append(b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, n_pages))
    objects.append(
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica /Encoding /WinAnsiEncoding >>"
    )
    for i, text in enumerate(pages):
        stream = _content(text)
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (page_ids[i] + 1)
        )
        objects.append(b"<< /Length %d >>\nstream\n%s\nendstream" % (len(stream), stream))
    info_id = None
    if title is not None:
        objects.append(b"<< /Title %s >>" % _string(title))
        info_id = len(objects)

    out = bytearray(b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%s\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n" % (len(objects) + 1)
    out += b"0000000000 65535 f \n"
    for offset in offsets:
        out += b"%010d 00000 n \n" % offset
    trailer = b"/Size %d /Root 1 0 R" % (len(objects) + 1)
    if info_id is not None:
        trailer += b" /Info %d 0 R" % info_id
    out += b"trailer\n<< %s >>\nstartxref\n%d\n%%%%EOF\n" % (trailer, xref)
    return bytes(out)
