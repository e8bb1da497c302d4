"""Token usage adds up field by field; cached input stays unknown until a part
reports it. Written to kill the mutants `make mutation` found alive in
``agentsvc_core.entities.usage`` (docs/development.md): budgets read these sums."""

from __future__ import annotations

from agentsvc_core.entities import Usage


def test_usage_adds_field_by_field() -> None:
    total = Usage(input_tokens=3, output_tokens=5) + Usage(input_tokens=7, output_tokens=11)
    assert total == Usage(input_tokens=10, output_tokens=16, cached_input_tokens=None)
    assert total.total_tokens == 26
    assert Usage().total_tokens == 0


def test_cached_input_is_known_once_either_part_knows_it() -> None:
    known, unknown = Usage(cached_input_tokens=4), Usage()
    assert (known + unknown).cached_input_tokens == 4
    assert (unknown + known).cached_input_tokens == 4
    assert (known + Usage(cached_input_tokens=6)).cached_input_tokens == 10
    assert (Usage(cached_input_tokens=0) + unknown).cached_input_tokens == 0
    assert (unknown + unknown).cached_input_tokens is None
