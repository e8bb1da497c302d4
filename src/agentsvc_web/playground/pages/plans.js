// Plans: a thread's plans (todos in order, with "depends on" edges), as the
// model keeps them with its plan tools. Pick a thread of the side bar's agent;
// make a plan, add todos, move them through their statuses, say which todo waits
// on which, see what is ready to do next; and the agent's plan settings.

import { h } from "../dom.js";
import { add, check, dangerButton, enc, field, needAgent, onSubmit, section, select, status, submitRow, when } from "./formkit.js";

const PLAN_STATUSES = ["draft", "approved", "in_progress", "completed", "cancelled"];
const TODO_STATUSES = ["pending", "in_progress", "done", "skipped"];
const pairs = (xs) => xs.map((x) => [x, x.replace("_", " ")]);

let threadId = null; // the thread open on this page

function todoItem(ctx, plan, todo, byId, reload) {
  const path = `/api/plans/${enc(plan.id)}/todos/${enc(todo.id)}`;
  const state = select(pairs(TODO_STATUSES), todo.status, { "aria-label": `Status of ${todo.content}`, "data-todo-status": todo.id });
  state.addEventListener("change", ctx.guarded(async () => {
    await ctx.api.patch(path, { status: state.value });
    await reload();
  }));
  const others = plan.todos.filter((t) => t.id !== todo.id && !todo.blocked_by.includes(t.id));
  const dep = select([["", "waits on..."], ...others.map((t) => [t.id, t.content])], "", {
    "aria-label": `${todo.content} waits on`, "data-todo-dep": todo.id,
  });
  dep.addEventListener("change", ctx.guarded(async () => {
    if (!dep.value) return;
    await ctx.api.post(`${path}/deps`, { dependsOn: dep.value });
    await reload();
  }));
  const waits = todo.blocked_by.map((id) =>
    h(
      "button",
      {
        type: "button",
        class: "chip",
        title: "Remove this dependency",
        "aria-label": `Stop waiting on ${byId.get(id)?.content ?? id}`,
        onclick: ctx.guarded(async () => {
          await ctx.api.delete(`${path}/deps?${new URLSearchParams({ dependsOn: id })}`);
          await reload();
        }),
      },
      `waits on: ${byId.get(id)?.content ?? id} ×`,
    ),
  );
  return h(
    "li",
    { class: `todo status-${todo.status}`, "data-todo-id": todo.id, "data-status": todo.status },
    h("div", { class: "row wrap" }, h("span", { class: "todo-content" }, todo.content), state, others.length ? dep : null,
      dangerButton("Delete", ctx.guarded(async () => {
        await ctx.api.delete(path);
        await reload();
      }), { "data-todo-delete": todo.id })),
    waits.length ? h("div", { class: "row wrap" }, waits) : null,
  );
}

async function planCard(ctx, plan, reload) {
  const ready = await ctx.api.get(`/api/plans/${enc(plan.id)}/ready?include=blocked`);
  const byId = new Map(plan.todos.map((t) => [t.id, t]));
  const state = select(pairs(PLAN_STATUSES), plan.status, { "aria-label": `Status of plan ${plan.title}`, "data-plan-status": plan.id });
  state.addEventListener("change", ctx.guarded(async () => {
    await ctx.api.patch(`/api/plans/${enc(plan.id)}`, { status: state.value });
    await reload();
  }));
  const adds = h("textarea", { rows: 2, placeholder: "one todo a line", "aria-label": `New todos of ${plan.title}`, "data-field": "todos" });
  const add = h("form", { class: "stack", "data-todo-add": plan.id }, adds, h("div", {}, h("button", { type: "submit" }, "Add todos")));
  onSubmit(add, ctx, async () => {
    const todos = adds.value.split("\n").map((s) => s.trim()).filter(Boolean).map((content) => ({ content }));
    if (!todos.length) return;
    await ctx.api.post(`/api/plans/${enc(plan.id)}/todos`, { todos });
    await reload();
  });
  return h(
    "li",
    { class: "card", "data-plan-id": plan.id },
    h("div", { class: "row wrap" }, h("strong", {}, plan.title), state, h("span", { class: "muted small" }, `made ${when(plan.created_at)}`)),
    plan.todos.length
      ? h("ol", { class: "todos" }, plan.todos.map((t) => todoItem(ctx, plan, t, byId, reload)))
      : h("p", { class: "muted small" }, "No todo yet."),
    h(
      "p",
      { class: "small", "data-ready": plan.id },
      h("strong", {}, "Ready next: "),
      ready.ready.length ? ready.ready.map((t) => t.content).join(", ") : "nothing",
      ready.blocked?.length ? h("span", { class: "muted" }, ` · ${ready.blocked.length} waiting on others`) : null,
    ),
    add,
    dangerButton("Delete plan", ctx.guarded(async () => {
      await ctx.api.delete(`/api/plans/${enc(plan.id)}`);
      await reload();
    }), { "data-plan-delete": plan.id }),
  );
}

