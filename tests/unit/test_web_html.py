"""HTML to readable text (agentsvc_adapters/web/html.py)."""

from __future__ import annotations

from agentsvc_adapters.web import html_to_text
from tests.fakes.web import PAGE


def test_an_article_keeps_its_text_and_shape_and_drops_the_furniture() -> None:
    title, text = html_to_text(PAGE.decode())
    assert title == "Brewing Green Tea - The Tea Journal"
    assert text.startswith("# How to brew green tea")
    assert "## Water temperature" in text
    assert "1. Warm the pot.\n2. Add 3 g of leaves per 200 ml." in text
    for furniture in ("Home", "Popular posts", "Copyright", "tracking-script-body", "sans-serif"):
        assert furniture not in text


def test_tables_become_markdown_tables() -> None:
    html = (
        "<html><body><article><h1>Steeping</h1><p>The times for the usual green teas, "
        "measured over many cups in a warm pot.</p><table><tr><th>Tea</th><th>Time</th></tr>"
        "<tr><td>Sencha</td><td>1 min</td></tr></table></article></body></html>"
    )
    _, text = html_to_text(html)
    lines = [line.strip() for line in text.splitlines()]
    assert lines[lines.index("| Tea | Time |") :][:3] == [
        "| Tea | Time |",
        "|---|---|",
        "| Sencha | 1 min |",
    ]


def test_a_fragment_without_main_text_is_read_whole() -> None:
    title, text = html_to_text("<p>Just a fragment with <i>some</i> words.</p>")
    assert (title, text) == (None, "Just a fragment with some words.")


def test_scripts_and_styles_are_never_text_even_in_the_fallback() -> None:
    for page in (
        "<div>A<br>B</div><script>var secret = 1</script><style>.x{color:red}</style>",
        "<p>A fragment, <script>var secret = 1</script>then more words.</p>",
    ):
        _, text = html_to_text(page)
        assert "secret" not in text
        assert "color" not in text
        assert text.startswith("A")


def test_bytes_are_decoded_by_the_pages_own_charset() -> None:
    page = (
        '<html><head><meta charset="iso-8859-1"><title>Caf\xe9</title></head>'
        "<body><p>Cr\xe8me br\xfbl\xe9e is a dessert of custard and caramel.</p></body></html>"
    ).encode("latin-1")
    assert html_to_text(page) == ("Café", "Crème brûlée is a dessert of custard and caramel.")


def test_without_a_title_element_the_metadata_title_serves() -> None:
    title, _ = html_to_text(
        '<html><head><meta property="og:title" content="Shared Title"></head>'
        "<body><p>Some body text that is long enough to be a paragraph.</p></body></html>"
    )
    assert title == "Shared Title"


def test_an_empty_page_is_empty() -> None:
    assert html_to_text("") == (None, "")
    assert html_to_text(b"  ") == (None, "")
    assert html_to_text("<html><body></body></html>") == (None, "")
