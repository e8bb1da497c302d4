// A runner's runs: start one (its input as JSON), the list newest first, and
// the run picked: its status, each step's status, output and error, and the
// buttons a state allows (cancel while queued, running or paused; resume when
// paused). A run still going is read again each second while it is on screen
// (runs have no event stream); the graph shows its steps' statuses.

import { h, pretty } from "../dom.js";
import { badge, enc, labelled, onSubmit, parseJson, status, table, when } from "./formkit.js";

const ACTIVE = new Set(["queued", "running", "paused"]);
const POLL_MS = 1000;
let openRun = null; // {runnerId, runId}

function stepList(run) {
  return h(
    "ol",
    { class: "plain step-runs", "aria-label": "Steps of the run" },
    run.steps.map((st) =>
      h(
        "li",
        { class: `step-run st-${st.status}`, "data-step-id": st.step_id, "data-status": st.status },
        h(
          "div",
          { class: "row" },
          h("strong", {}, st.step_id),
          h("span", { class: "muted" }, st.kind),
          badge(st.status),
          h("span", { class: "muted small" }, `attempt ${st.attempt} · ${st.tokens} tokens${st.model ? ` · ${st.model}` : ""}`),
        ),
        st.error ? h("p", { class: "step-error" }, st.error) : null,
        typeof st.output?.text === "string" ? h("p", { class: "step-text" }, st.output.text) : null,
        st.output !== null && st.output !== undefined
          ? h("details", { open: typeof st.output?.text === "string" ? null : true }, h("summary", {}, "Output"), h("pre", { class: "step-output" }, pretty(st.output)))
          : null,
      ),
    ),
  );
}

function runDetail(ctx, runner, run, reload) {
  const post = (what, body) =>
    ctx.guarded(async () => {
      await ctx.api.post(`/api/runners/${enc(runner.id)}/runs/${enc(run.id)}/${what}`, body);
      await reload();
    });
  return h(
    "div",
    { class: "run-detail", id: "run-detail", "data-run-id": run.id, "data-status": run.status },
    h(
      "div",
      { class: "row" },
      h("h4", {}, `Run ${run.id.slice(0, 8)}`),
      badge(run.status),
      ACTIVE.has(run.status) ? h("button", { type: "button", onclick: post("cancel", {}) }, "Cancel run") : null,
      run.status === "paused" ? h("button", { type: "button", onclick: post("resume", {}) }, "Resume") : null,
    ),
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "trigger"),
      h("dd", {}, run.trigger?.kind ?? "-"),
      h("dt", {}, "input"),
      h("dd", {}, h("code", {}, pretty(run.input))),
      h("dt", {}, "started / ended"),
      h("dd", {}, `${when(run.started_at)} / ${when(run.ended_at)}`),
      h("dt", {}, "tokens / cost"),
      h("dd", {}, `${run.tokens} / $${run.cost_usd}`),
      run.paused_reason ? [h("dt", {}, "paused"), h("dd", {}, run.paused_reason)] : null,
      run.error ? [h("dt", {}, "error"), h("dd", { class: "step-error" }, run.error)] : null,
      run.trace_id ? [h("dt", {}, "trace"), h("dd", {}, run.trace_id)] : null,
    ),
    stepList(run),
    run.output !== null && run.output !== undefined
      ? h("details", {}, h("summary", {}, "The run's output"), h("pre", {}, pretty(run.output)))
      : null,
  );
}

function startForm(ctx, runner, onStarted) {
  const input = labelled("Input (JSON object)", "textarea", { rows: 3, spellcheck: "false", class: "code", id: "run-input" });
  const props = Object.keys(runner.input_schema?.properties ?? {});
  input.input.value = JSON.stringify(Object.fromEntries(props.map((p) => [p, ""])));
  const said = status();
  const button = h("button", { type: "submit" }, "Start a run");
  const form = h("form", { class: "stack", id: "run-start" }, input.wrap, h("div", { class: "row" }, button, said));
  onSubmit(form, ctx, async () => {
    button.disabled = true; // one click, one run
    try {
      const run = await ctx.api.post(`/api/runners/${enc(runner.id)}/runs`, { input: parseJson(input.input.value, "The input") ?? {} });
      said.say(`started run ${run.id.slice(0, 8)}`);
      await onStarted(run);
    } finally {
      button.disabled = false;
    }
  });
  return form;
}

/** The runs section of a runner; `showStatuses(map)` colours the graph. */
export async function renderRuns(root, ctx, runner, showStatuses) {
  const listBox = h("div", { class: "run-list" });
  const detailBox = h("div", { "aria-live": "polite" });
  let timer = null;

  const showRun = async (runId) => {
    clearTimeout(timer);
    openRun = { runnerId: runner.id, runId };
    const run = await ctx.api.get(`/api/runners/${enc(runner.id)}/runs/${enc(runId)}`);
    if (!root.isConnected) return; // the page was left
    detailBox.replaceChildren(runDetail(ctx, runner, run, () => showRun(runId)));
    showStatuses(Object.fromEntries(run.steps.map((st) => [st.step_id, st.status])));
    if (ACTIVE.has(run.status) && run.status !== "paused") {
      timer = setTimeout(() => {
        if (root.isConnected) showRun(runId).then(loadList).catch((e) => ctx.showError(e.message));
      }, POLL_MS);
    } else {
      await loadList();
    }
  };

  const loadList = async () => {
    const page = await ctx.api.get(`/api/runners/${enc(runner.id)}/runs?limit=20`);
    listBox.replaceChildren(
      page.runs.length
        ? table(
            [
              ["Run", (r) => h("button", { type: "button", class: "link", "data-run-id": r.id, onclick: ctx.guarded(() => showRun(r.id)) }, r.id.slice(0, 8))],
              ["Status", (r) => badge(r.status)],
              ["Trigger", (r) => r.trigger?.kind ?? "-"],
              ["Steps", (r) => r.steps.map((st) => `${st.step_id}: ${st.status}`).join(", ")],
              ["Created", (r) => when(r.created_at)],
            ],
            page.runs,
            { "aria-label": "Runs, newest first" },
          )
        : h("p", { class: "muted" }, "No run yet."),
    );
  };

  root.append(startForm(ctx, runner, (run) => showRun(run.id)), listBox, detailBox);
  await loadList();
  if (openRun?.runnerId === runner.id) await showRun(openRun.runId);
}
