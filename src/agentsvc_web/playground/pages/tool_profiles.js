// The Tools page's part for the side bar's agent: which tools it has (MCP,
// integrations, delegated webhook tools, the built-in ones), and its tool
// profiles (named sets of those tools; the default one decides what the model
// is offered when a thread picks none). Saved with PATCH /api/agents/{id}.

import { h } from "../dom.js";
import { check, dangerButton, enc, field, names, onSubmit, section, status } from "./formkit.js";

const BUILT_IN = [
  "knowledge_search", "memory_save", "memory_search", "plan_create", "plan_update",
  "todo_add", "todo_update", "web_fetch", "web_search",
];
const DB_TOOLS = ["list_tables", "describe_table", "query"];

/** Every server-side tool name the agent may be offered, by where it comes from. */
export async function agentToolNames(ctx, agent) {
  const id = enc(agent.id);
  const [mcps, integrations, delegated] = await Promise.all([
    ctx.api.get(`/api/agents/${id}/mcps`),
    ctx.api.get(`/api/agents/${id}/integrations`),
    ctx.api.get(`/api/agents/${id}/delegated`),
  ]);
  return [
    ["MCP servers", mcps.flatMap((a) => a.effectiveTools.map((t) => `${a.server.slug}__${t}`))],
    ["integrations", integrations.flatMap((i) => DB_TOOLS.map((t) => `db_${i.slug}__${t}`))],
    ["webhook tools", delegated.tools.map((t) => t.name)],
    ["built in", BUILT_IN],
  ];
}

function profileForm(ctx, agent, known, name, profile, save) {
  const isNew = name === null;
  const chosen = new Set(profile?.tools ?? []);
  const nameInput = h("input", { value: name ?? "", required: true, maxlength: 100, readonly: !isNew, "data-field": "profile-name" });
  const description = h("input", { value: profile?.description ?? "", maxlength: 1000, "data-field": "profile-description" });
  const boxes = [];
  const groups = known.map(([group, tools]) =>
    h(
      "fieldset",
      { class: "tool-group" },
      h("legend", {}, group),
      tools.length
        ? tools.map((t) => {
            const c = check(t, { checked: chosen.has(t), value: t, "data-tool": t });
            boxes.push(c.input);
            return c.wrap;
          })
        : h("span", { class: "muted small" }, "none"),
    ),
  );
  const listed = new Set(known.flatMap(([, tools]) => tools));
  const other = h("input", {
    value: [...chosen].filter((t) => !listed.has(t)).join(", "),
    placeholder: "other tool names, comma separated",
    "data-field": "profile-other",
  });
  const saved = status();
  const form = h(
    "form",
    { class: "stack card", "data-profile": name ?? "" , "aria-label": isNew ? "New tool profile" : `Tool profile ${name}` },
    field("Profile name", nameInput),
    field("Description", description),
    groups,
    field("Other tools", other),
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit" }, isNew ? "Add profile" : "Save profile"),
      isNew ? null : dangerButton("Remove profile", ctx.guarded(() => save(name, null)), { "data-remove-profile": name }),
      saved,
    ),
  );
  onSubmit(form, ctx, async () => {
    const tools = [...boxes.filter((b) => b.checked).map((b) => b.value), ...names(other.value)];
    await save(nameInput.value.trim(), { tools, description: description.value });
    saved.textContent = "saved";
  });
  return form;
}

/** The agent's tools and profiles (a section of the Tools page). */
export async function profilesPart(ctx, agent) {
  const known = await agentToolNames(ctx, agent);
  const profiles = agent.tool_profiles ?? {};
  const save = async (name, profile) => {
    const next = { ...profiles };
    if (profile) next[name] = profile;
    else delete next[name];
    const body = { toolProfiles: Object.keys(next).length ? next : null };
    if (!profile && agent.default_profile === name) body.defaultProfile = null;
    await ctx.api.patch(`/api/agents/${enc(agent.id)}`, body);
    await ctx.refresh();
  };
  return section(
    `Tools and profiles of ${agent.name}`,
    h(
      "ul",
      { class: "plain", id: "agent-tools" },
      known.map(([group, tools]) =>
        h("li", {}, h("strong", {}, `${group}: `), tools.length ? tools.map((t) => h("code", { class: "chip" }, t)) : h("span", { class: "muted" }, "none"))),
    ),
    h(
      "p",
      { class: "muted small" },
      "A profile offers the model only its tools; the default profile (set on the Agents page) applies when a thread picks none. Without profiles the model is offered every tool above.",
    ),
    Object.entries(profiles).map(([name, p]) => profileForm(ctx, agent, known, name, p, save)),
    h("details", { id: "profile-new" }, h("summary", {}, "New tool profile"), profileForm(ctx, agent, known, null, null, save)),
  );
}
