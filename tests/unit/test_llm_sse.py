"""The provider adapters' SSE parser: examples from the WHATWG rules, and a property:
any chunking of a valid stream (cuts inside CRLF and inside UTF-8 sequences included)
yields the same events as feeding it whole."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_adapters.llm.sse import ProviderHttp, SSEParser

Events = list[tuple[str, bytes]]


def parse(*chunks: bytes) -> Events:
    parser = SSEParser()
    out: Events = []
    for chunk in chunks:
        out.extend(parser.feed(chunk))
    return out


@pytest.mark.parametrize(
    ("stream", "expected"),
    [
        (b"data: a\n\n", [("message", b"a")]),
        (b"event: ping\ndata: {}\n\n", [("ping", b"{}")]),
        (b"data: a\r\n\r\n", [("message", b"a")]),
        (b"data: a\r\rdata: b\r\r", [("message", b"a"), ("message", b"b")]),
        (b"data: one\ndata: two\n\n", [("message", b"one\ntwo")]),
        (b"data:no-space\n\n", [("message", b"no-space")]),
        (b"data:  two spaces\n\n", [("message", b" two spaces")]),
        (b": a comment\ndata: x\n: another\n\n", [("message", b"x")]),
        (b"data\n\n", [("message", b"")]),
        (b"data:\n\n", [("message", b"")]),
        (b"event: lonely\n\ndata: x\n\n", [("message", b"x")]),  # no data: no event
        (b"event:\ndata: x\n\n", [("message", b"x")]),  # empty name -> message
        (b"id: 7\nretry: 10\nfoo: bar\ndata: x\n\n", [("message", b"x")]),
        (b"data: [DONE]\n\n", [("message", b"[DONE]")]),
        (b"data: unterminated\n", []),
        (b"\n\n\ndata: x\n\n", [("message", b"x")]),
    ],
)
def test_examples(stream: bytes, expected: Events) -> None:
    assert parse(stream) == expected
    assert parse(*(stream[i : i + 1] for i in range(len(stream)))) == expected


def test_state_carries_across_feeds() -> None:
    parser = SSEParser()
    assert parser.feed(b"event: content_block_delta\nda") == []
    assert parser.feed(b'ta: {"a":') == []
    assert parser.feed(b" 1}\r") == []
    assert parser.feed(b"\n\r\n") == [("content_block_delta", b'{"a": 1}')]
    assert parser.feed(b"") == []


def test_a_line_that_never_ends_is_refused() -> None:
    parser = SSEParser()
    for _ in range(16):
        parser.feed(b"x" * 1024 * 1024)
    with pytest.raises(ValueError, match="size limit"):
        parser.feed(b"x")


# --- the property --------------------------------------------------------------------------

_line_text = st.text(
    alphabet=st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n"),
    max_size=12,
)
_name = st.one_of(st.none(), st.sampled_from(["message_start", "ping", "é", ""]), _line_text)
_event = st.tuples(
    _name,
    st.lists(_line_text, min_size=1, max_size=3),  # data lines
    st.lists(_line_text, max_size=2),  # comments
    st.booleans(),  # a space after the colon (a value starting with one must have it)
)


@st.composite
def streams(draw: st.DrawFn) -> tuple[bytes, Events]:
    eol = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    events = draw(st.lists(_event, max_size=6))
    lines: list[str] = []
    expected: Events = []
    for name, data, comments, space in events:
        lines.extend(f":{c}" for c in comments)
        if name is not None:
            lines.append(f"event: {name}")
        for value in data:
            sep = " " if space or value.startswith(" ") else ""
            lines.append(f"data:{sep}{value}")
        lines.append("")
        expected.append((name or "message", "\n".join(data).encode()))
    return "".join(line + eol for line in lines).encode(), expected


@given(streams(), st.data())
def test_any_chunking_yields_the_same_events(
    stream_expected: tuple[bytes, Events], data: st.DataObject
) -> None:
    stream, expected = stream_expected
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    chunks = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    assert parse(stream) == expected
    assert parse(*chunks) == expected
    for _, payload in parse(*chunks):
        payload.decode()  # whole UTF-8, however it was cut


def test_provider_proxies_come_from_the_environment_once_per_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", "http://user:pw@proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "local.example")
    http = ProviderHttp("beta")
    proxy, auth = http._proxy("https://api.example/v1/chat/completions")
    assert proxy == "http://proxy.internal:3128"  # credentials go in the auth, not the URL
    assert auth == {"Proxy-Authorization": "Basic dXNlcjpwdw=="}  # base64("user:pw")
    assert http._proxy("https://local.example/v1") == (None, None)
    assert http._proxy("http://plain.example/v1") == (None, None)  # no HTTP_PROXY set
    # looked up once: a later change of the environment is not re-read per request
    monkeypatch.delenv("HTTPS_PROXY")
    assert http._proxy("https://api.example/v1/chat/completions")[0] == proxy
