// Runners: headless pipelines of steps. The page lists the organization's
// runners, makes one (its steps as JSON, an example filled in for the agent
// picked in the side bar), and for the runner picked shows its steps as a
// graph, its runs (runner_runs.js: start one, each step's status and output),
// its triggers and its budget (runner_triggers.js).

import { h, pretty } from "../dom.js";
import { camel, dangerButton, enc, labelled, onSubmit, parseJson, section, status, submitRow, when } from "./formkit.js";
import { runnerGraph } from "./runner_graph.js";
import { renderRuns } from "./runner_runs.js";
import { renderBudget, renderTriggers } from "./runner_triggers.js";

let picked = null; // the runner open on the page (kept across refreshes)

function exampleSteps(agent) {
  return [
    { id: "draft", kind: "agent", agentId: agent?.id ?? "<an agent's id>", prompt: "Write one line about {{ input.topic }}" },
    { id: "long", kind: "condition", expression: "length(steps.draft.output.text) > `20`", ifFalse: "stop" },
    { id: "polish", kind: "agent", agentId: agent?.id ?? "<an agent's id>", prompt: "Shorten: {{ steps.draft.output.text }}" },
  ];
}

function createForm(ctx, runners) {
  const name = labelled("Name", "input", { required: true, maxlength: 200, placeholder: "ticket triage" });
  const description = labelled("Description", "input", { maxlength: 2000 });
  const schema = labelled("Input schema (JSON Schema)", "textarea", { rows: 3, spellcheck: "false" });
  schema.input.value = JSON.stringify({ type: "object", properties: { topic: { type: "string" } } });
  const steps = labelled("Steps (JSON array)", "textarea", { rows: 9, spellcheck: "false", class: "code" });
  steps.input.value = JSON.stringify(exampleSteps(ctx.agent()), null, 2);
  const said = status();
  const form = h(
    "form",
    { class: "stack", id: "runner-create", "aria-label": "New runner" },
    name.wrap,
    description.wrap,
    schema.wrap,
    steps.wrap,
    submitRow("Create runner", said),
  );
  onSubmit(form, ctx, async () => {
    const body = { name: name.input.value, description: description.input.value };
    body.inputSchema = parseJson(schema.input.value, "The input schema");
    body.steps = parseJson(steps.input.value, "The steps") ?? [];
    const made = await ctx.api.post("/api/runners", body);
    said.say(`created ${made.name}`);
    picked = made.id;
    await ctx.refresh();
  });
  return h(
    "details",
    { class: "create", open: runners.length ? null : true },
    h("summary", {}, "New runner"),
    h(
      "p",
      { class: "muted small" },
      "Step kinds: agent (agentId, prompt with {{ JMESPath }} placeholders), webhook (url), condition (expression, ifTrue, ifFalse: next, stop or a later step's id).",
    ),
    form,
  );
}

function runnerList(ctx, runners) {
  if (!runners.length) return h("p", { class: "muted" }, "No runner yet.");
  return h(
    "ul",
    { class: "plain pick-list", "aria-label": "Runners" },
    runners.map((r) =>
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: "pick",
            "data-runner-id": r.id,
            "aria-pressed": r.id === picked ? "true" : "false",
            onclick: ctx.guarded(async () => {
              picked = r.id;
              await ctx.refresh();
            }),
          },
          h("strong", {}, r.name),
          ` · ${r.steps.length} step${r.steps.length === 1 ? "" : "s"}`,
        ),
      ),
    ),
  );
}

function stepsEditor(ctx, runner) {
  const steps = labelled("Steps (JSON array, the whole ordered list)", "textarea", { rows: 8, spellcheck: "false", class: "code" });
  steps.input.value = JSON.stringify(
    runner.steps.map((st) => camelStep(st)),
    null,
    2,
  );
  const said = status();
  const form = h("form", { class: "stack" }, steps.wrap, submitRow("Save steps", said));
  onSubmit(form, ctx, async () => {
    await ctx.api.request("PUT", `/api/runners/${enc(runner.id)}/steps`, { steps: parseJson(steps.input.value, "The steps") ?? [] });
    said.say("saved");
    await ctx.refresh();
  });
  return h("details", {}, h("summary", {}, "Edit the steps"), form);
}

/** A stored step (snake_case, nulls) as the body a PUT takes (camelCase, set fields only). */
function camelStep(st) {
  const out = {};
  for (const [k, v] of Object.entries(st)) {
    if (v === null || k === "has_headers" || (k === "input_mapping" && !Object.keys(v).length) || (k === "name" && !v)) continue;
    out[camel(k)] = v;
  }
  return out;
}

async function renderRunner(root, ctx, runner) {
  const facts = h(
    "dl",
    { class: "facts" },
    h("dt", {}, "id"),
    h("dd", {}, runner.id),
    h("dt", {}, "description"),
    h("dd", {}, runner.description || "-"),
    h("dt", {}, "input schema"),
    h("dd", {}, h("code", {}, pretty(runner.input_schema))),
    h("dt", {}, "updated"),
    h("dd", {}, when(runner.updated_at)),
  );
  const graphHolder = h("div", { class: "graph-holder", id: "runner-graph" }, runnerGraph(runner.steps));
  const del = dangerButton("Delete runner", ctx.guarded(async () => {
    await ctx.api.delete(`/api/runners/${enc(runner.id)}`);
    picked = null;
    await ctx.refresh();
  }));
  const runs = h("div", { id: "runner-runs" });
  const triggers = h("div", { id: "runner-triggers" });
  const budget = h("div", { id: "runner-budget" });
  root.append(
    section(
      `Runner: ${runner.name}`,
      { id: "runner-detail", "data-runner-id": runner.id },
      facts,
      h("h4", {}, "Steps"),
      graphHolder,
      stepsEditor(ctx, runner),
      h("div", { class: "row" }, del),
    ),
    section("Runs", runs),
    section("Triggers", triggers),
    section("Budget", budget),
  );
  // the runs page redraws the graph with the open run's step statuses
  const showStatuses = (statuses) => graphHolder.replaceChildren(runnerGraph(runner.steps, statuses));
  await Promise.all([
    renderRuns(runs, ctx, runner, showStatuses),
    renderTriggers(triggers, ctx, runner),
    renderBudget(budget, ctx, runner),
  ]);
}

export default {
  id: "runners",
  title: "Runners",
  async render(root, ctx) {
    const runners = await ctx.api.get("/api/runners");
    if (picked && !runners.some((r) => r.id === picked)) picked = null;
    root.append(
      h("h2", {}, "Runners"),
      h("p", { class: "muted" }, "Pipelines of agent, webhook and condition steps, started by hand, by the API, a webhook, a button or a schedule."),
      runnerList(ctx, runners),
      createForm(ctx, runners),
    );
    const runner = runners.find((r) => r.id === picked);
    if (runner) await renderRunner(root, ctx, runner);
  },
};
