"""A runner's button page, embed.js, their headers and the embedder check
(agentsvc_web/runner_button.py, agentsvc_web/embed_domains.py).

The page is read back with the standard library's HTML parser, as a browser's
tokenizer would read it: what the schema held must come back as text and attribute
values, never as tags, attributes or script. tests/e2e/test_runner_button_browser.py
runs the same page in Chromium.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from typing import Any

import pytest

from agentsvc_web.embed_domains import frame_ancestors
from agentsvc_web.runner_button import (
    FILES,
    HEIGHT_MESSAGE,
    button_headers,
    button_page,
    embed_script,
    embedder_allowed,
)

NONCE = "n0nce-For-The-Tests_0123"
SUBMIT = "/api/runners/webhooks/rt_test"


class Element:
    def __init__(self, tag: str, attrs: dict[str, str | None]) -> None:
        self.tag = tag
        self.attrs = attrs
        self.text = ""


class Page(HTMLParser):
    """Every element with its attributes and its own text (tags that hold text)."""

    VOID = frozenset({"meta", "input", "link", "br", "img"})

    def __init__(self, markup: str) -> None:
        super().__init__(convert_charrefs=True)
        self.elements: list[Element] = []
        self.open: list[Element] = []
        self.feed(markup)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        element = Element(tag, dict(attrs))
        self.elements.append(element)
        if tag not in self.VOID:
            self.open.append(element)

    def handle_endtag(self, tag: str) -> None:
        while self.open:
            if self.open.pop().tag == tag:
                break

    def handle_data(self, data: str) -> None:
        if self.open:
            self.open[-1].text += data

    def tags(self, tag: str) -> list[Element]:
        return [e for e in self.elements if e.tag == tag]

    def by_id(self, ident: str) -> Element:
        (found,) = [e for e in self.elements if e.attrs.get("id") == ident]
        return found

    def control(self, name: str) -> Element:
        (found,) = [e for e in self.elements if e.attrs.get("data-name") == name]
        return found

    def label(self, control: Element) -> str:
        (found,) = [e for e in self.tags("label") if e.attrs.get("for") == control.attrs["id"]]
        return found.text + "".join(
            e.text for e in self.elements if e.tag == "span" and e.attrs.get("class") == "req"
        )


def page(props: dict[str, Any], required: list[str] | None = None, **kw: Any) -> Page:
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if required is not None:
        schema["required"] = required
    markup = button_page(
        name=kw.get("name", "Triage"),
        description=kw.get("description", "Files a ticket."),
        input_schema=schema,
        submit_url=kw.get("submit_url", SUBMIT),
        nonce=NONCE,
    )
    return Page(markup)


# -- escaping ---------------------------------------------------------------------------

HOSTILE = '"><script>alert(1)</script><img src=x onerror=alert(2)>'
SAFE_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "h1", "p", "form", "div",
    "label", "span", "input", "select", "option", "textarea", "button", "script",
}  # fmt: skip


def test_nothing_from_the_schema_becomes_markup_or_script() -> None:
    props = {
        HOSTILE: {"type": "string", "title": HOSTILE, "description": HOSTILE, "default": HOSTILE},
        "choice": {"enum": [HOSTILE, "</option></select><script>x()</script>"], "default": HOSTILE},
        "labelled": {"oneOf": [{"const": "a", "title": HOSTILE}]},
        "list": {"type": "array", "default": [HOSTILE]},
        "long": {"type": "string", "maxLength": 1000, "default": "</textarea><script>y()</script>"},
        "n": {"type": "integer", "default": HOSTILE, "minimum": HOSTILE},
    }
    markup = button_page(
        name=HOSTILE, description=HOSTILE, input_schema={"properties": props}, submit_url=SUBMIT,
        nonce=NONCE,
    )  # fmt: skip
    parsed = Page(markup)
    assert {e.tag for e in parsed.elements} <= SAFE_TAGS
    # the one script and the one style sheet are the page's own, with the nonce
    (script,) = parsed.tags("script")
    assert script.attrs == {"nonce": NONCE}
    assert script.text == (FILES / "page.js").read_text(encoding="utf-8")
    (style,) = parsed.tags("style")
    assert style.attrs == {"nonce": NONCE}
    assert not [(e.tag, a) for e in parsed.elements for a in e.attrs if a.startswith("on")]
    for needle in ("<script>alert", "<img", "<script>x()", "<script>y()", "</select><script>"):
        assert needle not in markup
    # ... and every value comes back as it was written, as text
    assert parsed.tags("title")[0].text == HOSTILE
    assert parsed.tags("h1")[0].text == HOSTILE
    field = parsed.control(HOSTILE)
    assert field.attrs["value"] == HOSTILE
    assert parsed.label(field).startswith(HOSTILE)
    assert parsed.by_id(str(field.attrs["aria-describedby"])).text == HOSTILE
    options = [o for o in parsed.tags("option") if o.attrs["value"]]
    assert [json.loads(str(o.attrs["value"])) for o in options[:2]] == [
        HOSTILE,
        "</option></select><script>x()</script>",
    ]
    assert options[0].text == HOSTILE
    assert "selected" in options[0].attrs
    assert options[2].text == HOSTILE
    assert json.loads(parsed.control("list").text) == [HOSTILE]
    assert parsed.control("long").text == "\n</textarea><script>y()</script>"
    assert "value" not in parsed.control("n").attrs
    assert "min" not in parsed.control("n").attrs


def test_the_submit_url_is_an_escaped_attribute() -> None:
    parsed = page({}, submit_url='/api/runners/webhooks/rt_a"b<c>&d')
    (form,) = parsed.tags("form")
    assert form.attrs["action"] == '/api/runners/webhooks/rt_a"b<c>&d'
    assert form.attrs["method"] == "post"


@pytest.mark.parametrize("nonce", ["short", "x" * 20 + "\r\nSet-Cookie: a=b", "a b" * 8, ""])
def test_a_nonce_that_could_break_a_header_or_attribute_is_refused(nonce: str) -> None:
    with pytest.raises(ValueError, match="nonce"):
        button_page(name="x", description="", input_schema={}, submit_url=SUBMIT, nonce=nonce)
    with pytest.raises(ValueError, match="nonce"):
        button_headers(domains=["example.com"], nonce=nonce)


def test_the_page_loads_nothing_and_its_scripts_write_no_html() -> None:
    markup = button_page(name="x", description="", input_schema={}, submit_url=SUBMIT, nonce=NONCE)
    parsed = Page(markup)
    assert not [e for e in parsed.elements if "src" in e.attrs or "href" in e.attrs]
    for name in ("page.js", "embed.js"):
        source = (FILES / name).read_text(encoding="utf-8")
        for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("):
            assert sink not in source, (name, sink)
        assert json.dumps(HEIGHT_MESSAGE) in source


def test_the_files_are_package_data() -> None:
    """pyproject.toml ships the page's script and style sheet and embed.js in the wheel."""
    pyproject = (FILES.parents[2] / "pyproject.toml").read_text()
    line = next(x for x in pyproject.splitlines() if x.startswith('"agentsvc_web" = '))
    patterns = re.findall(r'"runner_button_files/([^"]+)"', line)
    for f in FILES.iterdir():
        assert any(f.match(p) for p in patterns), f"{f.name} is not shipped"


