"""The channels' Markdown reader and splitter (agentsvc_adapters/channels/markdown.py),
shown through a bracket dialect whose output reads as the runs it was given."""

from __future__ import annotations

import pytest

from agentsvc_adapters.channels.markdown import Dialect, Mark, Run, pack, parse

B, IT, S, C, Q = ("b", ""), ("i", ""), ("s", ""), ("code", ""), ("q", "")


def _open(mark: Mark) -> str:
    return f"[{mark[0]}{'=' + mark[1] if mark[1] else ''}]"


def _close(mark: Mark) -> str:
    return f"[/{mark[0]}]"


def _escape(char: str, marks: tuple[Mark, ...]) -> str:
    return "&&" if char == "&" else char


def brackets(limit: int = 10_000) -> Dialect:
    return Dialect(limit=limit, open=_open, close=_close, escape=_escape)


@pytest.mark.parametrize(
    ("markdown", "runs"),
    [
        ("plain words", [Run("plain words")]),
        ("**b** and __b__", [Run("b", (B,)), Run(" and "), Run("b", (B,))]),
        ("*i* _i_ ~~s~~", [Run("i", (IT,)), Run(" "), Run("i", (IT,)), Run(" "), Run("s", (S,))]),
        ("**bold *both***", [Run("bold ", (B,)), Run("both", (B, IT))]),
        ("snake_case_name and _x_", [Run("snake_case_name and "), Run("x", (IT,))]),
        ("a_b_ c", [Run("a_b_ c")]),
        ("_a_b", [Run("_a_b")]),
        ("x * not a start*", [Run("x * not a start*")]),
        ("*not an end *", [Run("*not an end *")]),
        ("2 * 3 * 4", [Run("2 * 3 * 4")]),
        ("**", [Run("**")]),
        ("*", [Run("*")]),
        ("a*", [Run("a*")]),
        ("\\*not\\* \\_this\\_", [Run("*not* _this_")]),
        ("a \\ b \\q", [Run("a \\ b \\q")]),
        ("`co*de*` ``a`b``", [Run("co*de*", (C,)), Run(" "), Run("a`b", (C,))]),
        ("`open", [Run("`open")]),
        ("**`x`**", [Run("x", (B, C))]),
        ("[tea](https://t.example/a) x", [Run("tea", (("a", "https://t.example/a"),)), Run(" x")]),
        ("[**tea**](<https://t.example>)", [Run("tea", (("a", "https://t.example"), B))]),
        ("[`x`](https://t.example)", [Run("x", (("a", "https://t.example"),))]),
        ("[x](ftp://t.example)", [Run("x (ftp://t.example)")]),
        ("[x](tel:1)", [Run("x (tel:1)")]),
        ("<mailto:a@b.example>", [Run("mailto:a@b.example", (("a", "mailto:a@b.example"),))]),
        ("<notalink>", [Run("<notalink>")]),
        (
            "[a [b](https://x.example)](https://y.example)",
            [Run("a [b", (("a", "https://x.example"),)), Run("](https://y.example)")],
        ),
        ("~~*x*~~", [Run("x", (S, IT))]),
        ("**a **b", [Run("**a **b")]),
    ],
)
def test_inline_marks(markdown: str, runs: list[Run]) -> None:
    assert parse(markdown) == runs


def test_a_link_too_long_stays_text() -> None:
    url = "https://t.example/" + "a" * 2100
    assert parse(f"[x]({url})") == [Run(f"x ({url})")]
    fits = "https://t.example/" + "a" * 2030
    assert parse(f"[x]({fits})") == [Run("x", (("a", fits),))]


def test_a_link_inside_a_link_label_stays_text() -> None:
    runs = parse("[see <https://in.example>](https://out.example)")
    assert runs == [
        Run("see ", (("a", "https://out.example"),)),
        Run("https://in.example", (("a", "https://out.example"),)),
    ]


