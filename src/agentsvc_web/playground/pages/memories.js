// Memories: the short facts the side bar's agent keeps (saved by the model with
// memory_save, or collected after turns). Browse them by scope and status,
// recall as the model's memory_search would (best first, with scores), delete
// one; and the agent's memory settings (tools offered, collection after turns).

import { h } from "../dom.js";
import { add, badge, check, dangerButton, enc, field, needAgent, onSubmit, section, select, status, submitRow, when } from "./formkit.js";

const SCOPES = ["agent", "thread", "user"];

function memoryItem(ctx, agent, m, gone) {
  return h(
    "li",
    { class: "card", "data-memory-id": m.id, "data-status": m.status },
    h(
      "div",
      { class: "row wrap" },
      m.key ? h("code", {}, m.key) : null,
      badge(m.scope, "info"),
      m.status === "active" ? null : badge(m.status, "warn"),
      m.score !== undefined ? h("span", { class: "muted small" }, `score ${m.score}`) : null,
      h("span", { class: "muted small" }, `${m.scope_id ? `${m.scope_id} · ` : ""}${when(m.created_at)}`),
    ),
    h("p", { class: "memory-content" }, m.content),
    dangerButton("Delete", ctx.guarded(async () => {
      await ctx.api.delete(`/api/agents/${enc(agent.id)}/memories/${enc(m.id)}`);
      await gone();
    }), { "data-delete": m.id }),
  );
}

function settingsPart(ctx, agent, config) {
  const enabled = check("offer the memory tools (memory_save, memory_search) to the model", { checked: config.enabled, "data-field": "enabled" });
  const collect = check("collect facts after each completed turn (a model call per turn)", { checked: config.auto_collect, "data-field": "autoCollect" });
  const scopes = SCOPES.map((s) => check(s, { checked: config.scopes.includes(s), value: s }));
  const max = h("input", { type: "number", min: 1, max: 10000, value: config.max_memories, "data-field": "maxMemories" });
  const saved = status({ id: "memory-settings-saved" });
  const form = h(
    "form",
    { class: "stack", id: "memory-settings" },
    enabled.wrap,
    collect.wrap,
    h("fieldset", {}, h("legend", {}, "Scopes the tools may use"), scopes.map((s) => s.wrap)),
    field("Active memories at most", max),
    submitRow("Save memory settings", saved),
  );
  onSubmit(form, ctx, async () => {
    const stored = await ctx.api.request("PUT", `/api/agents/${enc(agent.id)}/memory`, {
      enabled: enabled.input.checked,
      autoCollect: collect.input.checked,
      scopes: scopes.filter((s) => s.input.checked).map((s) => s.input.value),
      maxMemories: Number(max.value),
    });
    saved.textContent = `saved: tools ${stored.enabled ? "on" : "off"}, collection ${stored.auto_collect ? "on" : "off"}`;
  });
  return section("Settings", form);
}

function browsePart(ctx, agent) {
  const scope = select([["", "every scope"], ...SCOPES.map((s) => [s, s])], "", { "aria-label": "Scope", id: "memory-scope" });
  const state = select([["", "active and superseded"], ["active", "active"], ["superseded", "superseded"]], "", {
    "aria-label": "Status", id: "memory-status",
  });
  const list = h("ul", { class: "plain cards", id: "memory-list" });
  const more = h("button", { type: "button", hidden: true, id: "memory-more" }, "More");
  const said = status({ id: "memory-count" });
  let cursor = null;
  let shown = 0;
  const load = async (fresh) => {
    const q = new URLSearchParams({ limit: "50" });
    if (scope.value) q.set("scope", scope.value);
    if (state.value) q.set("status", state.value);
    if (cursor && !fresh) q.set("cursor", cursor);
    const page = await ctx.api.get(`/api/agents/${enc(agent.id)}/memories?${q}`);
    const items = page.memories.map((m) => memoryItem(ctx, agent, m, () => load(true)));
    if (fresh) {
      shown = 0;
      list.replaceChildren(...items); // in one step: the list is never empty in between
    } else {
      list.append(...items);
    }
    shown += page.memories.length;
    cursor = page.nextCursor;
    more.hidden = !cursor;
    said.textContent = shown ? `${shown} memor${shown === 1 ? "y" : "ies"}${cursor ? " so far" : ""}` : "No memory here yet.";
  };
  const reload = ctx.guarded(() => load(true));
  scope.addEventListener("change", reload);
  state.addEventListener("change", reload);
  more.addEventListener("click", ctx.guarded(() => load(false)));
  return { el: section("Browse", h("div", { class: "row" }, scope, state, said), list, more), load };
}

function recallPart(ctx, agent, reloadBrowse) {
  const query = h("input", { type: "search", required: true, maxlength: 1000, placeholder: "What does it remember about...", "data-field": "recall" });
  const topK = h("input", { type: "number", min: 1, max: 50, value: 5, "aria-label": "Results at most" });
  const scope = select([["", "every scope"], ...SCOPES.map((s) => [s, s])], "", { "aria-label": "Recall scope" });
  const said = status({ id: "memory-recall-status" });
  const found = h("ol", { class: "plain cards", id: "memory-recalled" });
  const form = h(
    "form",
    { class: "stack", id: "memory-recall", role: "search" },
    field("Recall", query),
    h("div", { class: "row" }, scope, topK, h("button", { type: "submit" }, "Recall"), said),
  );
  const run = async () => {
    const body = { query: query.value, topK: Number(topK.value) || 5 };
    if (scope.value) body.scope = scope.value;
    const answer = await ctx.api.post(`/api/agents/${enc(agent.id)}/memory`, body);
    said.textContent = `${answer.memories.length} found, best first`;
    const gone = async () => {
      await run();
      await reloadBrowse();
    };
    found.replaceChildren(...answer.memories.map((m) => memoryItem(ctx, agent, m, gone)));
  };
  onSubmit(form, ctx, run);
  return section("Recall as the model would", form, found);
}

export default {
  id: "memories",
  title: "Memories",
  async render(root, ctx) {
    add(root, h("h2", {}, "Memories"));
    const agent = ctx.agent();
    if (!agent) {
      add(root, needAgent("see what it remembers"));
      return;
    }
    const config = await ctx.api.get(`/api/agents/${enc(agent.id)}/memory`);
    const browse = browsePart(ctx, agent);
    add(root, 
      h("p", { class: "muted small" }, `What ${agent.name} remembers. The model finds these with memory_search; nothing is put in its prompt by itself.`),
      config.enabled ? null : h("p", { class: "small", id: "memory-off" }, "The memory tools are off for this agent: the model neither saves nor searches."),
      browse.el,
      recallPart(ctx, agent, () => browse.load(true)),
      settingsPart(ctx, agent, config),
    );
    await browse.load(true);
  },
};
