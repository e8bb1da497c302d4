"""Chunking a parsed document for search (agentsvc_core/use_cases/knowledge/chunking.py)."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentsvc_core.ports.documents import ParsedDocument, Section
from agentsvc_core.use_cases.knowledge.chunking import Chunk, chunk, estimate_tokens, search_text

_WORD = st.text(alphabet="abcdefghij", min_size=1, max_size=12)
_SEP = st.sampled_from([" ", " ", " ", "\n", "\n\n", ". ", "! ", "\n \n", "\t"])


@st.composite
def _prose(draw: st.DrawFn, max_words: int = 120) -> str:
    words = draw(st.lists(_WORD, min_size=1, max_size=max_words))
    seps = draw(st.lists(_SEP, min_size=len(words), max_size=len(words)))
    return "".join(w + s for w, s in zip(words, seps, strict=True))


@st.composite
def _documents(draw: st.DrawFn) -> ParsedDocument:
    """Sections (some separated by blank text, some PDF-like with pages) laid end to
    end into one text, with heading paths of random depth."""
    parts: list[str] = []
    sections: list[Section] = []
    offset = 0
    paged = draw(st.booleans())
    for number in range(draw(st.integers(1, 6))):
        gap = draw(st.sampled_from(["", "\n", "\n\n", "  \n"]))
        parts.append(gap)
        offset += len(gap)
        body = draw(_prose())
        if draw(st.integers(0, 4)) == 0:  # now and then one enormous word
            body += "x" * draw(st.integers(1, 300))
        headings = tuple(draw(st.lists(_WORD, max_size=3)))
        sections.append(
            Section(headings=headings, text=body, start=offset, page=number + 1 if paged else None)
        )
        parts.append(body)
        offset += len(body)
    return ParsedDocument(title=None, text="".join(parts), sections=tuple(sections))


_SIZES = st.tuples(st.integers(2, 40), st.integers(0, 40), st.sampled_from([0.0, 0.15, 0.5]))


def _owner(doc: ParsedDocument, at: int) -> Section:
    return next(s for s in doc.sections if s.start <= at < s.start + len(s.text))


@given(_documents(), _SIZES)
def test_chunks_are_slices_cover_every_section_and_respect_the_limits(
    doc: ParsedDocument, sizes: tuple[int, int, float]
) -> None:
    target, extra, overlap = sizes
    most = target + extra
    chunks = chunk(doc, target_tokens=target, max_tokens=most, overlap=overlap)

    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    covered: set[int] = set()
    for c in chunks:
        assert c.text == doc.text[c.start : c.end]
        assert c.text == c.text.strip()
        assert c.text
        assert c.tokens == estimate_tokens(c.text) <= most  # a long word is cut, never kept
        covered.update(range(c.start, c.end))
        # a chunk holds whole sections or part of one, never part of two
        first, last = _owner(doc, c.start), _owner(doc, c.end - 1)
        if first is not last:
            assert c.start == first.start + len(first.text) - len(first.text.lstrip())
            assert c.end == last.start + len(last.text.rstrip())
            assert first.page == last.page
        # its headings: the section's path, or the path its merged sections share
        assert first.headings[: len(c.headings)] == c.headings
        assert last.headings[: len(c.headings)] == c.headings
        if first is last:
            assert c.headings == first.headings
        assert c.page == first.page
    for section in doc.sections:
        for i, char in enumerate(section.text):
            if not char.isspace():
                assert section.start + i in covered
    assert [c.start for c in chunks] == sorted(c.start for c in chunks)


@given(_prose(max_words=400))
def test_consecutive_chunks_of_a_long_section_overlap_by_about_the_share_asked(
    text: str,
) -> None:
    text = text.strip() or "x"
    doc = ParsedDocument(title=None, text=text, sections=(Section((), text, 0),))
    chunks = chunk(doc, target_tokens=30, max_tokens=40, overlap=0.15)
    for a, b in itertools.pairwise(chunks):
        assert a.start < b.start  # progress
        shared = max(0, a.end - b.start)
        # 15% of a 120-character target is 18 characters, started at the next word
        # (a word here is at most 12 characters) and never beyond half the chunk
        assert shared <= 18 + 1
        assert shared == 0 or not text[b.start - 1].isalnum()  # starts at a word


def test_a_long_section_splits_at_paragraphs_before_sentences_before_words() -> None:
    para = "Alpha beta gamma delta. " * 10  # 240 characters, 60 tokens
    text = (para.strip() + "\n\n") * 4
    doc = ParsedDocument(title=None, text=text, sections=(Section(("Doc",), text.strip(), 0),))
    chunks = chunk(doc, target_tokens=60, max_tokens=80, overlap=0.0)
    assert [c.text for c in chunks] == [para.strip()] * 4
    assert all(c.headings == ("Doc",) for c in chunks)

    sentences = "One two three four five six seven. " * 20
    doc = ParsedDocument(title=None, text=sentences, sections=(Section((), sentences.strip(), 0),))
    chunks = chunk(doc, target_tokens=30, max_tokens=40, overlap=0.0)
    assert len(chunks) > 1
    assert all(c.text.endswith(".") for c in chunks)


def test_a_word_longer_than_a_chunk_is_cut_inside() -> None:
    blob = "A" * 100
    doc = ParsedDocument(title=None, text=blob, sections=(Section((), blob, 0),))
    chunks = chunk(doc, target_tokens=5, max_tokens=10, overlap=0.0)
    assert [(c.start, c.end) for c in chunks] == [(0, 40), (40, 80), (80, 100)]
    assert [c.tokens for c in chunks] == [10, 10, 5]


def test_small_sibling_sections_merge_under_target_and_keep_their_shared_path() -> None:
    text = "# Guide\nIntro.\n\n## A\nText a.\n\n### A.1\nText a1.\n\n## B\nText b.\n"
    cut = [text.index(h) for h in ("# Guide", "## A", "### A.1", "## B")] + [len(text)]
    paths = [("Guide",), ("Guide", "A"), ("Guide", "A", "A.1"), ("Guide", "B")]
    sections = tuple(
        Section(path, text[a:b].strip(), a) for path, a, b in zip(paths, cut, cut[1:], strict=False)
    )
    doc = ParsedDocument(title="Guide", text=text, sections=sections)

    merged = chunk(doc)
    assert len(merged) == 1  # every section sits under "# Guide"'s parent (the root)
    assert merged[0].headings == ("Guide",)  # the path they all share
    assert merged[0].text == text.strip()

    # from "### A.1" on, "## B" is not under A.1's parent (Guide / A): a new chunk
    tail = ParsedDocument(title=None, text=text, sections=sections[2:])
    assert [c.headings for c in chunk(tail)] == [("Guide", "A", "A.1"), ("Guide", "B")]


def test_sections_over_target_are_not_merged_and_pages_never_are() -> None:
    page_one, page_two = "First page text.", "Second page text."
    text = page_one + "\n\n" + page_two
    doc = ParsedDocument(
        title=None,
        text=text,
        sections=(Section((), page_one, 0, 1), Section((), page_two, len(page_one) + 2, 2)),
    )
    assert [(c.text, c.page) for c in chunk(doc)] == [(page_one, 1), (page_two, 2)]

    a, b = "a " * 30, "b " * 30
    text = a + b
    doc = ParsedDocument(
        title=None, text=text, sections=(Section(("A",), a.strip(), 0), Section(("B",), b, 60))
    )
    assert [c.headings for c in chunk(doc, target_tokens=20, max_tokens=20)] == [("A",), ("B",)]


def test_blank_sections_give_no_chunk() -> None:
    doc = ParsedDocument(title=None, text=" \n ", sections=(Section(("H",), " \n ", 0),))
    assert chunk(doc) == []


@pytest.mark.parametrize(
    ("target", "most", "overlap"), [(0, 10, 0.1), (11, 10, 0.1), (5, 10, 1.0), (5, 10, -0.1)]
)
def test_impossible_sizes_are_refused(target: int, most: int, overlap: float) -> None:
    doc = ParsedDocument(title=None, text="x", sections=(Section((), "x", 0),))
    with pytest.raises(ValueError, match="target_tokens"):
        chunk(doc, target_tokens=target, max_tokens=most, overlap=overlap)


def test_search_text_puts_the_heading_path_before_the_text() -> None:
    c = Chunk(ordinal=0, text="body", start=0, end=4, headings=("A", "B"), page=None, tokens=1)
    assert search_text(c) == "A / B\n\nbody"
    bare = Chunk(ordinal=0, text="body", start=0, end=4, headings=(), page=None, tokens=1)
    assert search_text(bare) == "body"
    empty = Chunk(ordinal=0, text="body", start=0, end=4, headings=("", "B"), page=None, tokens=1)
    assert search_text(empty) == "B\n\nbody"


def test_a_section_that_is_not_its_slice_is_refused() -> None:
    with pytest.raises(ValueError, match="slice"):
        ParsedDocument(title=None, text="abc", sections=(Section((), "bc", 0),))
    with pytest.raises(ValueError, match="slice"):
        ParsedDocument(
            title=None, text="abc", sections=(Section((), "bc", 1), Section((), "ab", 0))
        )


def test_a_long_section_is_cut_near_the_target_not_at_the_maximum() -> None:
    para = ("word " * 8).strip()  # 39 characters
    text = "\n\n".join([para] * 30)
    doc = ParsedDocument(title=None, text=text, sections=(Section((), text, 0),))
    chunks = chunk(doc, target_tokens=30, max_tokens=80, overlap=0.0)
    # paragraph ends fall at 39, 80, 121...: 121 is nearest the 120-character target;
    # a rest that fits within the maximum (6 paragraphs, 244 characters) is one chunk
    assert [c.text.count("\n\n") for c in chunks] == [2] * 8 + [5]


def test_small_sections_merge_only_while_under_the_target() -> None:
    a, b = "a " * 29 + "a", "b " * 29 + "b"  # 59 characters, 15 tokens each
    text = a + "\n" + b
    doc = ParsedDocument(
        title=None, text=text, sections=(Section(("A",), a, 0), Section(("B",), b, 60))
    )
    assert len(chunk(doc, target_tokens=30, max_tokens=40)) == 1  # 119 characters <= 120
    assert len(chunk(doc, target_tokens=29, max_tokens=40)) == 2  # > 116: not merged


def test_a_paragraph_break_wins_over_a_sentence_end_nearer_the_target() -> None:
    first = "Short opening paragraph. " * 3 + "It ends here."  # 88 characters
    second = "Then a sentence. " * 20
    text = first + "\n\n" + second.strip()
    doc = ParsedDocument(title=None, text=text, sections=(Section((), text, 0),))
    chunks = chunk(doc, target_tokens=30, max_tokens=40, overlap=0.0)
    assert chunks[0].text == first  # not "...It ends here.\n\nThen a sentence." (121)
