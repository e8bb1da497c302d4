"""A SKILL.md read by the Agent Skills format's rules (docs/skills.md): the name's
and description's bounds on both sides, allowed-tools as a list or a string, the
body as written, other keys kept, and untrusted text bounded: the file's and the
front matter's sizes, no YAML tags that build objects, no aliases, no nesting
deeper than the stack."""

from __future__ import annotations

import pytest

from agentsvc_core.errors import InvalidInput
from agentsvc_core.use_cases.skills.format import (
    MAX_FRONT_MATTER,
    MAX_SKILL_MD,
    SkillDocument,
    parse_skill_md,
)


def md(front: str, body: str = "# Steps\n\n1. Do it.\n") -> str:
    return f"---\n{front}\n---\n{body}"


def refused(text: str) -> InvalidInput:
    with pytest.raises(InvalidInput) as err:
        parse_skill_md(text)
    return err.value


def test_a_skill_is_read_whole() -> None:
    doc = parse_skill_md(
        md(
            "name: pdf-forms\ndescription: >\n  Fill PDF forms. Use when a form is given.\n"
            "allowed-tools: [Read, Write]\nlicense: MIT\nmetadata:\n  version: '2'"
        )
    )
    assert doc == SkillDocument(
        name="pdf-forms",
        description="Fill PDF forms. Use when a form is given.",
        allowed_tools=("Read", "Write"),
        body="# Steps\n\n1. Do it.",
        extra={"license": "MIT", "metadata": {"version": "2"}},
    )


def test_allowed_tools_may_be_a_string_of_names_and_may_be_left_out() -> None:
    doc = parse_skill_md(md("name: a\ndescription: d\nallowed-tools: Read  Bash(git:*)"))
    assert doc.allowed_tools == ("Read", "Bash(git:*)")
    assert parse_skill_md(md("name: a\ndescription: d")).allowed_tools == ()
    for bad in ("allowed-tools: 7", "allowed-tools: [Read, 3]", "allowed-tools: ['']"):
        assert refused(md(f"name: a\ndescription: d\n{bad}")).field == "allowed-tools"
    many = "allowed-tools: [" + ", ".join(f"t{i}" for i in range(101)) + "]"
    assert refused(md(f"name: a\ndescription: d\n{many}")).problem == "at most 100"
    hundred = "allowed-tools: [" + ", ".join(f"t{i}" for i in range(100)) + "]"
    assert len(parse_skill_md(md(f"name: a\ndescription: d\n{hundred}")).allowed_tools) == 100


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("a", True),
        ("a" * 64, True),
        ("a" * 65, False),
        ("pdf-2-forms", True),
        ("Pdf", False),
        ("-pdf", False),
        ("pdf-", False),
        ("pdf--forms", False),
        ("pdf_forms", False),
        ("''", False),
        ("7", False),  # a number, to YAML
        ("[a]", False),
    ],
)
def test_the_name_rule(name: str, ok: bool) -> None:
    text = md(f"name: {name}\ndescription: d")
    if ok:
        assert parse_skill_md(text).name == str(name)
    else:
        assert refused(text).field == "name"


def test_the_description_rule() -> None:
    assert refused(md("name: a")).field == "description"
    assert refused(md("name: a\ndescription: '   '")).field == "description"
    assert refused(md("name: a\ndescription: [x]")).field == "description"
    longest = "d" * 1024
    assert parse_skill_md(md(f"name: a\ndescription: {longest}")).description == longest
    err = refused(md(f"name: a\ndescription: {longest}d"))
    assert (err.field, err.problem) == ("description", "at most 1024 characters")


def test_the_front_matter_must_be_there_and_be_a_mapping() -> None:
    for text in ("# no front matter", "---\nname: a\n", "\n---\nname: a\n---\n", "--- \n"):
        assert refused(text).field == "SKILL.md"
    assert "mapping" in refused("---\n- a\n- b\n---\nbody").problem
    assert "not valid YAML" in refused("---\nname: [a\n---\nbody").problem
    # a byte order mark, CRLF lines and a body-less file are fine
    doc = parse_skill_md("\ufeff---\r\nname: a\r\ndescription: d\r\n---\r\n")
    assert (doc.name, doc.body) == ("a", "")


