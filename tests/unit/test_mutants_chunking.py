"""Where chunking cuts, exactly (use_cases/knowledge/chunking.py): the window a long section
is cut in and its ends, which boundary wins, where the overlap starts, which small
sections merge and the heading path they keep, and the default sizes. Written for
``agentsvc_core.use_cases.knowledge.chunking``, whose survivors were boundaries the
property tests of test_chunking.py cannot tell apart. Sizes are in tokens of four
characters: ``target_tokens=10`` aims at 40 characters."""

from __future__ import annotations

import pytest

from agentsvc_core.ports.documents import ParsedDocument, Section
from agentsvc_core.use_cases.knowledge.chunking import chunk


def pieces(text: str, target: int, most: int, overlap: float = 0.0) -> list[str]:
    """The chunks' texts of ``text`` as one section."""
    doc = ParsedDocument(title=None, text=text, sections=(Section((), text, 0),))
    return [c.text for c in chunk(doc, target_tokens=target, max_tokens=most, overlap=overlap)]


def sections(*parts: tuple[tuple[str, ...], str], lead: str = "") -> ParsedDocument:
    """Sections laid end to end after ``lead``, one blank line between them."""
    text, found = lead, list[Section]()
    for headings, body in parts:
        if found:
            text += "\n\n"
        found.append(Section(headings, body, len(text)))
        text += body
    return ParsedDocument(title=None, text=text, sections=tuple(found))


# --- the window a long section is cut in: [half the target, the maximum] -------------


def test_a_paragraph_break_starting_at_the_maximum_wins_over_a_sentence_end() -> None:
    first = "Alpha beta gamma delta epsilon. Zeta eta"  # 40 characters, a sentence at 31
    assert len(first) == 40
    text = first + "\n\nTheta iota kappa lambda"
    assert pieces(text, 10, 10) == [first, "Theta iota kappa lambda"]
    # a break of blank line with spaces in it, starting at the maximum, too
    text = first + "\n  \nTheta iota kappa lambda"
    assert pieces(text, 10, 10) == [first, "Theta iota kappa lambda"]


def test_a_boundary_at_half_the_target_is_in_the_window() -> None:
    text = "a" * 16 + " " + "b" * 30  # the only space at 16: half of 32
    assert pieces(text, 8, 10) == ["a" * 16, "b" * 30]


def test_spaces_reaching_into_the_window_are_a_boundary() -> None:
    text = "a" * 15 + "  " + "b" * 30  # spaces at 15 and 16: the window starts at 16
    assert pieces(text, 8, 10) == ["a" * 15, "b" * 30]


def test_below_half_the_target_a_word_is_cut_inside_rather_than_a_short_chunk_made() -> None:
    text = "a" * 20 + " " + "b" * 40  # a space at 20, below half of 48
    assert pieces(text, 12, 12) == ["a" * 20 + " " + "b" * 27, "b" * 13]


def test_a_sentence_end_at_the_maximum_is_in_the_window() -> None:
    # target = maximum = 40: sentence ends at 25 and at 40; the one at 40 is nearest
    text = "x" * 24 + ". " + "y" * 13 + ". " + "z" * 10
    assert text.index(".", 30) == 39
    assert pieces(text, 10, 10) == ["x" * 24 + ". " + "y" * 13 + ".", "z" * 10]


def test_of_two_boundaries_as_near_the_target_the_first_wins() -> None:
    text = "a" * 30 + " " + "bbb" + " " + "c" * 20  # spaces at 30 and 34, the aim 32
    assert pieces(text, 8, 12) == ["a" * 30, "bbb " + "c" * 20]


def test_a_space_is_a_boundary_where_it_starts() -> None:
    text = "a" * 30 + " bb " + "c" * 20  # spaces at 30 and 33: 33 is nearer 32
    assert pieces(text, 8, 12) == ["a" * 30 + " bb", "c" * 20]


def test_a_paragraph_break_is_a_boundary_where_it_starts() -> None:
    text = "a" * 29 + "\n\nbbb\n\n" + "c" * 20  # breaks at 29 and 34: 34 is nearer 32
    assert pieces(text, 8, 12) == ["a" * 29 + "\n\nbbb", "c" * 20]


def test_a_rest_exactly_the_maximum_long_is_one_chunk() -> None:
    text = "a" * 39 + " " + "b" * 40
    assert pieces(text, 10, 10) == ["a" * 39, "b" * 40]