@pytest.mark.parametrize(
    ("markdown", "runs"),
    [
        ("# Title ##", [Run("Title", (B,))]),
        ("### *Sub*", [Run("Sub", (B, IT))]),
        ("#hashtag", [Run("#hashtag")]),
        (
            "- one\n* two\n+ three",
            [
                Run("• "),
                Run("one"),
                Run("\n"),
                Run("• "),
                Run("two"),
                Run("\n"),
                Run("• "),
                Run("three"),
            ],
        ),
        ("1. one\n2) two", [Run("1. "), Run("one"), Run("\n"), Run("2) "), Run("two")]),
        ("- a\n    - b", [Run("• "), Run("a"), Run("\n"), Run("    • "), Run("b")]),
        ("-not a list", [Run("-not a list")]),
        ("a\n---\nb", [Run("a"), Run("\n"), Run("———"), Run("\n"), Run("b")]),
        ("* * *", [Run("———")]),
        ("> a\n> **b**", [Run("a", (Q,)), Run("\n", (Q,)), Run("b", (Q, B))]),
        (">", [Run(" ", (Q,))]),
        ("> a\n\n> b", [Run("a", (Q,)), Run("\n\n"), Run("b", (Q,))]),
        ("> a\nb", [Run("a", (Q,)), Run("\n"), Run("b")]),
        ("a\n> b", [Run("a"), Run("\n"), Run("b", (Q,))]),
        ("  indented  ", [Run("indented")]),
        ("a\r\nb\rc", [Run("a"), Run("\n"), Run("b"), Run("\n"), Run("c")]),
        ("\n\n a \n\n\n b \n\n", [Run("a"), Run("\n\n"), Run("b")]),
        ("", []),
    ],
)
def test_blocks(markdown: str, runs: list[Run]) -> None:
    assert parse(markdown) == runs


@pytest.mark.parametrize(
    ("markdown", "runs"),
    [
        ("```py\nx = 1\n  y\n```", [Run("x = 1\n  y", (("pre", "py"),))]),
        ("~~~\n*x*\n~~~\nafter", [Run("*x*", (("pre", ""),)), Run("\n"), Run("after")]),
        ("````\n```\n````", [Run("```", (("pre", ""),))]),
        ("```\nunclosed\nstill", [Run("unclosed\nstill", (("pre", ""),))]),
        ("```\n\n```\nx", [Run("x")]),
        ("a\n```c++\nint\n```", [Run("a"), Run("\n"), Run("int", (("pre", "c++"),))]),
    ],
)
def test_code_blocks(markdown: str, runs: list[Run]) -> None:
    assert parse(markdown) == runs


def test_pack_writes_marks_in_the_dialect() -> None:
    runs = [
        Run("a"),
        Run("b", (B,)),
        Run("c", (B, IT)),
        Run("d", (B,)),
        Run("e & f", (("a", "u"),)),
    ]
    assert pack(runs, brackets()) == ("a[b]b[i]c[/i]d[/b][a=u]e && f[/a]",)


def test_pack_cuts_at_the_last_paragraph_break_in_the_second_half() -> None:
    text = "aaaa bbbb\n\ncccc dddd eeee"
    assert pack([Run(text)], brackets(16)) == ("aaaa bbbb", "cccc dddd eeee")
    # one early in the part loses to a space late in it
    assert pack([Run(text)], brackets(22)) == ("aaaa bbbb\n\ncccc dddd", "eeee")
    # a line break or a space late in the part beats a paragraph break early in it
    text = "aa\n\nbbbb cccc\ndddd eeee"
    assert pack([Run(text)], brackets(18)) == ("aa\n\nbbbb cccc", "dddd eeee")
    assert pack([Run("aa\n\nbbbb cccc dddd")], brackets(16)) == ("aa\n\nbbbb cccc", "dddd")


