"""The tool sources the service builds never claim the same name (ports/tools.py's
naming rule), so the hub routes every call to the one source that offered it."""

from __future__ import annotations

import uuid

from hypothesis import given
from hypothesis import strategies as st

from agentsvc_web.bootstrap import build_services
from agentsvc_web.settings import Settings

SOURCES = build_services(
    Settings(storage="memory", bootstrap_api_key=None, bootstrap_org=f"hub-{uuid.uuid4().hex[:6]}")
).conversation._tools._sources  # type: ignore[attr-defined]

NAMES = [
    "docs-search__lookup",  # MCP
    "db_warehouse__query",  # database integration
    "knowledge_search",
    "lookup_order",  # webhook tool
    "memory_search",
    "plan_create",
    "todo_update",
    "web_fetch",
    "web_search",
]


def owners(name: str) -> list[str]:
    return [type(s).__name__ for s in SOURCES if s.owns(name)]


def test_each_kind_of_name_has_its_one_source() -> None:
    assert {n: owners(n) for n in NAMES} == {
        "docs-search__lookup": ["McpTools"],
        "db_warehouse__query": ["IntegrationTools"],
        "knowledge_search": ["KnowledgeTools"],
        "lookup_order": ["WebhookToolSource"],
        "memory_search": ["MemoryTools"],
        "plan_create": ["PlanTools"],
        "todo_update": ["PlanTools"],
        "web_fetch": ["WebTools"],
        "web_search": ["WebTools"],
    }


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz_-0123456789ABC", min_size=1, max_size=40))
def test_no_name_has_two_owners(name: str) -> None:
    assert len(owners(name)) <= 1, (name, owners(name))
