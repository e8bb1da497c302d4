"""Generate the client's models and resource methods from the service's OpenAPI document.

    python clients/python/generate.py --serve         # start `agentsvc serve`, read its document
    python clients/python/generate.py --file doc.json # or read a saved document

`make client` runs the first. The output (``agentsvc_client/models.py``,
``_resources.py``, ``_async_resources.py``, ``_operations.py``) is checked in, and a
test regenerates it from the running service's document and fails on any difference.

Why generate: the service has 86 operations whose bodies and answers are already
described precisely by its document; writing them by hand twice (sync and async)
would drift. What reads better by hand is hand-written: the reply stream
(``_stream.py``), the events (``events.py``), errors, tools and webhooks. The
operationId -> method table below is explicit so that a new operation fails the
generator (and the coverage test) until someone gives it a name.
"""

from __future__ import annotations

import argparse
import json
import keyword
import os
import re
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGE = HERE / "agentsvc_client"

# operationId -> "resource.path.method". Every operation of the document must be here.
OPERATIONS: dict[str, str] = {
    "listAgents": "agents.list",
    "createAgent": "agents.create",
    "getAgent": "agents.get",
    "deleteAgent": "agents.delete",
    "updateAgent": "agents.update",
    "listAgentMcpServers": "agents.mcp_servers.list",
    "attachAgentMcpServer": "agents.mcp_servers.attach",
    "detachAgentMcpServer": "agents.mcp_servers.detach",
    "getAgentCredentials": "agents.credentials.get",
    "putAgentCredentials": "agents.credentials.put",
    "getAgentCompaction": "agents.compaction.get",
    "putAgentCompaction": "agents.compaction.put",
    "getAgentMultiplayer": "agents.multiplayer.get",
    "putAgentMultiplayer": "agents.multiplayer.put",
    "getAgentWeb": "agents.web.get",
    "putAgentWeb": "agents.web.put",
    "listAgentIntegrations": "agents.integrations.list",
    "attachAgentIntegration": "agents.integrations.attach",
    "detachAgentIntegration": "agents.integrations.detach",
    "getAgentDelegated": "agents.delegated.get",
    "putAgentDelegated": "agents.delegated.put",
    "getAgentPlan": "agents.plan.get",
    "putAgentPlan": "agents.plan.put",
    "getAgentMemory": "agents.memory.get",
    "putAgentMemory": "agents.memory.put",
    "recallMemories": "agents.memory.recall",
    "listMemories": "agents.memory.list",
    "deleteMemory": "agents.memory.delete",
    "addMemory": "agents.memory.add",
    "editMemory": "agents.memory.edit",
    "listKeys": "keys.list",
    "createKey": "keys.create",
    "revokeKey": "keys.revoke",
    "listThreads": "threads.list",
    "createThread": "threads.create",
    "getThread": "threads.get",
    "updateThread": "threads.update",
    "stopThread": "threads.stop",
    "getThreadContext": "threads.context",
    "compactThread": "threads.compact",
    "deleteThread": "threads.delete",
    "streamReply": "threads.attach",
    "threadEvents": "threads.events",
    "listMessages": "threads.messages.list",
    "sendMessage": "threads.messages.send",
    "editMessage": "threads.messages.edit",
    "regenerateReply": "threads.regenerate",
    "switchBranch": "threads.switch_branch",
    "forkThread": "threads.fork",
    "listParticipants": "threads.participants.list",
    "addParticipant": "threads.participants.add",
    "removeParticipant": "threads.participants.remove",
    "listMcpServers": "mcp_servers.list",
    "createMcpServer": "mcp_servers.create",
    "getMcpServer": "mcp_servers.get",
    "deleteMcpServer": "mcp_servers.delete",
    "updateMcpServer": "mcp_servers.update",
    "testMcpServer": "mcp_servers.test",
    "startMcpOAuth": "mcp_servers.oauth_start",
    "getMcpOAuth": "mcp_servers.oauth_status",
    "disconnectMcpOAuth": "mcp_servers.oauth_disconnect",
    "mcpOAuthCallback": "mcp_servers.oauth_callback",
    "searchMcpRegistry": "mcp_registry.search",
    "listManagedMcpProviders": "mcp_registry.managed",
    "startManagedMcpOAuth": "mcp_servers.managed_oauth.start",
    "managedMcpOAuthCallback": "mcp_servers.managed_oauth.callback",
    "disconnectManagedMcpOAuth": "mcp_servers.managed_oauth.disconnect",
    "listAgentMcpServices": "agents.mcp_servers.services",
    "updateAgentMcpServices": "agents.mcp_servers.set_services",
    "listRunnerMcpServers": "runners.mcp_servers.list",
    "attachRunnerMcpServer": "runners.mcp_servers.attach",
    "getAgentMarketplace": "agents.marketplace.get",
    "putAgentMarketplace": "agents.marketplace.put",
    "deleteAgentMarketplace": "agents.marketplace.delete",
    "uploadAgentAvatar": "agents.marketplace.upload_avatar",
    "deleteAgentAvatar": "agents.marketplace.delete_avatar",
    "generateAgentDescription": "agents.marketplace.generate_description",
    "detectAgentCapabilities": "agents.marketplace.detect_capabilities",
    "putAgentCapabilities": "agents.marketplace.put_capabilities",
    "getPublicAvatar": "public.avatar",
    "getAgentPublish": "agents.publish.get",
    "publishAgent": "agents.publish.create",
    "updateAgentPublish": "agents.publish.update",
    "unpublishAgent": "agents.publish.delete",
    "listVisitorThreads": "agents.publish.threads",
    "listAgentChannels": "agents.channels.list",
    "createAgentChannel": "agents.channels.create",
    "updateAgentChannel": "agents.channels.update",
    "deleteAgentChannel": "agents.channels.delete",
    "listChannelContacts": "agents.channels.contacts",
    "listChannelMessages": "agents.channels.messages",
    "updateChannelContact": "agents.channels.update_contact",
    "getChannelQr": "agents.channels.qr",
    "channelWebhook": "channels.webhook",
    "channelWebhookCheck": "channels.webhook_check",
    "getAgentComputer": "agents.computer.get",
    "putAgentComputer": "agents.computer.put",
    "listComputerInstances": "agents.computer.instances",
    "execComputerCommand": "agents.computer.exec",
    "stopComputerInstance": "agents.computer.stop",
    "deleteComputerInstance": "agents.computer.delete",
    "getThreadComputer": "threads.computer",
    "listModels": "models.list",
    "getModel": "models.get",
    "listCodeAgents": "code_agents.list",
    "createCodeAgent": "code_agents.create",
    "getCodeAgent": "code_agents.get",
    "updateCodeAgent": "code_agents.update",
    "deleteCodeAgent": "code_agents.delete",
    "listCodeSessions": "code_sessions.list",
    "createCodeSession": "code_sessions.create",
    "getCodeSession": "code_sessions.get",
    "updateCodeSession": "code_sessions.update",
    "sendCodeSessionMessage": "code_sessions.send",
    "cancelCodeSession": "code_sessions.cancel",
    "archiveCodeSession": "code_sessions.archive",
    "listCodeSessionEvents": "code_sessions.events",
    "listWebhookEventTypes": "event_webhooks.event_types",
    "listWebhookEndpoints": "event_webhooks.list",
    "createWebhookEndpoint": "event_webhooks.create",
    "getWebhookEndpoint": "event_webhooks.get",
    "updateWebhookEndpoint": "event_webhooks.update",
    "deleteWebhookEndpoint": "event_webhooks.delete",
    "rotateWebhookSecret": "event_webhooks.rotate_secret",
    "listWebhookDeliveries": "event_webhooks.deliveries",
    "resendWebhookDelivery": "event_webhooks.resend",
    "getPublicChat": "public.chat.get",
    "startVisitorSession": "public.chat.start_session",
    "createVisitorThread": "public.chat.create_thread",
    "sendVisitorMessage": "public.chat.send",
    "stopVisitorThread": "public.chat.stop",
    "listVisitorMessages": "public.chat.messages",
    "listPublicMarketplace": "public.marketplace",
    "listOfficialTemplates": "templates.list",
    "useOfficialTemplate": "templates.use",
    "listProjects": "projects.list",
    "createProject": "projects.create",
    "getProject": "projects.get",
    "updateProject": "projects.update",
    "deleteProject": "projects.delete",
    "listProjectMembers": "projects.members",
    "listSkills": "skills.list",
    "createSkill": "skills.create",
    "browseSkills": "skills.browse",
    "getSkill": "skills.get",
    "updateSkill": "skills.update",
    "deleteSkill": "skills.delete",
    "syncSkill": "skills.sync",
    "listAgentSkills": "agents.skills.list",
    "setAgentSkills": "agents.skills.set",
    "listRunners": "runners.list",
    "createRunner": "runners.create",
    "getRunner": "runners.get",
    "updateRunner": "runners.update",
    "deleteRunner": "runners.delete",
    "listRunnerSteps": "runners.steps.list",
    "replaceRunnerSteps": "runners.steps.replace",
    "addRunnerStep": "runners.steps.add",
    "getRunnerBudget": "runners.budget.get",
    "putRunnerBudget": "runners.budget.put",
    "listRunnerSkills": "runners.skills.list",
    "setRunnerSkills": "runners.skills.set",
    "listRunnerTriggers": "runners.triggers.list",
    "createRunnerTrigger": "runners.triggers.create",
    "updateRunnerTrigger": "runners.triggers.update",
    "rotateRunnerTriggerToken": "runners.triggers.rotate",
    "deleteRunnerTrigger": "runners.triggers.delete",
    "getRunnerAnalytics": "runners.analytics",
    "startRunnerRun": "runners.runs.start",
    "listRunnerRuns": "runners.runs.list",
    "getRunnerRun": "runners.runs.get",
    "listRunnerRunEvents": "runners.runs.events",
    "cancelRunnerRun": "runners.runs.cancel",
    "resumeRunnerRun": "runners.runs.resume",
    "runnerWebhook": "runners.webhook",
    "listRunnerSuggestions": "runners.suggestions.list",
    "generateRunnerSuggestions": "runners.suggestions.generate",
    "dismissRunnerSuggestion": "runners.suggestions.dismiss",
    "listAgentSuggestions": "agents.suggestions.list",
    "generateAgentSuggestions": "agents.suggestions.generate",
    "dismissAgentSuggestion": "agents.suggestions.dismiss",
    "getRunnerButton": "runners.button",
    "getRunnerEmbedScript": "runners.embed_script",
    "getScheduledTasks": "agents.scheduled_tasks.get",
    "putScheduledTasks": "agents.scheduled_tasks.put",
    "listScheduledTaskRuns": "agents.scheduled_tasks.runs",
    "getOrgSettings": "settings.get",
    "eraseUserData": "users.erase",
    "exportUserData": "users.export",
    "updateOrgSettings": "settings.update",
    "listIntegrations": "integrations.list",
    "createIntegration": "integrations.create",
    "getIntegration": "integrations.get",
    "updateIntegration": "integrations.update",
    "deleteIntegration": "integrations.delete",
    "listTraces": "logs.list",
    "getTrace": "logs.get",
    "getAnalytics": "analytics.get",
    "listTools": "tools.list",
    "createTool": "tools.create",
    "getTool": "tools.get",
    "deleteTool": "tools.delete",
    "updateTool": "tools.update",
    "executeTool": "tools.execute",
    "listPlans": "plans.list",
    "createPlan": "plans.create",
    "getPlan": "plans.get",
    "deletePlan": "plans.delete",
    "updatePlan": "plans.update",
    "getReadyTodos": "plans.ready",
    "addTodos": "plans.todos.add",
    "updateTodo": "plans.todos.update",
    "deleteTodo": "plans.todos.delete",
    "listTodoDependencies": "plans.todos.deps.list",
    "addTodoDependency": "plans.todos.deps.add",
    "removeTodoDependency": "plans.todos.deps.remove",
    "listKnowledge": "knowledge.list",
    "getKnowledge": "knowledge.get",
    "listKnowledgeChunks": "knowledge.chunks",
    "deleteKnowledge": "knowledge.delete",
    "reindexKnowledge": "knowledge.reindex",
    "searchKnowledge": "knowledge.search",
    "uploadKnowledge": "knowledge.upload",
    "healthz": "service.health",
    "readyz": "service.ready",
}