# -- the controls -----------------------------------------------------------------------


def test_each_type_renders_its_control() -> None:
    parsed = page(
        {
            "name": {"type": "string", "title": "Your name", "maxLength": 80, "minLength": 2},
            "email": {"type": "string", "format": "email"},
            "site": {"type": "string", "format": "uri"},
            "day": {"type": "string", "format": "date", "default": "2026-01-31"},
            "when": {"type": "string", "format": "date-time"},
            "story": {"type": "string", "maxLength": 5000},
            "note": {"type": "string", "format": "textarea"},
            "short": {"type": "string", "maxLength": 200},
            "size": {"enum": ["S", "M", "L"], "default": "M"},
            "level": {"enum": [1, 2, 3]},
            "count": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
            "rank": {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 5.5},
            "ratio": {"type": "number", "minimum": 0, "maximum": 1.5, "default": 0.25},
            "urgent": {"type": "boolean", "default": True},
            "quiet": {"type": "boolean"},
            "tags": {"type": "array", "items": {"type": "string"}, "default": ["a", "b"]},
            "meta": {"type": "object", "description": "Extra fields."},
            "anything": {},
            "maybe": {"type": ["string", "null"]},
            "either": {"type": ["string", "integer"]},
        },
        required=["name", "level", "count", "urgent", "tags"],
    )

    def attrs(name: str) -> dict[str, str | None]:
        return parsed.control(name).attrs

    def kind(name: str) -> tuple[str, str | None, str | None]:
        element = parsed.control(name)
        return element.tag, element.attrs.get("type"), element.attrs.get("data-kind")

    assert kind("name") == ("input", "text", "string")
    assert (attrs("name")["maxlength"], attrs("name")["minlength"]) == ("80", "2")
    assert "required" in attrs("name")
    assert parsed.label(parsed.control("name")).startswith("Your name")
    assert kind("email") == ("input", "email", "string")
    assert kind("site") == ("input", "url", "string")
    assert kind("day") == ("input", "date", "string")
    assert attrs("day")["value"] == "2026-01-31"
    assert kind("when") == ("input", "text", "string")
    assert kind("story") == ("textarea", None, "string")
    assert attrs("story")["maxlength"] == "5000"
    assert kind("note") == ("textarea", None, "string")
    assert kind("short") == ("input", "text", "string")  # 200 is still one line
    assert kind("size") == ("select", None, "enum")
    size = [(o.attrs["value"], o.text, "selected" in o.attrs) for o in _options(parsed, "size")]
    # optional: an empty first choice that leaves the field out
    assert size == [("", "—", False), ('"S"', "S", False), ('"M"', "M", True), ('"L"', "L", False)]
    level = [(o.attrs["value"], "selected" in o.attrs) for o in _options(parsed, "level")]
    # required without a default: a placeholder the browser refuses to send
    assert level == [("", True), ("1", False), ("2", False), ("3", False)]
    assert "required" in attrs("level")
    assert kind("count") == ("input", "number", "integer")
    count = attrs("count")
    assert (count["step"], count["min"], count["max"], count["value"]) == ("1", "1", "10", "3")
    assert (attrs("rank")["min"], attrs("rank")["max"]) == ("1", "5")
    assert kind("ratio") == ("input", "number", "number")
    ratio = attrs("ratio")
    assert (ratio["step"], ratio["min"], ratio["max"], ratio["value"]) == (
        "any",
        "0",
        "1.5",
        "0.25",
    )
    assert kind("urgent") == ("input", "checkbox", "boolean")
    assert "checked" in attrs("urgent")
    assert "required" not in attrs("urgent")  # a checkbox is always sent; required would force it
    assert "checked" not in attrs("quiet")
    assert kind("tags") == ("textarea", None, "json")
    assert attrs("tags")["data-json"] == "array"
    assert json.loads(parsed.control("tags").text) == ["a", "b"]
    assert kind("meta") == ("textarea", None, "json")
    assert attrs("meta")["data-json"] == "object"
    assert parsed.by_id(str(attrs("meta")["aria-describedby"])).text == "Extra fields. JSON object."
    assert kind("anything") == ("textarea", None, "json")
    assert "data-json" not in attrs("anything")
    assert kind("maybe") == ("input", "text", "string")
    assert kind("either") == ("textarea", None, "json")


