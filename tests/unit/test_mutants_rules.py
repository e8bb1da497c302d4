"""The rules' bounds and checks, pinned exactly: each limit passes at its value and
refuses one past it, and each refusal names its field. Written to kill the mutants
`make mutation` found alive in ``agentsvc_core.rules`` (docs/development.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

import pytest

from agentsvc_core import rules
from agentsvc_core.entities import Agent, ToolProfile
from agentsvc_core.errors import InvalidInput
from agentsvc_core.rules import (
    check_agent,
    check_bindings,
    check_embed_domain,
    check_header,
    check_metadata,
    check_model_id,
    check_org_id,
    check_text,
    check_url_text,
    join_overlay,
)

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def agent(**changes: Any) -> Agent:
    fields: dict[str, Any] = {
        "id": uuid4(),
        "org_id": "org",
        "name": "a",
        "description": "",
        "stable_preamble": "",
        "default_model": "m",
        "created_at": NOW,
        "updated_at": NOW,
    }
    fields.update(changes)
    return Agent(**fields)


def refused(call: Any, *args: Any, **kwargs: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as raised:
        call(*args, **kwargs)
    return raised.value


# --- check_text ---------------------------------------------------------------------


def test_text_at_its_bound_passes_and_one_more_is_refused() -> None:
    assert check_text("f", "x" * 5, max_len=5) == "x" * 5
    error = refused(check_text, "f", "x" * 6, max_len=5)
    assert (error.field, error.problem) == ("f", "must be at most 5 characters")


def test_text_refuses_nul_anywhere_with_its_own_reason() -> None:
    error = refused(check_text, "f", "a\x00b", max_len=10)
    assert (error.field, error.problem) == ("f", "must not contain NUL characters")


def test_blank_text_is_refused_only_when_required() -> None:
    assert check_text("f", "", max_len=5) == ""
    assert check_text("f", "  ", max_len=5) == "  "
    for blank in ("", " \t\n"):
        error = refused(check_text, "f", blank, max_len=5, required=True)
        assert (error.field, error.problem) == ("f", "must not be empty")
    assert check_text("f", " a ", max_len=5, required=True) == " a "


# --- URLs and headers ----------------------------------------------------------------


def test_url_refusal_names_the_field() -> None:
    error = refused(check_url_text, "resolver_url", "https://a.example/\r")
    assert error.field == "resolver_url"
    assert error.problem == "must not contain spaces or control characters"


def test_url_with_non_ascii_letters_passes() -> None:
    assert check_url_text("u", "https://bücher.example/é") == "https://bücher.example/é"


def test_header_name_refusal_names_the_field_and_value_refusal_the_header() -> None:
    error = refused(check_header, "h", "X Key", "v")
    assert (error.field, error.problem) == (
        "h",
        "header names must be RFC 7230 tokens (letters, digits and !#$%&'*+-.^_`|~)",
    )
    error = refused(check_header, "h", "X-Key", "a\rb")
    assert (error.field, error.problem) == (
        "h.X-Key",
        "must not contain CR, LF, NUL or other controls",
    )
    assert "a\rb" not in str(error)


@pytest.mark.parametrize("name", ["X-Key", "!#$%&'*+.^_`|~", "a", "0"])
def test_every_token_character_is_a_header_name(name: str) -> None:
    check_header("h", name, "")


@pytest.mark.parametrize("name", ["X:Key", "X-Key\n", "Ké", "(x)"])
def test_non_token_header_names_are_refused(name: str) -> None:
    refused(check_header, "h", name, "v")


@pytest.mark.parametrize("control", ["\x00", "\x01", "\x7f", "\x85", "\n", "\r"])
def test_every_control_but_tab_is_refused_in_header_values(control: str) -> None:
    refused(check_header, "h", "X-Key", f"a{control}b")


# --- embed domains -------------------------------------------------------------------


@pytest.mark.parametrize(
    "domain",
    [
        "example.com:1",
        "example.com:65535",
        "EXAMPLE.COM",
        "*.Example.com:8080",
        "a-b.example",
        "x" * 63 + ".example",
        ".".join(["a" * 63] * 3 + ["b" * 61]),  # 253 characters: the longest host
    ],
)
def test_embed_domains_at_their_bounds_pass(domain: str) -> None:
    assert check_embed_domain("d", domain) == domain


@pytest.mark.parametrize(
    "domain",
    [
        ".".join(["a" * 63] * 3 + ["b" * 62]),  # 254 characters
        "example.com:-1",
        "example.com:x",
        "example.com:٣",  # a digit, but not ASCII
        "a-.example",
        "*.",
        "*.-a.example",
        "exa mple.com",
        "xn--.example",
    ],
)
def test_embed_domains_past_their_bounds_are_refused(domain: str) -> None:
    error = refused(check_embed_domain, "embed_domains", domain)
    assert error.field == "embed_domains"
    assert "host names" in error.problem


# --- model and organization ids ------------------------------------------------------


def test_model_id_bound_and_alphabet() -> None:
    longest = "m" * rules.MAX_MODEL_ID
    assert check_model_id("model", longest) == longest
    for bad in ("m" * (rules.MAX_MODEL_ID + 1), "", "-m", "m m", "m\n", "mé"):
        error = refused(check_model_id, "model", bad)
        assert error.field == "model"
        assert str(rules.MAX_MODEL_ID) in error.problem
    for good in ("claude-sonnet-4-5", "beta:gpt-4o", "meta-llama/Llama-3.1-8B", "a@b+c_d"):
        assert check_model_id("model", good) == good


def test_org_id_bound_and_alphabet() -> None:
    longest = "o" * rules.MAX_ORG_ID
    assert check_org_id("org", longest) == longest
    for bad in ("o" * (rules.MAX_ORG_ID + 1), "", ".o", "o/o", "o:o", "o o", "o\n"):
        error = refused(check_org_id, "org", bad)
        assert error.field == "org"
        assert f"1-{rules.MAX_ORG_ID}" in error.problem
    for good in ("0", "org_1.a-b", "Acme"):
        assert check_org_id("org", good) == good


# --- metadata and bindings -----------------------------------------------------------


def test_metadata_bounds() -> None:
    full = {f"k{i}": "v" for i in range(rules.MAX_METADATA_KEYS)}
    assert check_metadata("metadata", full) == full
    error = refused(check_metadata, "metadata", {**full, "one more": "v"})
    assert (error.field, error.problem) == ("metadata", f"at most {rules.MAX_METADATA_KEYS} keys")

    long_key = "k" * rules.MAX_METADATA_KEY
    long_value = "v" * rules.MAX_METADATA_VALUE
    assert check_metadata("metadata", {long_key: long_value}) == {long_key: long_value}
    assert refused(check_metadata, "metadata", {long_key + "k": "v"}).field == "metadata"
    assert refused(check_metadata, "metadata", {"k": long_value + "v"}).field == "metadata.k"
    assert refused(check_metadata, "metadata", {"": "v"}).field == "metadata"
    assert refused(check_metadata, "metadata", {" ": "v"}).problem == "must not be empty"
    assert refused(check_metadata, "metadata", {"k": "\x00"}).field == "metadata.k"
    assert check_metadata("metadata", {"k": ""}) == {"k": ""}


def test_bindings_bounds() -> None:
    full: list[dict[str, Any]] = [{} for _ in range(rules.MAX_BINDINGS)]
    assert check_bindings("bindings", full) == full
    error = refused(check_bindings, "bindings", [*full, {}])
    assert (error.field, error.problem) == ("bindings", f"at most {rules.MAX_BINDINGS} entries")

    # [{"k":"..."}] is 10 bytes of JSON around the value
    exact = [{"k": "x" * (rules.MAX_BINDINGS_BYTES - 10)}]
    assert check_bindings("bindings", exact) == exact
    error = refused(check_bindings, "bindings", [{"k": "x" * (rules.MAX_BINDINGS_BYTES - 9)}])
    assert (error.field, error.problem) == (
        "bindings",
        f"at most {rules.MAX_BINDINGS_BYTES} bytes of JSON",
    )

    error = refused(check_bindings, "bindings", [{"k": ["a\x00"]}])
    assert (error.field, error.problem) == ("bindings", "must not contain NUL characters")
    error = refused(check_bindings, "bindings", [{"k\x00": 1}])
    assert error.problem == "must not contain NUL characters"


def test_the_text_backslash_u0000_is_not_a_nul() -> None:
    text = "\\u0000 as text"
    assert check_bindings("bindings", [{"k": text}]) == [{"k": text}]


def test_join_overlay() -> None:
    assert join_overlay(None) is None
    assert join_overlay("") == ""
    assert join_overlay("a") == "a"
    assert join_overlay([]) == ""
    assert join_overlay(["a"]) == "a"
    assert join_overlay(["a", "b", "c"]) == "a\n\nb\n\nc"


# --- agents and their tool profiles --------------------------------------------------


def test_agent_text_bounds_name_their_fields() -> None:
    assert check_agent(agent(name="n" * rules.MAX_NAME)).name == "n" * rules.MAX_NAME
    assert refused(check_agent, agent(name="n" * (rules.MAX_NAME + 1))).field == "name"
    assert refused(check_agent, agent(name=" ")).field == "name"
    long_description = "d" * rules.MAX_DESCRIPTION
    assert check_agent(agent(description=long_description)).description == long_description
    error = refused(check_agent, agent(description=long_description + "d"))
    assert error.field == "description"
    assert check_agent(agent(description="")).description == ""
    long_preamble = "p" * rules.MAX_PREAMBLE
    assert check_agent(agent(stable_preamble=long_preamble)).stable_preamble == long_preamble
    error = refused(check_agent, agent(stable_preamble=long_preamble + "p"))
    assert error.field == "stable_preamble"
    assert refused(check_agent, agent(default_model="a b")).field == "default_model"


def test_agent_default_profile_and_runtime_provider() -> None:
    profiles = {"p": ToolProfile(tools=("t",))}
    assert check_agent(agent(tool_profiles=profiles, default_profile="p")).default_profile == "p"
    error = refused(check_agent, agent(tool_profiles=profiles, default_profile="q"))
    assert error.field == "default_profile"
    assert refused(check_agent, agent(default_profile="p")).field == "default_profile"
    assert check_agent(agent(tool_profiles={})).tool_profiles == {}
    for provider in ("native", "alternative"):
        assert check_agent(agent(runtime_provider=provider)).runtime_provider == provider
    error = refused(check_agent, agent(runtime_provider="other"))
    assert error.field == "runtime_provider"
    assert error.problem == "must be one of native, alternative"


def test_profile_bounds() -> None:
    many = {f"p{i}": ToolProfile() for i in range(rules.MAX_PROFILES)}
    assert check_agent(agent(tool_profiles=many)).tool_profiles == many
    error = refused(check_agent, agent(tool_profiles={**many, "one more": ToolProfile()}))
    assert (error.field, error.problem) == (
        "tool_profiles",
        f"at most {rules.MAX_PROFILES} profiles",
    )

    long_name = "p" * rules.MAX_PROFILE_NAME
    assert check_agent(agent(tool_profiles={long_name: ToolProfile()}))
    error = refused(check_agent, agent(tool_profiles={long_name + "p": ToolProfile()}))
    assert error.field == "tool_profiles"
    assert refused(check_agent, agent(tool_profiles={" ": ToolProfile()})).field == (
        "tool_profiles"
    )

    description = "d" * rules.MAX_DESCRIPTION
    assert check_agent(agent(tool_profiles={"p": ToolProfile(description=description)}))
    error = refused(
        check_agent, agent(tool_profiles={"p": ToolProfile(description=description + "d")})
    )
    assert error.field == "tool_profiles.p.description"

    tools = tuple(f"t{i}" for i in range(rules.MAX_PROFILE_TOOLS))
    assert check_agent(agent(tool_profiles={"p": ToolProfile(tools=tools)}))
    error = refused(check_agent, agent(tool_profiles={"p": ToolProfile(tools=(*tools, "x"))}))
    assert (error.field, error.problem) == (
        "tool_profiles.p.tools",
        f"at most {rules.MAX_PROFILE_TOOLS} tools",
    )

    long_tool = "t" * rules.MAX_TOOL_NAME
    assert check_agent(agent(tool_profiles={"p": ToolProfile(tools=(long_tool,))}))
    error = refused(check_agent, agent(tool_profiles={"p": ToolProfile(tools=(long_tool + "t",))}))
    assert error.field == "tool_profiles.p.tools"
    error = refused(check_agent, agent(tool_profiles={"p": ToolProfile(tools=("",))}))
    assert (error.field, error.problem) == ("tool_profiles.p.tools", "must not be empty")