# Written by hand in the client (a stream, or a multipart upload): the generated
# resource method delegates to it.
SPECIAL = {
    "sendMessage": "_send_message",
    "streamReply": "_attach",
    "threadEvents": "_thread_events",
    "uploadKnowledge": "_upload",
    "uploadAgentAvatar": "_upload_avatar",
    "execComputerCommand": "_exec_command",
}

METHODS = ("get", "post", "put", "patch", "delete")
HEADER = (
    "# Generated by clients/python/generate.py from the service's OpenAPI document: do not edit.\n"
)


def snake(name: str) -> str:
    out = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()
    return out + "_" if keyword.iskeyword(out) else out


def model_name(schema: str) -> str:
    if schema.endswith("Out") and not schema.startswith("Sse"):
        return schema[: -len("Out")]
    return schema


class Types:
    """JSON Schema -> Python annotation (as text), for answers or for request bodies."""

    def __init__(self, for_body: bool, list_name: str = "list") -> None:
        self.for_body = for_body
        # "builtins.list" in the resources, whose classes have a method named list
        self.list_name = list_name

    def of(self, s: dict[str, Any]) -> str:  # noqa: C901 - one case per JSON Schema form
        if "$ref" in s:
            return model_name(s["$ref"].rsplit("/", 1)[1])
        for key in ("oneOf", "anyOf"):
            if key in s:
                parts = [self.of({**_inherit(s), **m}) for m in s[key]]
                return _union(parts)
        if "const" in s:
            return f"Literal[{s['const']!r}]"
        kind = s.get("type")
        if isinstance(kind, list):
            parts = [self.of({**s, "type": k}) for k in kind]
            return _union(parts)
        if "enum" in s and kind in ("string", "integer"):
            values = [v for v in s["enum"] if v is not None]
            return "Literal[" + ", ".join(repr(v) for v in values) + "]"
        if kind == "string":
            fmt = s.get("format")
            if fmt == "date-time":
                return "datetime | str" if self.for_body else "datetime"
            if fmt == "binary":
                return "bytes"
            return "str"
        if kind == "integer":
            return "int"
        if kind == "number":
            return "float"
        if kind == "boolean":
            return "bool"
        if kind == "null":
            return "None"
        if kind == "array":
            return f"{self.list_name}[{self.of(s.get('items', {}))}]"
        if kind == "object":
            extra = s.get("additionalProperties")
            if isinstance(extra, dict) and extra:
                return f"dict[str, {self.of(extra)}]"
            return "dict[str, Any]"
        return "Any"


