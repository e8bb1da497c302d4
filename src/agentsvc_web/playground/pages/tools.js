// Tools: the organization's webhook tools (its own HTTP endpoints a model may
// call: define, try with arguments, delete), which of them the side bar's agent
// may use (delegation: none by default), and that agent's tool profiles
// (tool_profiles.js). MCP and database tools come from the MCP servers and
// Integrations pages; here they show up in the agent's list and its profiles.

import { h, pretty } from "../dom.js";
import { add, badge, check, dangerButton, enc, field, onSubmit, parseJson, section, select, status } from "./formkit.js";
import { profilesPart } from "./tool_profiles.js";

function createForm(ctx) {
  const name = h("input", { required: true, maxlength: 64, pattern: "[A-Za-z0-9_\\-]+", placeholder: "lookup_order", "data-field": "name" });
  const url = h("input", { type: "url", required: true, placeholder: "https://tools.example.com/orders", "data-field": "url" });
  const description = h("input", { maxlength: 1000, placeholder: "What the model reads to decide to call it", "data-field": "description" });
  const method = select([["POST", "POST"], ["PUT", "PUT"], ["PATCH", "PATCH"]], "POST", { "data-field": "method" });
  const parameters = h(
    "textarea",
    { rows: 3, "data-field": "parameters" },
    '{"type": "object", "properties": {"orderId": {"type": "string"}}, "required": ["orderId"]}',
  );
  const headers = h("textarea", { rows: 2, placeholder: '{"X-Api-Key": "..."} (write-only)', "data-field": "headers" });
  const timeout = h("input", { type: "number", min: 100, max: 60000, placeholder: "5000", "data-field": "timeoutMs" });
  const approval = select([["never", "never: runs at once"], ["always", "always: each call waits for a person"]], "never", { "data-field": "approval" });
  const form = h(
    "form",
    { class: "stack", id: "tool-create", "aria-label": "New webhook tool" },
    field("Name the model calls", name),
    field("URL it calls (signed, through the outbound guard)", url),
    field("Description", description),
    field("Method", method),
    field("Parameters (JSON Schema)", parameters),
    field("Headers (JSON)", headers),
    field("Timeout in milliseconds", timeout),
    field("Approval", approval),
    h("div", {}, h("button", { type: "submit" }, "Create tool")),
  );
  onSubmit(form, ctx, async () => {
    const body = {
      name: name.value.trim(),
      url: url.value.trim(),
      description: description.value,
      method: method.value,
      parameters: parseJson(parameters.value, "Parameters", undefined),
      approval: approval.value,
    };
    const hd = parseJson(headers.value, "Headers", null);
    if (hd) body.headers = hd;
    if (timeout.value) body.timeoutMs = Number(timeout.value);
    await ctx.api.post("/api/tools", body);
    await ctx.refresh();
  });
  return form;
}

/** "Try it": POST /api/tools/execute with arguments typed as JSON. */
function tryForm(ctx, tool) {
  const args = h("textarea", { rows: 2, "aria-label": `Arguments for ${tool.name}`, "data-field": "arguments" }, "{}");
  const out = h("pre", { class: "result", "aria-live": "polite", "data-result": tool.id });
  const form = h(
    "form",
    { class: "stack", "data-try": tool.id },
    args,
    h("div", {}, h("button", { type: "submit" }, "Call it now")),
    out,
  );
  onSubmit(form, ctx, async () => {
    out.textContent = "calling...";
    const body = { name: tool.name, arguments: parseJson(args.value, "Arguments", {}) };
    const agent = ctx.agent();
    if (agent) body.agentId = agent.id;
    const r = await ctx.api.post("/api/tools/execute", body);
    out.textContent = r.ok
      ? `${r.status_code} in ${Math.round(r.duration_ms)} ms\n${pretty(r.result)}`
      : `failed${r.status_code ? ` (${r.status_code})` : ""}: ${r.error ?? pretty(r.result)}`;
  });
  return form;
}

function toolCard(ctx, tool) {
  return h(
    "li",
    { class: "card", "data-tool-id": tool.id },
    h(
      "div",
      { class: "row wrap" },
      h("strong", {}, tool.name),
      h("span", { class: "muted small" }, `${tool.method} ${tool.url}`),
      tool.approval === "always" ? badge("needs approval", "warn") : null,
      tool.has_headers ? badge("headers set", "info") : null,
    ),
    tool.description ? h("p", { class: "small" }, tool.description) : null,
    h("details", {}, h("summary", {}, "Parameters and a test call"), h("pre", {}, pretty(tool.parameters)), tryForm(ctx, tool)),
    h("div", { class: "row" }, dangerButton("Delete", ctx.guarded(async () => {
      await ctx.api.delete(`/api/tools/${enc(tool.id)}`);
      await ctx.refresh();
    }), { "data-delete": tool.id })),
  );
}

async function delegationPart(ctx, agent, tools) {
  const delegated = await ctx.api.get(`/api/agents/${enc(agent.id)}/delegated`);
  const on = new Set(delegated.tool_ids);
  const boxes = tools.map((t) => check(t.name, { checked: on.has(t.id), value: t.id, "data-delegate": t.id }));
  const saved = status({ id: "delegation-saved" });
  const form = h(
    "form",
    { class: "stack", id: "tool-delegation" },
    tools.length ? boxes.map((b) => b.wrap) : h("span", { class: "muted small" }, "The organization has no webhook tool yet."),
    h("div", { class: "row" }, h("button", { type: "submit", disabled: !tools.length }, "Save delegation"), saved),
  );
  onSubmit(form, ctx, async () => {
    const toolIds = boxes.filter((b) => b.input.checked).map((b) => b.input.value);
    await ctx.api.request("PUT", `/api/agents/${enc(agent.id)}/delegated`, { toolIds });
    await ctx.refresh();
  });
  return section(`Webhook tools delegated to ${agent.name}`, form);
}

export default {
  id: "tools",
  title: "Tools",
  async render(root, ctx) {
    const tools = await ctx.api.get("/api/tools");
    const picked = ctx.agent();
    const agent = picked ? await ctx.api.get(`/api/agents/${enc(picked.id)}`) : null; // its profiles as stored now
    add(root, 
      h("h2", {}, "Tools"),
      section(
        "Webhook tools",
        h("p", { class: "muted small" }, "The organization's own HTTP endpoints. A new tool reaches no agent until it is delegated."),
        tools.length
          ? h("ul", { class: "plain cards", id: "tool-list" }, tools.map((t) => toolCard(ctx, t)))
          : h("p", { class: "muted" }, "No webhook tool yet."),
        h("details", {}, h("summary", {}, "New webhook tool"), createForm(ctx)),
      ),
    );
    if (!agent) {
      add(root, h("p", { class: "muted" }, "Pick an agent in the side bar to delegate tools and edit its tool profiles."));
      return;
    }
    add(root, await delegationPart(ctx, agent, tools), await profilesPart(ctx, agent));
  },
};
