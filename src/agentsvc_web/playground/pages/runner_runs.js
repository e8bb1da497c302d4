// A runner's runs: start one (its input as JSON), the list newest first, and
// the run picked: its status, each step's status, output and error, and the
// buttons a state allows (cancel while queued, running or paused; resume when
// paused). A run still going is followed live (GET .../runs/{id}/events as
// Server-Sent Events; after a dropped connection it re-attaches with
// Last-Event-ID, so no event shows twice): each event is listed, and the run is
// read again as it comes; the graph shows its steps' statuses.

import { followLog } from "../api.js";
import { h, pretty } from "../dom.js";
import { badge, enc, labelled, onSubmit, parseJson, status, table, when } from "./formkit.js";

const ACTIVE = new Set(["queued", "running", "paused"]);
const FINAL = new Set(["run.finished", "run.cancelled"]); // a run's last event
let openRun = null; // {runnerId, runId}
let follower = null; // the AbortController of the run being followed

/** One event of a run as a list item: its type, and what it says. */
function eventItem(e) {
  const d = e.data ?? {};
  const says = [d.step_id, d.status, d.attempt > 1 ? `attempt ${d.attempt}` : null, d.error].filter((x) => x !== null && x !== undefined);
  return h("li", { "data-seq": e.seq, "data-type": e.type }, h("span", { class: "ev-type" }, e.type), ` ${says.join(" · ")}`);
}

/** Follows a run's events into `list` until its last one, or the page is left;
 * `refresh()` reads the run again (it answers the run). */
function followRun(ctx, path, list, refresh, controller) {
  let ended = false; // the run had ended when its stream was last asked for
  return followLog(ctx.api, `${path}/events`, list, controller, {
    what: "the run's events",
    onEvent: async (e) => {
      list.append(eventItem(e));
      await refresh();
      return FINAL.has(e.type);
    },
    // the stream ended without the run's last event: the connection dropped (the
    // rest, even of a run that ended meanwhile, comes on the next one), or the run
    // had ended before it had events (a stream read after its end was empty)
    ended: async (_last, got) => {
      if (ended && got === 0) return null;
      ended = !ACTIVE.has((await refresh()).status);
      return ended ? 0 : 1000;
    },
  });
}

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
  const runPath = (runId) => `/api/runners/${enc(runner.id)}/runs/${enc(runId)}`;

  const showRun = async (runId) => {
    follower?.abort();
    openRun = { runnerId: runner.id, runId };
    const detail = h("div");
    const events = h("ol", { class: "timeline", id: "run-events", "aria-label": "Events of the run" });
    const refresh = async () => {
      const run = await ctx.api.get(runPath(runId));
      if (detail.isConnected) {
        detail.replaceChildren(runDetail(ctx, runner, run, () => showRun(runId)));
        showStatuses(Object.fromEntries(run.steps.map((st) => [st.step_id, st.status])));
      }
      return run;
    };
    detailBox.replaceChildren(detail, h("h5", {}, "Events"), events);
    const run = await refresh();
    if (!root.isConnected) return; // the page was left
    await loadList(); // a run just started is in it
    const controller = new AbortController();
    follower = controller;
    // followed in the background (a button's handler does not wait for the run's end)
    followRun(ctx, runPath(runId), events, refresh, controller)
      .then(() => (ACTIVE.has(run.status) && root.isConnected ? loadList() : null)) // its end
      .catch((e) => ctx.showError(e.message));
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
