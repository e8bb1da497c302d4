"""A tool's result checked against the server's ``outputSchema``, patterns in RE2.

The SDK's ``ClientSession.call_tool`` checks a successful result's structured
content against the ``outputSchema`` the server listed for the tool, with
``jsonschema`` and so with Python's backtracking ``re``: a server whose schema holds
``{"pattern": "^(a+)+$"}`` and whose result holds ``"aaaa…a!"`` would stop the event
loop, and every organization with it. ``CheckedSession`` makes the same check with
``agentsvc_core.json_schema`` (patterns in RE2 within a bound of work; nothing
fetched for a ``$ref``), replacing the SDK's ``validate_tool_result``; a result that does not
fit, or a schema that cannot be applied (a pattern RE2 cannot compile, named), is a
``ResultRefused`` the client turns into the call's error.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import mcp_types as types
from jsonschema.exceptions import best_match
from jsonschema.protocols import Validator
from mcp.client.session import ClientSession
from referencing.exceptions import Unresolvable

from agentsvc_core import json_schema
from agentsvc_core.json_schema import PatternRefused

__all__ = ["CheckedSession", "ResultRefused"]

_DETAIL = 300  # characters of jsonschema's message a refusal keeps


class ResultRefused(Exception):
    """The server's result does not fit the tool's ``outputSchema``, or the schema
    cannot be applied: the message says which and why."""


class CheckedSession(ClientSession):
    """The SDK's session with ``validate_tool_result`` replaced (module docstring).
    The output schemas are recorded from every ``list_tools`` page, as the SDK does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._output_schemas: dict[str, dict[str, Any] | None] = {}
        # built once per schema: checking a schema costs far more than validating
        self._validators: dict[str, Validator] = {}

    async def list_tools(
        self, *, params: types.PaginatedRequestParams | None = None
    ) -> types.ListToolsResult:
        listed = await super().list_tools(params=params)
        for tool in listed.tools:
            if self._output_schemas.get(tool.name) != tool.output_schema:
                self._validators.pop(tool.name, None)
            self._output_schemas[tool.name] = tool.output_schema
        return listed

    async def validate_tool_result(self, name: str, result: types.CallToolResult) -> None:
        if name not in self._output_schemas:
            await self.list_tools()  # the SDK does the same for a tool it has not seen
        schema = self._output_schemas.get(name)
        if schema is None:
            return
        content = result.structured_content
        if content is None and "structured_content" not in result.model_fields_set:
            raise ResultRefused(f"tool {name} has an outputSchema but gave no structured content")
        try:
            error = best_match(json_schema.problems(self._validator(name, schema), content))
        except (PatternRefused, Unresolvable) as exc:
            raise ResultRefused(
                f"the outputSchema of tool {name} cannot be applied: {str(exc)[:_DETAIL]}"
            ) from None
        if error is not None:
            where = "/".join(str(p) for p in error.path)
            raise ResultRefused(
                f"tool {name} returned structured content that does not fit its outputSchema: "
                + (f"{where}: " if where else "")
                + error.message[:_DETAIL]
            )

    def _validator(self, name: str, schema: dict[str, Any]) -> Validator:
        found = self._validators.get(name)
        if found is not None:
            return found
        try:
            json_schema.check_schema(schema)
        except jsonschema.SchemaError as exc:
            why = str(exc.cause) if isinstance(exc.cause, PatternRefused) else exc.message
            raise ResultRefused(
                f"the outputSchema of tool {name} is not a valid JSON Schema: {why[:_DETAIL]}"
            ) from None
        made = self._validators[name] = json_schema.validator(schema)
        return made