def _options(parsed: Page, name: str) -> list[Element]:
    """The options of the select of ``name`` (the elements after it, up to the next control)."""
    start = parsed.elements.index(parsed.control(name))
    options = []
    for element in parsed.elements[start + 1 :]:
        if element.tag != "option":
            break
        options.append(element)
    return options


def test_labelled_choices_send_their_const() -> None:
    parsed = page(
        {"tier": {"oneOf": [{"const": 1, "title": "Gold"}, {"const": 2, "title": "Silver"}]}},
        required=["tier"],
    )
    options = [(o.attrs["value"], o.text) for o in _options(parsed, "tier")]
    assert options == [("", "Choose…"), ("1", "Gold"), ("2", "Silver")]


def test_defaults_of_the_wrong_type_are_not_shown() -> None:
    parsed = page(
        {
            "name": {"type": "string", "default": 5},
            "count": {"type": "integer", "default": 2.5},
            "whole": {"type": "integer", "default": 4.0},
            "flag": {"type": "boolean", "default": "yes"},
            "pick": {"enum": ["a", "b"], "default": "c"},
            "big": {"type": "integer", "default": 10**30},
        },
        required=["pick"],
    )
    assert "value" not in parsed.control("name").attrs
    assert "value" not in parsed.control("count").attrs
    assert parsed.control("whole").attrs["value"] == "4"
    assert "checked" not in parsed.control("flag").attrs
    assert [o.attrs["value"] for o in _options(parsed, "pick") if "selected" in o.attrs] == [""]
    assert parsed.control("big").attrs["value"] == str(10**30)