def _inherit(s: dict[str, Any]) -> dict[str, Any]:
    """What a oneOf member inherits from its parent (the format of a nullable date-time)."""
    return {"format": s["format"]} if "format" in s else {}


def _union(parts: list[str]) -> str:
    seen: list[str] = []
    for part in parts:
        for piece in part.split(" | "):
            if piece not in seen:
                seen.append(piece)
    if "None" in seen:
        seen = [p for p in seen if p != "None"] + ["None"]
    return " | ".join(seen) if seen else "Any"


def _doc(text: str, indent: str) -> str:
    text = " ".join(text.split())
    lines = textwrap.wrap(text, 92 - len(indent))
    quote = chr(34) * 3
    if len(lines) <= 1:
        return f"{indent}{quote}{text}{quote}\n"
    rest = "".join(f"{indent}{line}\n" for line in lines[1:])
    return f"{indent}{quote}{lines[0]}\n{rest}{indent}{quote}\n"


# --- models ------------------------------------------------------------------------


def render_models(doc: dict[str, Any]) -> str:
    schemas: dict[str, Any] = doc["components"]["schemas"]
    answers, bodies = Types(for_body=False), Types(for_body=True)
    out = [
        HEADER,
        '"""The service\'s answers and request bodies as msgspec Structs.\n\n'
        "Answers are frozen, with the answer's snake_case fields; request bodies take\n"
        "snake_case fields and are sent camelCase (fields left UNSET are not sent).\n"
        '"""\n\n'
        "from __future__ import annotations\n\n"
        "from datetime import datetime\n"
        "from typing import Any, Literal\n\n"
        "import msgspec\n"
        "from msgspec import UNSET, UnsetType\n\n",
    ]
    names = []
    for name in sorted(schemas):
        if name.startswith("Sse") or name == "ErrorBody":
            continue  # the events are written by hand (events.py), the error body too
        schema = schemas[name]
        cls = model_name(name)
        names.append(cls)
        is_body = name.endswith("Body") and name != "OkBody"
        required = set(schema.get("required", []))
        types = bodies if is_body else answers
        if is_body:
            out.append(f"\n\nclass {cls}(msgspec.Struct, kw_only=True, omit_defaults=True):\n")
        else:
            out.append(f"\n\nclass {cls}(msgspec.Struct, frozen=True, kw_only=True):\n")
        kind = "A request body" if is_body else "An answer"
        out.append(
            _doc(
                schema.get("description") or f"{kind}: ``{name}`` of the OpenAPI document.", "    "
            )
        )
        props: dict[str, Any] = schema.get("properties", {})
        for prop, spec in props.items():
            if "not" in spec:
                continue  # a field never to send (a derived slug)
            field = snake(prop)
            annotation = types.of(spec)
            rename = f'name="{prop}"' if field != prop else ""
            if prop in required:
                default = ""
            elif is_body:
                annotation = f"{annotation} | UnsetType"
                default = "UNSET"
            elif "default" in spec and isinstance(spec["default"], (str, int, float, bool)):
                default = repr(spec["default"])
            else:
                annotation = _union([annotation, "None"])
                default = "None"
            if rename:
                value = f"msgspec.field({rename}{', default=' + default if default else ''})"
                out.append(f"    {field}: {annotation} = {value}\n")
            elif default:
                out.append(f"    {field}: {annotation} = {default}\n")
            else:
                out.append(f"    {field}: {annotation}\n")
    out.append("\n\n__all__ = [\n" + "".join(f'    "{n}",\n' for n in names) + "]\n")
    return "".join(out)


