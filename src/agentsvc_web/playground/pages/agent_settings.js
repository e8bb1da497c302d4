// The Agents page's other settings, each a configuration the API keeps per
// agent behind GET/PUT /api/agents/{id}/<area>: web tools, compaction, group
// threads (multiplayer) and the credential resolver (bring your own key). One
// form per area, built from a list of fields: the answer's snake_case name
// (the body's is its camelCase), and what kind of control edits it.

import { h } from "../dom.js";
import { camel, check, enc, field, names, onSubmit, section, select, status, submitRow } from "./formkit.js";

const AREAS = [
  {
    area: "web",
    title: "Web tools",
    note: "web_fetch reads a page; web_search needs the service's search provider.",
    fields: [
      ["fetch_enabled", "bool", "offer web_fetch"],
      ["search_enabled", "bool", "offer web_search"],
      ["allowed_domains", "list", "Only these domains (blank: any)"],
      ["blocked_domains", "list", "Never these domains"],
      ["max_results", "number", "Search results at most"],
      ["fetch_timeout_ms", "number", "Fetch timeout in milliseconds"],
    ],
  },
  {
    area: "compaction",
    title: "Compaction",
    note: "Long threads are summarised before they outgrow the model's context.",
    fields: [
      ["enabled", "bool", "compact long threads"],
      ["alpha_trigger_tokens", "number", "Anthropic-style models: compact past this many tokens"],
      ["beta_compact_threshold", "number", "OpenAI-style models: compact past this many tokens"],
    ],
  },
  {
    area: "multiplayer",
    title: "Group threads",
    note: "Threads with several people in them, and when the agent answers there.",
    fields: [
      ["enabled", "bool", "allow threads with participants"],
      ["respond_to", ["all", "mentions", "owners"], "Answers"],
      ["display_name", "optional", "Name shown to participants (blank: the agent's)"],
      ["max_participants", "number", "Participants at most"],
    ],
  },
  {
    area: "credentials",
    title: "Credential resolver (bring your own key)",
    note: "Before each reply the service asks this address for the user's model key.",
    fields: [
      ["enabled", "bool", "ask the resolver for each reply"],
      ["resolver_url", "text", "Resolver URL (https)"],
      ["timeout_ms", "number", "Timeout in milliseconds"],
    ],
  },
];

function control(kind, value, label) {
  if (kind === "bool") return check(label, { checked: Boolean(value) });
  if (Array.isArray(kind)) return { wrap: null, input: select(kind.map((k) => [k, k]), value) };
  if (kind === "list") return { wrap: null, input: h("input", { value: (value ?? []).join(", ") }) };
  if (kind === "number") return { wrap: null, input: h("input", { type: "number", value: value ?? "" }) };
  return { wrap: null, input: h("input", { value: value ?? "" }) };
}

function read(kind, box) {
  if (kind === "bool") return box.checked;
  if (kind === "list") return names(box.value);
  if (kind === "number") return box.value === "" ? undefined : Number(box.value);
  if (kind === "optional") return box.value.trim() || null;
  if (kind === "text") return box.value.trim();
  return box.value;
}

async function areaForm(ctx, agent, spec) {
  const path = `/api/agents/${enc(agent.id)}/${spec.area}`;
  const stored = await ctx.api.get(path);
  const controls = spec.fields.map(([key, kind, label]) => {
    const c = control(kind, stored[key], label);
    c.input.setAttribute("data-field", key);
    return c.wrap ?? field(label, c.input);
  });
  const saved = status();
  const form = h(
    "form",
    { class: "stack", "data-area": spec.area, "aria-label": spec.title },
    h("p", { class: "muted small" }, spec.note),
    controls,
    submitRow(`Save ${spec.title.split(" (")[0].toLowerCase()}`, saved),
  );
  onSubmit(form, ctx, async () => {
    const body = {};
    for (const [key, kind] of spec.fields) {
      const box = form.querySelector(`[data-field="${key}"]`);
      const value = read(kind, box);
      if (value !== undefined) body[camel(key)] = value;
    }
    saved.textContent = "saving...";
    try {
      await ctx.api.request("PUT", path, body);
      saved.textContent = "saved";
    } catch (err) {
      saved.textContent = "not saved";
      throw err;
    }
  });
  return h("details", { class: "area" }, h("summary", {}, spec.title), form);
}

/** The agent's other settings, one folded form per area. */
export async function otherSettings(ctx, agent) {
  const forms = await Promise.all(AREAS.map((spec) => areaForm(ctx, agent, spec)));
  return section("More settings", forms);
}