def test_required_fields_are_marked_and_the_page_is_labelled() -> None:
    parsed = page(
        {"a": {"type": "string", "description": "What to do."}, "b": {"type": "string"}},
        required=["a"],
    )
    a, b = parsed.control("a"), parsed.control("b")
    assert "required" in a.attrs
    assert "required" not in b.attrs
    assert parsed.by_id(str(a.attrs["aria-describedby"])).text == "What to do."
    assert "aria-describedby" not in b.attrs
    # each control has its label; the status line is a live region
    for control in (a, b):
        assert [lb for lb in parsed.tags("label") if lb.attrs.get("for") == control.attrs["id"]]
    status = parsed.by_id("run-status")
    assert (status.attrs["role"], status.attrs["aria-live"]) == ("status", "polite")
    assert parsed.tags("html")[0].attrs["lang"] == "en"
    assert parsed.by_id("run-submit").attrs["type"] == "submit"


def test_a_schema_without_properties_is_a_bare_button() -> None:
    schemas: list[dict[str, Any]] = [
        {},
        {"type": "object"},
        {"properties": []},
        {"properties": {"x": True}},
    ]
    for schema in schemas:
        markup = button_page(
            name="", description="", input_schema=schema, submit_url=SUBMIT, nonce=NONCE
        )
        parsed = Page(markup)
        assert parsed.tags("title")[0].text == "Run"
        assert parsed.by_id("run-submit").text == "Run"
        assert not parsed.tags("p") or all(
            p.attrs.get("class") != "about" for p in parsed.tags("p")
        )
    # a property whose schema is `true` takes any JSON
    assert page({"x": True}).control("x").attrs["data-kind"] == "json"


# -- embed.js ---------------------------------------------------------------------------


def test_embed_script_carries_its_values_as_inert_string_literals() -> None:
    url = '/api/runners/r/button?token=rt_x</script><script>alert(1)//"\u2028__TITLE__'
    script = embed_script(button_url=url, title='Ticket </script> "form" */ alert(2) /*')
    assert "<" not in script  # no tag, no end of a script element
    assert "__BUTTON_URL__" not in script
    # the comment is the file's own; the values are JSON string literals, read back whole
    literals = [line for line in script.splitlines() if "new URL(" in line or "frame.title" in line]
    assert json.dumps(url).replace("<", "\\u003c").replace(">", "\\u003e") in literals[0]
    assert '"Ticket \\u003c/script\\u003e \\"form\\" */ alert(2) /*"' in literals[-1]
    assert script.count("*/") == 2  # the header comment's end and the title's, inside a string


# -- headers ----------------------------------------------------------------------------