# --- resources ---------------------------------------------------------------------


class Op:
    def __init__(self, method: str, path: str, spec: dict[str, Any], doc: dict[str, Any]) -> None:
        self.method = method.upper()
        self.path = path
        self.id: str = spec["operationId"]
        self.summary: str = spec.get("summary") or spec.get("description") or self.id
        self.path_params = re.findall(r"{(\w+)}", path)
        self.query = [p for p in spec.get("parameters", []) if p["in"] == "query"]
        content = spec.get("requestBody", {}).get("content", {})
        self.body: dict[str, Any] | None = None
        self.body_cls: str | None = None
        if "application/json" in content:
            schema = content["application/json"]["schema"]
            if "$ref" not in schema:  # an optional body: ``oneOf`` its schema and null
                schema = next(
                    s for s in schema.get("oneOf", schema.get("anyOf", [])) if "$ref" in s
                )
            ref = schema["$ref"].rsplit("/", 1)[1]
            self.body_cls = model_name(ref)
            self.body = doc["components"]["schemas"][ref]
        self.answer = "Any"
        for status, answer in sorted(spec["responses"].items()):
            if status.startswith("2") and any(
                t.startswith("text/") for t in answer.get("content", {})
            ):
                self.answer = "str"  # a page or a script, answered as its text
                break
            if status.startswith("2") and "application/octet-stream" in answer.get("content", {}):
                self.answer = "bytes"  # a picture, answered as its bytes
                break
            if status.startswith("2") and "application/json" in answer.get("content", {}):
                self.answer = Types(for_body=False, list_name="builtins.list").of(
                    answer["content"]["application/json"]["schema"]
                )
                break