# --- where the overlap starts ---------------------------------------------------


WORDS = "one two three four five six seven eight nine ten eleven twelve thirteen"


def test_consecutive_chunks_overlap_from_the_first_word_in_the_share_asked() -> None:
    assert pieces(WORDS, 5, 5, overlap=0.5) == [
        "one two three four",
        "four five six seven",
        "six seven eight nine",
        "nine ten eleven",
        "eleven twelve",
        "twelve thirteen",
    ]
    assert pieces(WORDS, 4, 5, overlap=0.5) == [
        "one two three four",
        "four five six",
        "six seven eight",
        "eight nine ten",
        "ten eleven twelve",
        "twelve thirteen",
    ]


def test_an_overlap_never_reaches_back_beyond_the_middle_of_the_chunk_before() -> None:
    assert pieces(WORDS, 5, 5, overlap=0.9) == [
        "one two three four",
        "four five six seven",
        "six seven eight nine",
        "nine ten eleven",
        "eleven twelve",
        "twelve thirteen",
    ]


def test_no_word_starting_in_the_overlap_means_no_overlap_not_a_fragment() -> None:
    assert pieces(WORDS, 5, 5, overlap=0.25) == [
        "one two three four",
        "four five six seven",
        "seven eight nine ten",
        "ten eleven twelve",
        "thirteen",  # "twelve" starts before the last five characters: not "welve"
    ]
    assert pieces("a" * 50, 5, 5, overlap=0.5) == ["a" * 20, "a" * 20, "a" * 10]


# --- small sections and their heading path -------------------------------------------


def test_merged_sections_keep_the_heading_path_they_all_share() -> None:
    siblings = sections((("A", "x"), "first part"), (("A", "y"), "second part"))
    assert [c.headings for c in chunk(siblings)] == [("A",)]
    tops = sections((("A",), "first part"), (("B",), "second part"))
    assert [c.headings for c in chunk(tops)] == [()]
    nested = sections((("G", "A"), "first part"), (("G", "A", "A1"), "second part"))
    assert [c.headings for c in chunk(nested)] == [("G", "A")]


def test_small_sections_merge_up_to_exactly_the_target() -> None:
    # two sections of 18 and 20 characters, 2 apart: 40 from the first's start
    doc = sections(((), "a" * 18), ((), "b" * 20), lead="\n" * 10)
    assert [c.text for c in chunk(doc, target_tokens=10, max_tokens=20)] == [
        "a" * 18 + "\n\n" + "b" * 20
    ]
    assert len(chunk(doc, target_tokens=9, max_tokens=20)) == 2


def test_a_blank_section_is_skipped_and_the_next_is_chunked() -> None:
    doc = ParsedDocument(
        title=None,
        text=" \n " + "words here",
        sections=(Section(("Blank",), " \n ", 0), Section(("Full",), "words here", 3)),
    )
    assert [(c.text, c.headings) for c in chunk(doc)] == [("words here", ("Full",))]


# --- sizes --------------------------------------------------------------------------


def test_the_defaults_aim_at_600_tokens_and_cut_beyond_800() -> None:
    two = sections(((), "a" * 1200), ((), "b" * 1199))  # 2401 characters: over 2400
    assert len(chunk(two)) == 2
    assert len(chunk(sections(((), "a" * 1199), ((), "b" * 1199)))) == 1
    long = "w " * 1600 + "w"  # 3201 characters: over 3200
    assert len(chunk(sections(((), long)))) == 2
    assert len(chunk(sections(((), long[:-2])))) == 1


def test_the_smallest_sizes_are_one_token() -> None:
    assert pieces("ab cd ef", 1, 1) == ["ab", "cd", "ef"]


@pytest.mark.parametrize(("target", "most", "overlap"), [(0, 1, 0.0), (2, 1, 0.0), (1, 1, 1.0)])
def test_impossible_sizes_are_refused_saying_what_holds(
    target: int, most: int, overlap: float
) -> None:
    doc = ParsedDocument(title=None, text="x", sections=(Section((), "x", 0),))
    with pytest.raises(
        ValueError,
        match=r"^chunk: need 0 < target_tokens <= max_tokens and 0 <= overlap < 1$",
    ):
        chunk(doc, target_tokens=target, max_tokens=most, overlap=overlap)
