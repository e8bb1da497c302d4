"""A ``SKILL.md`` read by the open Agent Skills format's rules (docs/skills.md): YAML
front matter between two ``---`` lines, then the Markdown body.

- ``name``: 1 to 64 of lower-case letters, digits and single hyphens, not starting
  or ending with one;
- ``description``: what the skill does and when to use it, 1 to 1,024 characters;
- ``allowed-tools`` (optional): the tools the skill expects, a list or a string of
  names separated by spaces;
- other keys (``license``, ``metadata``, ``compatibility``...) are kept as given.

Untrusted text, so bounded before it is parsed: the whole file and the front
matter have size limits, and the front matter is read with YAML's safe loader
(plain data only: no tags that build objects), whose aliases are refused, so a
small front matter cannot expand into a large one.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
import yaml

from agentsvc_core.errors import InvalidInput

__all__ = ["MAX_FRONT_MATTER", "MAX_SKILL_MD", "SkillDocument", "parse_skill_md"]

MAX_SKILL_MD = 256 * 1024  # the whole SKILL.md, in characters
MAX_FRONT_MATTER = 16 * 1024
MAX_NAME, MAX_DESCRIPTION, MAX_TOOLS = 64, 1024, 100
NAME = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")
_FENCE = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", re.DOTALL)


class SkillDocument(msgspec.Struct, frozen=True, kw_only=True):
    name: str
    description: str
    allowed_tools: tuple[str, ...] = ()
    body: str = ""
    extra: dict[str, Any] = {}  # the front matter's other keys


_BOOL = "tag:yaml.org,2002:bool"


class _NoAliases(yaml.SafeLoader):
    """The safe loader without aliases: ``*a`` repeated cannot multiply the data.
    Booleans are YAML 1.2's, ``true`` and ``false`` only: a skill named ``off`` or
    ``yes`` keeps its name (YAML 1.1 reads those, and ``on``, ``no``, ``y``..., as
    booleans)."""

    yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag != _BOOL]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases are not allowed")
        return super().compose_node(parent, index)


_NoAliases.add_implicit_resolver(
    _BOOL, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)


def _tools(value: object) -> tuple[str, ...]:
    names = value.split() if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise InvalidInput("allowed-tools", "a list of tool names, or names separated by spaces")
    if len(names) > MAX_TOOLS:
        raise InvalidInput("allowed-tools", f"at most {MAX_TOOLS}")
    return tuple(names)


def parse_skill_md(text: str) -> SkillDocument:
    """The skill a ``SKILL.md`` describes; ``InvalidInput`` naming what is wrong."""
    if len(text) > MAX_SKILL_MD:
        raise InvalidInput("SKILL.md", f"at most {MAX_SKILL_MD} characters")
    text = text.removeprefix("\ufeff")  # a byte order mark some editors write
    match = _FENCE.match(text)
    if match is None:
        raise InvalidInput("SKILL.md", "it must begin with front matter between two --- lines")
    head = match.group(1)
    if len(head) > MAX_FRONT_MATTER:
        raise InvalidInput("SKILL.md", f"front matter of at most {MAX_FRONT_MATTER} characters")
    try:
        data = yaml.load(head, Loader=_NoAliases)  # noqa: S506 - the safe loader, no aliases
    except yaml.YAMLError as exc:
        raise InvalidInput("SKILL.md", f"the front matter is not valid YAML: {exc}") from None
    except RecursionError:  # nesting deeper than Python's stack
        raise InvalidInput("SKILL.md", "the front matter is nested too deeply") from None
    if not isinstance(data, dict):
        raise InvalidInput("SKILL.md", "the front matter must be a mapping of keys")
    name, description = data.pop("name", None), data.pop("description", None)
    if not isinstance(name, str) or len(name) > MAX_NAME or not NAME.fullmatch(name):
        raise InvalidInput(
            "name", "1 to 64 of a-z, 0-9 and single hyphens, not at the start or end"
        )
    if not isinstance(description, str) or not description.strip():
        raise InvalidInput("description", "required: what the skill does and when to use it")
    if len(description) > MAX_DESCRIPTION:
        raise InvalidInput("description", f"at most {MAX_DESCRIPTION} characters")
    tools = _tools(data.pop("allowed-tools")) if "allowed-tools" in data else ()
    return SkillDocument(
        name=name,
        description=description.strip(),
        allowed_tools=tools,
        body=text[match.end() :].strip("\n"),
        extra={str(k): v for k, v in data.items()},
    )