def operations(doc: dict[str, Any]) -> list[Op]:
    ops = []
    for path, item in doc["paths"].items():
        for method, spec in item.items():
            if method in METHODS:
                ops.append(Op(method, path, spec, doc))
    unknown = sorted(op.id for op in ops if op.id not in OPERATIONS)
    if unknown:
        raise SystemExit(f"operations with no client method (add them to OPERATIONS): {unknown}")
    return ops


def _path_expr(op: Op) -> str:
    """The call's path as Python source: each path parameter percent-encoded (an id
    of "../keys" must not name another route)."""
    if not op.path_params:
        return '"' + op.path + '"'
    return 'f"' + re.sub(r"\{(\w+)\}", r"{_seg(\1)}", op.path) + '"'


def _method(op: Op, name: str, is_async: bool) -> str:
    bodies = Types(for_body=True, list_name="builtins.list")
    params = [f"{p}: str" for p in op.path_params]
    kw: list[str] = []
    body_args: list[str] = []
    query_args: list[str] = []
    taken = set(op.path_params)
    if op.body is not None:
        required = set(op.body.get("required", []))
        for prop, spec in op.body.get("properties", {}).items():
            if "not" in spec:
                continue  # a field never to send (a derived slug)
            arg = snake(prop)
            if arg in taken:
                raise SystemExit(f"{op.id}: body field {prop} collides with a parameter")
            taken.add(arg)
            annotation = bodies.of(spec)
            kw.append(
                f"{arg}: {annotation}"
                if prop in required
                else f"{arg}: {annotation} | UnsetType = UNSET"
            )
            body_args.append(f"{arg}={arg}")
    for q in op.query:
        arg = snake(q["name"])
        if arg in taken:
            raise SystemExit(f"{op.id}: query {q['name']} collides with a parameter")
        taken.add(arg)
        annotation = bodies.of(q["schema"])
        kw.append(
            f"{arg}: {annotation}"
            if q.get("required")
            else f"{arg}: {_union([annotation, 'None'])} = None"
        )
        query_args.append(f'"{q["name"]}": {arg}')
    if op.id in ("streamReply", "threadEvents"):
        kw.append("last_event_id: int | None = None")
    if op.method == "POST":
        kw.append("idempotency_key: str | None = None")
    signature = ", ".join(["self", *params, *(["*", *kw] if kw else [])])
    prefix = "async " if is_async else ""
    wait = "await " if is_async else ""
    streamed = _streamed(op, name, signature, body_args, is_async)
    if streamed is not None:
        return streamed
    path = _path_expr(op)
    lines = [
        f"    {prefix}def {name}({signature}) -> {op.answer}:\n",
        _doc(f"{op.summary} ({op.method} {op.path}, {op.id}).", "        "),
    ]
    call = [f'"{op.method}"', path]
    if body_args:
        call.append(f"json={op.body_cls}({', '.join(body_args)})")
    if query_args:
        call.append("params={" + ", ".join(query_args) + "}")
    if op.method == "POST":
        call.append("idempotency_key=idempotency_key")
    call.append(f"type={op.answer}")
    lines.append(f"        return {wait}self._client._request({', '.join(call)})\n")
    return "".join(lines)