async function settingsPart(ctx, agent) {
  const config = await ctx.api.get(`/api/agents/${enc(agent.id)}/plan`);
  const enabled = check("offer the plan tools (plan_create, plan_update, todo_add, todo_update)", { checked: config.enabled });
  const approval = check("a plan waits for a person's approval before the model works on it", { checked: config.require_approval });
  const saved = status();
  const form = h("form", { class: "stack", id: "plan-settings" }, enabled.wrap, approval.wrap,
    submitRow("Save plan settings", saved));
  onSubmit(form, ctx, async () => {
    const stored = await ctx.api.request("PUT", `/api/agents/${enc(agent.id)}/plan`, {
      enabled: enabled.input.checked, requireApproval: approval.input.checked,
    });
    saved.textContent = `saved: plan tools ${stored.enabled ? "on" : "off"}`;
  });
  return section(`Plan settings of ${agent.name}`, form);
}

export default {
  id: "plans",
  title: "Plans",
  async render(root, ctx) {
    add(root, h("h2", {}, "Plans"));
    const agent = ctx.agent();
    if (!agent) {
      add(root, needAgent("see its threads' plans"));
      return;
    }
    const q = new URLSearchParams({ agentId: agent.id, limit: "100" });
    const { threads } = await ctx.api.get(`/api/threads?${q}`);
    if (!threads.some((t) => t.id === threadId)) threadId = threads[0]?.id ?? null;
    const picker = select(
      threads.map((t) => [t.id, t.title || `thread of ${when(t.created_at)}`]),
      threadId,
      { id: "plan-thread" },
    );
    picker.addEventListener("change", ctx.guarded(async () => {
      threadId = picker.value;
      await ctx.refresh();
    }));
    add(root, 
      h("p", { class: "muted small" }, "Plans belong to a thread. The model keeps them with its plan tools; you can too."),
      threads.length ? field("Thread", picker) : h("p", { class: "muted" }, "This agent has no thread yet: start one in the Chat tab."),
    );
    if (threadId) {
      const plans = await ctx.api.get(`/api/plans?${new URLSearchParams({ threadId })}`);
      const title = h("input", { required: true, maxlength: 1000, placeholder: "New plan's title", "data-field": "plan-title" });
      const create = h("form", { class: "row", id: "plan-create" }, title, h("button", { type: "submit" }, "New plan"));
      onSubmit(create, ctx, async () => {
        await ctx.api.post("/api/plans", { threadId, title: title.value.trim() });
        await ctx.refresh();
      });
      const cards = await Promise.all(plans.map((p) => planCard(ctx, p, () => ctx.refresh())));
      add(root, 
        section(
          "The thread's plans",
          cards.length ? h("ul", { class: "plain cards", id: "plan-list" }, cards) : h("p", { class: "muted" }, "No plan in this thread yet."),
          create,
        ),
      );
    }
    add(root, await settingsPart(ctx, agent));
  },
};
