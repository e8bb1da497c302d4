// Memories: the short facts the side bar's agent keeps (saved by the model with
// memory_save, collected after turns, or added here by hand). Browse them by
// scope and status, add one, edit one's text, recall as the model's
// memory_search would (best first, with scores), delete one; and the agent's
// memory settings (tools offered, collection after turns).

import { h } from "../dom.js";
import { add, badge, check, dangerButton, enc, field, needAgent, onSubmit, section, select, status, submitRow, when } from "./formkit.js";

const SCOPES = ["agent", "thread", "user"];

/** The memory's text, and an Edit button that turns it into a form (PATCH). */
function contentPart(ctx, agent, m, changed) {
  const text = h("p", { class: "memory-content" }, m.content);
  const box = h("textarea", { rows: 3, required: true, maxlength: 2000, "data-field": "content" }, m.content);
  const form = h(
    "form",
    { class: "stack", hidden: true, "data-edit-form": m.id, "aria-label": "Edit the memory" },
    box,
    h("div", { class: "row" }, h("button", { type: "submit" }, "Save"), h("button", { type: "button", "data-cancel": m.id, onclick: () => show(false) }, "Cancel")),
  );
  const edit = h("button", { type: "button", "data-edit": m.id, onclick: () => show(true) }, "Edit");
  function show(editing) {
    form.hidden = !editing;
    text.hidden = editing;
    edit.hidden = editing;
    if (editing) box.focus();
  }
  onSubmit(form, ctx, async () => {
    await ctx.api.patch(`/api/agents/${enc(agent.id)}/memories/${enc(m.id)}`, { content: box.value });
    await changed();
  });
  return { text, form, edit };
}

function memoryItem(ctx, agent, m, gone) {
  const content = contentPart(ctx, agent, m, gone);
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
    content.text,
    content.form,
    h("div", { class: "row" }, content.edit, dangerButton("Delete", ctx.guarded(async () => {
      await ctx.api.delete(`/api/agents/${enc(agent.id)}/memories/${enc(m.id)}`);
      await gone();
    }), { "data-delete": m.id })),
  );
}

function addPart(ctx, agent, reloadBrowse) {
  const content = h("textarea", { rows: 2, required: true, maxlength: 2000, placeholder: "The guest prefers a window seat", "data-field": "content" });
  const key = h("input", { maxlength: 100, placeholder: "optional: a subject (seat); a new fact of it replaces this one", "data-field": "key" });
  const scope = select(SCOPES.map((s) => [s, s]), "agent", { "data-field": "scope" });
  const scopeId = h("input", { maxlength: 200, placeholder: "the thread's or the user's id", disabled: true, "data-field": "scopeId" });
  scope.addEventListener("change", () => {
    scopeId.disabled = scope.value === "agent";
    scopeId.required = !scopeId.disabled;
  });
  const said = status({ id: "memory-add-status" });
  const form = h(
    "form",
    { class: "stack", id: "memory-add" },
    field("Fact", content),
    field("Key", key),
    h("div", { class: "row" }, field("Scope", scope), field("Thread or user id", scopeId)),
    submitRow("Add memory", said),
  );
  onSubmit(form, ctx, async () => {
    const body = { content: content.value, scope: scope.value };
    if (key.value.trim()) body.key = key.value;
    if (scope.value !== "agent") body.scopeId = scopeId.value.trim();
    const m = await ctx.api.post(`/api/agents/${enc(agent.id)}/memories`, body);
    said.textContent = `kept in the ${m.scope} scope`;
    content.value = "";
    key.value = "";
    await reloadBrowse();
  });
  return section("Add memory", form);
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
      addPart(ctx, agent, () => browse.load(true)),
      recallPart(ctx, agent, () => browse.load(true)),
      settingsPart(ctx, agent, config),
    );
    await browse.load(true);
  },
};