def _streamed(
    op: Op, name: str, signature: str, body_args: list[str], is_async: bool
) -> str | None:
    """The methods of the streamed operations (written by hand in the client: they
    delegate to it), or None for any other operation."""
    stream = "AsyncReplyStream" if is_async else "ReplyStream"
    if op.id == "sendMessage":
        doc = _doc(
            f"{op.summary} ({op.method} {op.path}, {op.id}): the reply's events, as they come.",
            "        ",
        )
        body = f"{op.body_cls}({', '.join(body_args)})"
        return (
            f"    def {name}({signature}) -> {stream}:\n{doc}"
            f"        return self._client._send_message({op.path_params[0]}, {body}, idempotency_key=idempotency_key)\n"
        )
    if op.id in ("editMessage", "regenerateReply"):
        doc = _doc(
            f"{op.summary} ({op.method} {op.path}, {op.id}): the new reply's events, as a"
            " send's (``ReplyStream``).",
            "        ",
        )
        body = f"{op.body_cls}({', '.join(body_args)})"
        return (
            f"    def {name}({signature}) -> {stream}:\n{doc}"
            f"        return self._client._send_message({op.path_params[0]}, {body},"
            f" idempotency_key=idempotency_key, path={_path_expr(op)})\n"
        )
    if op.id == "streamReply":
        doc = _doc(
            f"{op.summary} ({op.method} {op.path}, {op.id}): the events after ``last_event_id``.",
            "        ",
        )
        return (
            f"    def {name}({signature}) -> {stream}:\n{doc}"
            f"        return self._client._attach({op.path_params[0]}, run_id=run_id, after=after if last_event_id is None else last_event_id)\n"
        )
    if op.id == "threadEvents":
        events = "AsyncThreadEventStream" if is_async else "ThreadEventStream"
        doc = _doc(
            f"{op.summary} ({op.method} {op.path}, {op.id}): the events after"
            " ``last_event_id`` (or ``after``; neither: from now on), endless.",
            "        ",
        )
        return (
            f"    def {name}({signature}) -> {events}:\n{doc}"
            f"        return self._client._thread_events({op.path_params[0]}, after=after if last_event_id is None else last_event_id)\n"
        )
    return None


