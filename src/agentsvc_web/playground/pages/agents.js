// Agents: every agent of the organization, and all the settings of the one
// open here (the side bar's by default): name, description, system prompt,
// default model (from GET /api/models), tool profile in use, approval timeout,
// where its computer runs, and delete. Tool profiles are edited on the Tools
// page; MCP servers, knowledge, memories and plans on theirs.

import { h } from "../dom.js";
import { otherSettings } from "./agent_settings.js";
import { add, badge, check, dangerButton, enc, field, names, onSubmit, section, select, status, submitRow, when } from "./formkit.js";

let openId = null; // the agent open on this page (kept while the tab lives)

async function listAgents(ctx) {
  return ctx.api.get("/api/agents");
}

/** The model choices: the catalogue's concrete ids, the agent's own kept first. */
function modelOptions(models, current) {
  const ids = models.filter((m) => !String(m.id).includes("*")).map((m) => [m.id, `${m.id} (${m.family})`]);
  if (current && !ids.some(([id]) => id === current)) ids.unshift([current, `${current} (as set)`]);
  return ids;
}

function settingsForm(ctx, agent, models, done) {
  const name = h("input", { value: agent.name, required: true, maxlength: 256, "data-field": "name" });
  const description = h("textarea", { rows: 2, maxlength: 10000, "data-field": "description" }, agent.description ?? "");
  const preamble = h("textarea", { rows: 6, maxlength: 200000, "data-field": "stablePreamble" }, agent.stable_preamble ?? "");
  const model = select(modelOptions(models, agent.default_model), agent.default_model, { "data-field": "defaultModel" });
  const otherModel = h("input", { placeholder: "another model id (overrides the list)", maxlength: 200, "data-field": "otherModel" });
  const profiles = Object.keys(agent.tool_profiles ?? {});
  const profile = select(
    [["", "none: every tool"], ...profiles.map((p) => [p, p])],
    agent.default_profile,
    { "data-field": "defaultProfile" },
  );
  const timeout = h("input", {
    type: "number", min: 1, max: 10080, value: agent.approval_timeout_minutes ?? 60, "data-field": "approvalTimeoutMinutes",
  });
  const runtime = select(
    [["", "default (native)"], ["native", "native: the local sandbox"], ["alternative", "alternative: the hosted sandbox"]],
    agent.runtime_provider,
    { "data-field": "runtimeProvider" },
  );
  const saved = status({ id: "agent-page-saved" });
  const form = h(
    "form",
    { class: "stack", id: "agent-settings", "aria-label": "Agent settings" },
    field("Name", name),
    field("Description", description),
    field("System prompt", preamble),
    field("Default model", model, "From the models this service routes (GET /api/models)."),
    field("Other model id", otherModel),
    field("Tool profile used by default", profile, profiles.length ? null : "No profile yet: the Tools page makes them."),
    field("Minutes a tool call waits for approval", timeout),
    field("Where its computer and code sessions run", runtime),
    submitRow("Save settings", saved),
  );
  onSubmit(form, ctx, async () => {
    const body = {
      name: name.value.trim(),
      description: description.value,
      stablePreamble: preamble.value,
      defaultModel: otherModel.value.trim() || model.value,
      defaultProfile: profile.value || null,
      approvalTimeoutMinutes: Number(timeout.value),
      runtimeProvider: runtime.value || null,
    };
    saved.textContent = "saving...";
    try {
      const updated = await ctx.api.patch(`/api/agents/${enc(agent.id)}`, body);
      saved.textContent = `saved at ${new Date(updated.updated_at).toLocaleTimeString()}`;
      await done(updated);
    } catch (err) {
      saved.textContent = "not saved";
      throw err;
    }
  });
  return form;
}