def test_untrusted_text_is_bounded() -> None:
    assert "at most" in refused("x" * (MAX_SKILL_MD + 1)).problem
    big_front = "name: a\ndescription: d\nnote: " + "n" * MAX_FRONT_MATTER
    assert "front matter of at most" in refused(md(big_front)).problem
    # aliases would let a small front matter stand for a huge one
    laughs = "name: a\ndescription: d\nx: &x [1, 2]\ny: [*x, *x, *x]"
    assert "aliases are not allowed" in refused(md(laughs)).problem
    # tags that build Python objects are not the safe loader's
    tagged = "name: a\ndescription: d\nx: !!python/object/apply:os.system ['true']"
    assert "not valid YAML" in refused(md(tagged)).problem
    deep = "name: a\ndescription: d\nx: " + "[" * 5000 + "]" * 5000
    assert refused(md(deep)).field == "SKILL.md"


@pytest.mark.parametrize(
    ("text", "detail"),
    [
        ("x" * (MAX_SKILL_MD + 1), f"SKILL.md: at most {MAX_SKILL_MD} characters"),
        ("# none", "SKILL.md: it must begin with front matter between two --- lines"),
        (
            md("name: a\ndescription: d\nn: " + "n" * MAX_FRONT_MATTER),
            f"SKILL.md: front matter of at most {MAX_FRONT_MATTER} characters",
        ),
        ("---\n- a\n---\n", "SKILL.md: the front matter must be a mapping of keys"),
        (
            md("name: a\ndescription: d\nx: " + "[" * 5000 + "]" * 5000),
            "SKILL.md: the front matter is nested too deeply",
        ),
        (
            md("description: d"),
            "name: 1 to 64 of a-z, 0-9 and single hyphens, not at the start or end",
        ),
        (md("name: a"), "description: required: what the skill does and when to use it"),
        (
            md("name: a\ndescription: d\nallowed-tools: 7"),
            "allowed-tools: a list of tool names, or names separated by spaces",
        ),
    ],
)
def test_each_refusal_says_what_is_wrong(text: str, detail: str) -> None:
    assert refused(text).detail == detail


def test_yaml_errors_and_aliases_name_the_file() -> None:
    err = refused(md("name: [a"))
    assert err.detail.startswith("SKILL.md: the front matter is not valid YAML: ")
    aliases = refused(md("name: a\ndescription: d\nx: &x 1\ny: *x"))
    assert aliases.detail == "SKILL.md: the front matter is not valid YAML: aliases are not allowed"
    many = "allowed-tools: [" + ", ".join(f"t{i}" for i in range(101)) + "]"
    assert refused(md(f"name: a\ndescription: d\n{many}")).detail == "allowed-tools: at most 100"


def test_the_bounds_are_inclusive() -> None:
    front = "name: a\ndescription: d\nn: "
    fill = MAX_FRONT_MATTER - len(front)
    doc = parse_skill_md(md(front + "n" * fill))
    assert len(doc.extra["n"]) == fill
    head = md("name: a\ndescription: d")
    whole = head + "b" * (MAX_SKILL_MD - len(head))
    assert len(whole) == MAX_SKILL_MD
    assert parse_skill_md(whole).body.endswith("b")


def test_the_body_keeps_its_own_spaces_and_letters() -> None:
    doc = parse_skill_md(md("name: a\ndescription: d", "\n  X marks the spot  \nX\n\n"))
    assert doc.body == "  X marks the spot  \nX"


def test_names_and_words_yaml_1_1_took_for_booleans_stay_text() -> None:
    doc = parse_skill_md(
        "---\nname: off\ndescription: yes\nlicense: no\nflag: true\nother: False\n---\nbody"
    )
    assert (doc.name, doc.description) == ("off", "yes")
    assert doc.extra == {"license": "no", "flag": True, "other": False}
    for word in ("on", "y", "n", "no", "yes"):
        assert parse_skill_md(f"---\nname: {word}\ndescription: d\n---\n").name == word