def render_resources(doc: dict[str, Any], is_async: bool) -> str:
    ops = {op.id: op for op in operations(doc)}
    tree: dict[str, dict[str, str]] = {}  # resource path -> {method: operationId}
    for op_id, target in OPERATIONS.items():
        if op_id not in ops:
            continue
        *parts, method = target.split(".")
        for i in range(1, len(parts) + 1):
            tree.setdefault(".".join(parts[:i]), {})
        tree[".".join(parts)][method] = op_id
    base = "AsyncResource" if is_async else "Resource"
    prefix = "Async" if is_async else ""
    out = [
        HEADER,
        f'"""The {"async " if is_async else ""}client\'s resources, one method an operation."""\n\n',
        "from __future__ import annotations\n\n",
        "import builtins\n",
        "from datetime import datetime\n",
        "from typing import TYPE_CHECKING, Any, Literal, cast\n\n",
        "from msgspec import UNSET, UnsetType\n\n",
        f"from agentsvc_client._base import {base}, {'_AsyncRequester' if is_async else '_Requester'}, _seg\n",
        "from agentsvc_client.models import (\n",
        "MODELS_IMPORT",
        ")\n",
        "\nif TYPE_CHECKING:\n",
        f"    from agentsvc_client._stream import {'AsyncReplyStream' if is_async else 'ReplyStream'}\n",
        f"    from agentsvc_client.thread_events import {'AsyncThreadEventStream' if is_async else 'ThreadEventStream'}\n",
        "    from agentsvc_client.computer import ExecEvent\n",
    ]
    for path in sorted(tree, key=lambda p: (-p.count("."), p)):
        cls = (
            prefix + "".join(part.title().replace("_", "") for part in path.split(".")) + "Resource"
        )
        children = sorted(
            p for p in tree if p.rsplit(".", 1)[0] == path and p.count(".") == path.count(".") + 1
        )
        out.append(f"\n\nclass {cls}({base}):\n")
        out.append(_doc(f"``client.{path}``", "    "))
        if children:
            requester = "_AsyncRequester" if is_async else "_Requester"
            out.append(
                f"\n    def __init__(self, client: {requester}) -> None:\n        super().__init__(client)\n"
            )
            for child in children:
                child_cls = (
                    prefix
                    + "".join(x.title().replace("_", "") for x in child.split("."))
                    + "Resource"
                )
                out.append(f"        self.{child.rsplit('.', 1)[1]} = {child_cls}(client)\n")
        for method, op_id in sorted(tree[path].items()):
            op = ops[op_id]
            out.append("\n")
            if op_id in ("uploadKnowledge", "uploadAgentAvatar", "execComputerCommand"):
                out.append(_special(op, method, is_async))
            else:
                out.append(_method(op, method, is_async))
    roots = sorted(p for p in tree if "." not in p)
    out.append(f"\n\nclass {prefix}Resources:\n")
    out.append('    """The top-level resources, mixed into the client."""\n\n')
    requester = "_AsyncRequester" if is_async else "_Requester"
    classes = {
        root: f"{prefix}{''.join(x.title() for x in root.split('_'))}Resource" for root in roots
    }
    for root in roots:
        out.append(f"    {root}: {classes[root]}\n")
    out.append(_send_message(ops["sendMessage"], is_async))
    out.append("\n    def _init_resources(self) -> None:\n")
    out.append(f'        client = cast("{requester}", self)\n')
    for root in roots:
        out.append(f"        self.{root} = {classes[root]}(client)\n")
    text = "".join(out)
    names = [model_name(n) for n in doc["components"]["schemas"] if not n.startswith("Sse")]
    code = text.split("MODELS_IMPORT", 1)[1]
    used = sorted(m for m in names if re.search(r"\b" + m + r"\b", code))
    return text.replace("MODELS_IMPORT", "".join(f"    {m},\n" for m in used))


def _send_message(op: Op, is_async: bool) -> str:
    """``client.send_message(thread_id, content, ...)``: the operation users call most,
    on the client itself, with the same typed options as ``threads.messages.send``."""
    method = _method(op, "send", is_async)
    head, _, _ = method.partition(") -> ")
    options = head.split("*, ", 1)[1]
    assert options.startswith("content: str, ")
    options = options.removeprefix("content: str, ")
    names = re.findall(r"(?:^|, )(\w+): ", options)
    stream = "AsyncReplyStream" if is_async else "ReplyStream"
    doc = _doc(
        "Send a message; iterate the answer for the reply's events (``Meta``, ``Token``, ...,"
        " ``Done`` or ``Error``). Nothing is sent until you iterate it (or call ``text()``,"
        " ``final()``). Every send carries an ``Idempotency-Key`` (a fresh uuid4 unless"
        " given); a dropped connection is picked up again (see ``ReplyStream``).",
        "        ",
    )
    forward = ", ".join(f"{n}={n}" for n in names)
    return (
        f"\n    def send_message(self, thread_id: str, content: str = '', *, {options}) -> {stream}:\n{doc}"
        f"        return self.threads.messages.send(thread_id, content=content, {forward})\n"
    )