def test_pack_cuts_mid_word_only_a_word_longer_than_a_part() -> None:
    assert pack([Run("ab " + "x" * 12)], brackets(5)) == ("ab", "xxxxx", "xxxxx", "xx")
    assert pack([Run("ab"), Run("cdefgh", (B,))], brackets(8)) == (
        "ab",
        "[b]c[/b]",
        "[b]d[/b]",
        "[b]e[/b]",
        "[b]f[/b]",
        "[b]g[/b]",
        "[b]h[/b]",
    )


def test_pack_reopens_marks_across_parts_and_measures_the_tags() -> None:
    runs = [Run("one two three", (B, IT))]
    parts = pack(runs, brackets(20))
    assert parts == ("[b][i]one[/i][/b]", "[b][i]two[/i][/b]", "[b][i]three[/i][/b]")
    assert all(len(p) <= 20 for p in parts)
    assert pack(runs, brackets(21)) == ("[b][i]one two[/i][/b]", "[b][i]three[/i][/b]")
    assert pack(runs, brackets(27)) == ("[b][i]one two three[/i][/b]",)


def test_pack_counts_escapes_and_never_cuts_one() -> None:
    assert pack([Run("&&&")], brackets(4)) == ("&&&&", "&&")
    assert pack([Run("a&b")], brackets(3)) == ("a&&", "b")


def test_marks_that_fill_a_part_alone_are_dropped() -> None:
    runs = [Run("text", (("a", "a-very-long-url"),))]
    assert pack(runs, brackets(10)) == ("text",)


def test_parts_never_start_with_blanks_and_blank_parts_are_dropped() -> None:
    runs = [Run("aaaa"), Run("\n\n"), Run("  \n", (B,)), Run("   bbbb")]
    assert pack(runs, brackets(6)) == ("aaaa", "bbbb")
    assert pack([Run("   ")], brackets()) == ()
    code = (("pre", ""),)
    assert pack([Run("x\n  code", code)], brackets(17)) == ("[pre]x[/pre]", "[pre]  code[/pre]")
    assert pack([Run("x y\n  code z", code)], brackets(21)) == (
        "[pre]x y[/pre]",
        "[pre]  code z[/pre]",
    )
    assert pack([Run("a"), Run("\n\n  code", code)], brackets(17)) == ("a", "[pre]  code[/pre]")
    assert pack([Run("a \n"), Run(" ", code)], brackets()) == ("a",)
    assert pack([Run("a"), Run(" x ", code)], brackets()) == ("a[pre] x [/pre]",)


def test_a_part_keeps_a_mark_open_across_runs() -> None:
    runs = [Run("a", (Q,)), Run("\n", (Q,)), Run("b", (Q, B))]
    assert pack(runs, brackets()) == ("[q]a\n[b]b[/b][/q]",)


def test_edges_of_emphasis_and_of_the_mark_stack() -> None:
    assert parse("_it_ works") == [Run("it", (IT,)), Run(" works")]
    assert parse("_a_b c_") == [Run("a_b c", (IT,))]
    runs = [Run("a", (B, IT)), Run("b", (B, IT, S)), Run("c", (B, IT))]
    assert pack(runs, brackets()) == ("[b][i]a[s]b[/s]c[/i][/b]",)


def test_a_cut_at_half_the_room_is_late_enough() -> None:
    assert pack([Run("aaaa\nbb cc")], brackets(8)) == ("aaaa", "bb cc")
    assert pack([Run("aaaa\nbb ccc")], brackets(9)) == ("aaaa", "bb ccc")


def test_a_code_block_s_part_keeps_its_first_characters() -> None:
    code = (("pre", ""),)
    assert pack([Run("ab\n\nXcd", code)], brackets(13)) == (
        "[pre]ab[/pre]",
        "[pre]Xc[/pre]",
        "[pre]d[/pre]",
    )


def test_runs_that_fit_exactly_share_a_part() -> None:
    assert pack([Run("abc"), Run("d", (B,))], brackets(11)) == ("abc[b]d[/b]",)
    assert pack([Run("abc"), Run("d", (B,))], brackets(10)) == ("abc", "[b]d[/b]")