async function computerPart(ctx, agent) {
  const config = await ctx.api.get(`/api/agents/${enc(agent.id)}/computer`);
  const enabled = check("give the agent a computer (a sandbox it runs commands in)", { checked: config.enabled });
  const provider = select(
    [["", `default (${config.effective_provider})`], ...config.available_providers.map((p) => [p, p])],
    config.provider,
  );
  const network = select([["none", "none: no route out"], ["allowlist", "allowlist: HTTP(S) to the allowed hosts"]], config.network);
  const hosts = h("input", { value: config.allowed_hosts.join(", "), placeholder: "pypi.org, files.pythonhosted.org" });
  const saved = status();
  const form = h(
    "form",
    { class: "stack", id: "agent-computer", "aria-label": "Computer" },
    enabled.wrap,
    field("Provider", provider),
    field("Network", network),
    field("Allowed hosts (with allowlist)", hosts),
    h(
      "p",
      { class: "muted small" },
      `Runs on ${config.effective_provider}; ${config.memory_mb} MB, commands up to ${config.exec_timeout_s} s, `
        + `${config.persistent ? "kept" : "not kept"} per ${config.scope}.`,
    ),
    submitRow("Save computer", saved),
  );
  onSubmit(form, ctx, async () => {
    const body = { enabled: enabled.input.checked, network: network.value, allowedHosts: names(hosts.value) };
    if (provider.value) body.provider = provider.value;
    const stored = await ctx.api.request("PUT", `/api/agents/${enc(agent.id)}/computer`, body);
    saved.textContent = `saved: ${stored.enabled ? "on" : "off"}, ${stored.effective_provider}`;
  });
  return section("Computer", form);
}

function agentList(ctx, agents, current, open) {
  return h(
    "ul",
    { class: "plain mlist", id: "agent-page-list", "aria-label": "Agents" },
    agents.map((a) =>
      h(
        "li",
        { "data-agent-id": a.id, class: a.id === current?.id ? "current" : null },
        h(
          "button",
          { type: "button", class: "linkish", "aria-current": a.id === current?.id ? "true" : null, onclick: ctx.guarded(() => open(a.id)) },
          a.name,
        ),
        " ",
        h("span", { class: "muted small" }, `${a.default_model} · made ${when(a.created_at)}`),
        a.template ? badge(`from ${a.template.id}`, "info") : null,
      ),
    ),
  );
}

export default {
  id: "agents",
  title: "Agents",
  async render(root, ctx) {
    const [agents, models] = await Promise.all([listAgents(ctx), ctx.api.get("/api/models")]);
    const known = (id) => agents.some((a) => a.id === id);
    if (!known(openId)) openId = known(ctx.agent()?.id) ? ctx.agent().id : agents.at(-1)?.id ?? null;
    const agent = openId ? await ctx.api.get(`/api/agents/${enc(openId)}`) : null;
    const open = async (id) => {
      openId = id;
      await ctx.refresh();
    };

    const newName = h("input", { placeholder: "New agent's name", required: true, maxlength: 256, "aria-label": "New agent's name" });
    const create = h("form", { class: "row", id: "agent-page-create" }, newName, h("button", { type: "submit" }, "Create agent"));
    onSubmit(create, ctx, async () => {
      const made = await ctx.api.post("/api/agents", { name: newName.value.trim(), defaultModel: "local" });
      await open(made.id);
    });

    add(root, 
      h("h2", {}, "Agents"),
      h("p", { class: "muted small" }, "Changes here reach the side bar when it loads agents again (sign in, or reload the page)."),
      create,
      agents.length ? agentList(ctx, agents, agent, open) : h("p", { class: "muted" }, "No agent yet."),
    );
    if (!agent) return;
    const profiles = Object.entries(agent.tool_profiles ?? {});
    add(root, 
      section(
        `Settings of ${agent.name}`,
        h("p", { class: "muted small" }, `id ${agent.id} · updated ${when(agent.updated_at)}`),
        settingsForm(ctx, agent, models, async () => ctx.refresh()),
      ),
      section(
        "Tools",
        h(
          "p",
          {},
          profiles.length
            ? `${profiles.length} tool profile(s): ${profiles.map(([n, p]) => `${n} (${p.tools.length} tools)`).join(", ")}. `
            : "No tool profile: the model is offered every tool the agent has. ",
          h("a", { href: "#manage/tools" }, "Edit tools and profiles"),
          " · ",
          h("a", { href: "#manage/mcps" }, "MCP servers"),
          " · ",
          h("a", { href: "#manage/integrations" }, "Integrations"),
        ),
      ),
      await computerPart(ctx, agent),
      await otherSettings(ctx, agent),
      section(
        "Delete",
        h("p", { class: "muted small" }, "Its threads stay; its configurations go with it."),
        dangerButton("Delete agent", ctx.guarded(async () => {
          await ctx.api.delete(`/api/agents/${enc(agent.id)}`);
          openId = null;
          await ctx.refresh();
        }), { id: "agent-delete" }),
      ),
    );
  },
};
