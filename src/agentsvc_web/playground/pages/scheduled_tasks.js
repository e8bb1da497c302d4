// Scheduled tasks: prompts the agent picked in the side bar sends itself on a
// cron, into a thread of its own or a new one each time. The API takes the whole
// list at once (PUT), so each change here sends the stored tasks again with the
// one change made; the runs of the tasks are listed below, newest first.

import { h } from "../dom.js";
import { badge, check, dangerButton, enc, labelled, onSubmit, options, section, status, submitRow, table, when } from "./formkit.js";

/** A stored task as the PUT body wants it (camelCase). */
function bodyOf(t) {
  return {
    id: t.id,
    name: t.name,
    prompt: t.prompt,
    cron: t.cron,
    timezone: t.timezone,
    enabled: t.enabled,
    threadId: t.thread_id,
    overlap: t.overlap,
    endAt: t.end_at,
  };
}

async function save(ctx, agent, tasks) {
  return ctx.api.request("PUT", `/api/agents/${enc(agent.id)}/scheduled-tasks`, { tasks });
}

function taskTable(ctx, agent, tasks) {
  if (!tasks.length) return h("p", { class: "muted" }, "No scheduled task for this agent.");
  const change = (t, patch) =>
    ctx.guarded(async () => {
      await save(ctx, agent, tasks.map((x) => (x.id === t.id ? { ...bodyOf(x), ...patch } : bodyOf(x))));
      await ctx.refresh();
    });
  return table(
    [
      ["Name", (t) => t.name || "-"],
      ["Prompt", (t) => t.prompt],
      ["Schedule", (t) => `${t.cron} (${t.timezone})`],
      ["Next run", (t) => (t.enabled ? when(t.next_run_at) : "paused")],
      ["Last run", (t) => when(t.last_run_at)],
      ["Thread", (t) => (t.thread_id ? t.thread_id.slice(0, 8) : "a new one each time")],
      [
        "Enabled",
        (t) => {
          const c = check("enabled", { checked: t.enabled ? true : null, "aria-label": `Enabled: ${t.name || t.prompt}` });
          c.input.addEventListener("change", () => change(t, { enabled: c.input.checked })());
          return c.wrap;
        },
      ],
      [
        "",
        (t) =>
          dangerButton("Delete", ctx.guarded(async () => {
            await save(ctx, agent, tasks.filter((x) => x.id !== t.id).map(bodyOf));
            await ctx.refresh();
          })),
      ],
    ],
    tasks,
    { "aria-label": "Scheduled tasks", id: "task-table" },
  );
}

async function addForm(ctx, agent, tasks) {
  const threads = await ctx.api.get(`/api/threads?${new URLSearchParams({ agentId: agent.id, limit: "50" })}`);
  const list = Array.isArray(threads) ? threads : (threads.threads ?? []);
  const name = labelled("Name", "input", { maxlength: 200, placeholder: "weekly report", id: "task-name" });
  const prompt = labelled("Prompt", "textarea", { rows: 2, required: true, id: "task-prompt" });
  const cron = labelled("Cron", "input", { required: true, placeholder: "0 9 * * 1", id: "task-cron" });
  const tz = labelled("Time zone", "input", { value: Intl.DateTimeFormat().resolvedOptions().timeZone || "UTC", id: "task-tz" });
  const thread = labelled(
    "Thread",
    "select",
    { id: "task-thread" },
    options([["", "a new thread each time"], ...list.map((t) => [t.id, t.title || t.id.slice(0, 8)])], ""),
  );
  const said = status();
  const form = h(
    "form",
    { class: "grid-form", id: "task-create", "aria-label": "New scheduled task" },
    name.wrap,
    cron.wrap,
    tz.wrap,
    thread.wrap,
    h("div", { class: "row" }, prompt.wrap),
    submitRow("Schedule", said),
  );
  prompt.wrap.classList.add("grow");
  onSubmit(form, ctx, async () => {
    const draft = {
      name: name.input.value,
      prompt: prompt.input.value,
      cron: cron.input.value,
      timezone: tz.input.value || "UTC",
      threadId: thread.input.value || null,
    };
    await save(ctx, agent, [...tasks.map(bodyOf), draft]);
    said.say("scheduled");
    await ctx.refresh();
  });
  return form;
}

async function runTable(ctx, agent) {
  const page = await ctx.api.get(`/api/agents/${enc(agent.id)}/scheduled-tasks/runs?limit=20`);
  if (!page.runs.length) return h("p", { class: "muted" }, "No run yet: a task runs at its next tick.");
  return table(
    [
      ["Run", (r) => r.id.slice(0, 8)],
      ["Status", (r) => badge(r.status)],
      ["Scheduled for", (r) => when(r.scheduled_for)],
      ["Ended", (r) => when(r.ended_at)],
      ["Reply", (r) => r.steps?.[0]?.output?.text ?? r.error ?? "-"],
    ],
    page.runs,
    { "aria-label": "Runs of the scheduled tasks", id: "task-runs" },
  );
}

export default {
  id: "scheduled-tasks",
  title: "Scheduled tasks",
  async render(root, ctx) {
    root.append(h("h2", {}, "Scheduled tasks"));
    const agent = ctx.agent();
    if (!agent) {
      root.append(h("p", { class: "muted" }, "Pick or create an agent in the side bar: scheduled tasks belong to an agent."));
      return;
    }
    const stored = await ctx.api.get(`/api/agents/${enc(agent.id)}/scheduled-tasks`);
    root.append(
      h("p", { class: "muted" }, `Prompts ${agent.name} sends itself on a schedule (cron, in a time zone). A paused task keeps its place.`),
      taskTable(ctx, agent, stored.tasks),
      section("Schedule a prompt", await addForm(ctx, agent, stored.tasks)),
      section("Runs", await runTable(ctx, agent)),
    );
  },
};