def test_headers_are_exact() -> None:
    headers = button_headers(
        domains=[
            "example.com",
            "*.Example.com",
            "shop.example.com:8443",
            "Bücher.example",
            "localhost:3000",
            "127.0.0.1:8001",
            "localhost",
            "https://bad.example",  # not an entry the settings accept: allows nothing
            "example.com",
        ],
        nonce=NONCE,
    )
    assert headers == {
        "Content-Security-Policy": (
            "default-src 'none'; "
            f"script-src 'nonce-{NONCE}'; "
            f"style-src 'nonce-{NONCE}'; "
            "connect-src 'self'; "
            "form-action 'self'; "
            "base-uri 'none'; "
            "frame-ancestors https://example.com https://*.example.com "
            "https://shop.example.com:8443 https://xn--bcher-kva.example "
            "https://localhost:3000 http://localhost:3000 "
            "https://127.0.0.1:8001 http://127.0.0.1:8001 https://localhost http://localhost"
        ),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }
    assert "X-Frame-Options" not in headers


def test_no_domains_frame_nobody() -> None:
    headers = button_headers(domains=[], nonce=NONCE)
    assert headers["Content-Security-Policy"].endswith("; frame-ancestors 'none'")
    assert frame_ancestors(["not a domain", "a/b"]) == "'none'"


# -- the embedder check -----------------------------------------------------------------

DOMAINS = ["example.com", "*.corp.example", "Bücher.example", "localhost:3000", "127.0.0.1:8001"]


@pytest.mark.parametrize(
    ("origin", "referer", "allowed"),
    [
        ("https://example.com", None, True),
        (None, "https://example.com/pricing?plan=pro", True),
        ("https://EXAMPLE.COM", None, True),
        ("HTTPS://Example.Com:443", None, True),
        ("https://example.com:8443", None, False),  # no port in the entry: 443 only
        ("http://example.com", None, False),  # plain HTTP only on loopback
        ("https://www.example.com", None, False),  # not a wildcard entry
        ("https://evil-example.com", None, False),
        ("https://example.com.evil.net", None, False),
        ("https://notexample.com", None, False),
        ("https://example.com@evil.net", None, False),
        (None, "https://evil.net/?next=https://example.com", False),
        ("https://a.corp.example", None, True),
        ("https://a.b.corp.example", None, True),
        ("https://corp.example", None, False),  # *. is subdomains only
        ("https://evilcorp.example", None, False),
        ("https://a.corp.example.evil.net", None, False),
        ("https://xn--bcher-kva.example", None, True),
        ("https://XN--BCHER-KVA.example", None, True),
        (None, "https://bücher.example/page", True),
        ("https://bucher.example", None, False),
        ("http://localhost:3000", None, True),
        ("https://localhost:3000", None, True),
        ("http://localhost:3001", None, False),
        ("http://localhost", None, False),
        ("http://127.0.0.1:8001", None, True),
        ("http://127.0.0.1:8002", None, False),
        ("http://127.0.0.2:8001", None, False),
        # Origin decides when there is one; Referer only without it
        ("https://evil.net", "https://example.com/", False),
        ("https://example.com", "https://evil.net/", True),
        ("null", "https://example.com/", False),  # an opaque origin
        ("file:///tmp/a.html", None, False),
        ("https://example.com:99999", None, False),
        ("not a url", None, False),
        ("", "https://example.com/", True),
        (None, None, True),  # no header: frame-ancestors guards the framing
        ("", "", True),
    ],
)
def test_embedder_allowed(origin: str | None, referer: str | None, allowed: bool) -> None:
    assert embedder_allowed(origin=origin, referer=referer, domains=DOMAINS) is allowed


@pytest.mark.parametrize(
    ("origin", "referer"),
    [("https://example.com", None), (None, "https://example.com/"), (None, None)],
)
def test_no_domains_allow_nobody(origin: str | None, referer: str | None) -> None:
    assert embedder_allowed(origin=origin, referer=referer, domains=[]) is False
    assert embedder_allowed(origin=origin, referer=referer, domains=["a b", "https://x"]) is False


def test_a_port_in_the_entry_is_the_only_port() -> None:
    domains = ["shop.example.com:8443", "*.example.org:8443"]
    assert embedder_allowed(origin="https://shop.example.com:8443", referer=None, domains=domains)
    assert not embedder_allowed(origin="https://shop.example.com", referer=None, domains=domains)
    assert embedder_allowed(origin="https://a.example.org:8443", referer=None, domains=domains)
    assert not embedder_allowed(origin="https://a.example.org", referer=None, domains=domains)