def _special(op: Op, name: str, is_async: bool) -> str:
    target = SPECIAL[op.id]
    doc = _doc(
        f"{op.summary} ({op.method} {op.path}, {op.id}); see the client's ``{target.lstrip('_')}``.",
        "        ",
    )
    if op.id == "uploadKnowledge":
        prefix, wait = ("async ", "await ") if is_async else ("", "")
        return (
            f"    {prefix}def {name}(self, file: Any, *, filename: str | None = None, title: str | None = None,"
            " agent_id: str | None = None, thread_id: str | None = None, idempotency_key: str | None = None) -> Document:\n"
            + doc
            + f"        return {wait}self._client._upload(file, filename=filename, title=title, agent_id=agent_id, thread_id=thread_id, idempotency_key=idempotency_key)\n"
        )
    if op.id == "uploadAgentAvatar":
        prefix, wait = ("async ", "await ") if is_async else ("", "")
        return (
            f"    {prefix}def {name}(self, agent_id: str, file: Any, *, filename: str | None = None,"
            " idempotency_key: str | None = None) -> Profile:\n"
            + doc
            + f"        return {wait}self._client._upload_avatar(agent_id, file, filename=filename, idempotency_key=idempotency_key)\n"
        )
    if op.id == "execComputerCommand":
        prefix, wait = ("async ", "await ") if is_async else ("", "")
        return (
            f"    {prefix}def {name}(self, agent_id: str, instance_id: str, command: str, *,"
            " idempotency_key: str | None = None) -> list[ExecEvent]:\n"
            + doc
            + f"        return {wait}self._client._exec_command(agent_id, instance_id, command, idempotency_key=idempotency_key)\n"
        )
    raise AssertionError(target)


def render_operations(doc: dict[str, Any]) -> str:
    ops = operations(doc)
    out = [HEADER, '"""operationId -> the client method that calls it (``client.<path>``)."""\n\n']
    out.append("OPERATIONS: dict[str, str] = {\n")
    for op in sorted(ops, key=lambda o: o.id):
        out.append(f'    "{op.id}": "{OPERATIONS[op.id]}",\n')
    out.append("}\n")
    return "".join(out)


# --- driver ------------------------------------------------------------------------


def render(doc: dict[str, Any]) -> dict[str, str]:
    """File name (under agentsvc_client/) -> its text, formatted by ruff."""
    files = {
        "models.py": render_models(doc),
        "_resources.py": render_resources(doc, is_async=False),
        "_async_resources.py": render_resources(doc, is_async=True),
        "_operations.py": render_operations(doc),
    }
    return {name: _format(text, name) for name, text in files.items()}


def _format(text: str, name: str) -> str:
    ruff = Path(sys.executable).parent / "ruff"
    config = HERE / "pyproject.toml"
    fixed = (
        subprocess.run(
            [
                str(ruff),
                "check",
                "--config",
                str(config),
                "--fix-only",
                "--quiet",
                "--stdin-filename",
                str(PACKAGE / name),
                "-",
            ],
            input=text,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        or text
    )
    return subprocess.run(
        [
            str(ruff),
            "format",
            "--config",
            str(config),
            "--quiet",
            "--stdin-filename",
            str(PACKAGE / name),
            "-",
        ],
        input=fixed,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _serve_document() -> dict[str, Any]:
    """Start ``agentsvc serve`` (memory storage, loopback) and read its document."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    agentsvc = str(Path(sys.executable).parent / "agentsvc")
    with tempfile.TemporaryDirectory() as data:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTSVC_")}
        env.update(AGENTSVC_STORAGE="memory", AGENTSVC_PORT=str(port), AGENTSVC_DATA_DIR=data)
        proc = subprocess.Popen(
            [agentsvc, "serve"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    with urllib.request.urlopen(
                        f"http://127.0.0.1:{port}/schema/openapi.json", timeout=2
                    ) as r:
                        return dict(json.load(r))
                except OSError:
                    if time.monotonic() > deadline or proc.poll() is not None:
                        raise
                    time.sleep(0.2)
        finally:
            proc.terminate()
            proc.wait(timeout=15)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--serve", action="store_true", help="start the service and read its document"
    )
    source.add_argument("--file", type=Path, help="a saved OpenAPI document")
    args = parser.parse_args()
    doc = _serve_document() if args.serve else json.loads(args.file.read_text())
    for name, text in render(doc).items():
        (PACKAGE / name).write_text(text)
        print(f"wrote {PACKAGE / name}")


if __name__ == "__main__":
    main()
