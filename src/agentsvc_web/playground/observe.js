// The Traces panel: GET /api/logs (the open thread's traces, or the agent's when
// no thread is open) and GET /api/logs/{traceId}: the span waterfall, each
// span's input and output, the evaluations and the cost. A reply's "Trace"
// button opens its trace here. Admin only: a member sees the API's 403.

import { spanWaterfall } from "./charts.js";
import { $, clear, h, pretty, put } from "./dom.js";

const usd = (v) => (v === null || v === undefined ? "no price" : `$${Number(v).toFixed(6)}`);

export async function showTraces(api, { threadId, agentId }) {
  const list = clear($("trace-list"));
  if (!threadId && !agentId) {
    list.append(h("li", { class: "muted" }, "Pick an agent or open a thread first."));
    return;
  }
  const query = new URLSearchParams({ limit: "50" });
  if (threadId) query.set("threadId", threadId);
  else query.set("agentId", agentId);
  $("trace-scope").textContent = threadId ? "The open thread's traces, newest first." : "The agent's traces, newest first.";
  const page = await api.get(`/api/logs?${query}`);
  if (!page.traces.length) list.append(h("li", { class: "muted" }, "No trace yet: a trace is stored when its turn ends."));
  const current = $("trace-detail").dataset.traceId;
  for (const t of page.traces) {
    list.append(
      h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: "trace",
            "data-trace-id": t.id,
            "aria-current": t.id === current ? "true" : null,
            onclick: () => showTrace(api, t.id),
          },
          h("span", { class: `badge status-${t.status}` }, t.run_status ?? t.status),
          ` ${new Date(t.started_at).toLocaleTimeString()} · ${t.duration_ms} ms · `,
          `${t.total_tokens} tokens · ${usd(t.cost_usd)} · ${t.model ?? "no model"}`,
        ),
      ),
    );
  }
}

export async function showTrace(api, traceId) {
  const detail = await api.get(`/api/logs/${encodeURIComponent(traceId)}`);
  const t = detail.trace;
  for (const b of document.querySelectorAll("#trace-list button.trace")) {
    if (b.dataset.traceId === t.id) b.setAttribute("aria-current", "true");
    else b.removeAttribute("aria-current");
  }
  const facts = [
    ["trace", t.id],
    ["status", `${t.status} (${t.run_status ?? "?"})`],
    ["duration", `${t.duration_ms} ms`],
    ["first token", t.first_token_ms === null ? "-" : `${t.first_token_ms} ms`],
    ["tokens", `${t.input_tokens} in / ${t.output_tokens} out (${t.total_tokens}); ${t.cached_input_tokens} cached`],
    ["cost", usd(t.cost_usd)],
    ["model calls / tool calls", `${t.model_calls} / ${t.tool_calls} (${t.tool_errors} failed)`],
    ["key", t.key_source ?? "-"],
  ];
  const root = $("trace-detail");
  root.dataset.traceId = t.id;
  put(
    root,
    h("h3", { tabindex: "-1", id: "trace-heading" }, `Trace of ${t.name}`),
    h("dl", { class: "facts", "data-cost": t.cost_usd ?? "" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    t.error ? h("p", { class: "span-error" }, t.error) : null,
    spanWaterfall(detail.spans, spanBody),
    h("h4", {}, "Evaluations"),
    detail.evaluations.length
      ? h(
          "ul",
          { class: "plain evaluations" },
          detail.evaluations.map((e) =>
            h(
              "li",
              { class: "evaluation", "data-span-id": e.span_id },
              h("strong", {}, e.name),
              ` (${e.source}): `,
              e.label ?? "",
              e.score === null || e.score === undefined ? "" : ` score ${e.score}`,
              e.detail ? h("span", { class: "muted" }, ` · ${e.detail}`) : null,
            ),
          ),
        )
      : h("p", { class: "muted small" }, "No evaluation of this trace."),
  );
  $("trace-heading").focus();
}

/** A span's input, output and attributes, folded under its row. */
function spanBody(sp) {
  const block = (label, value, cls) =>
    value === null || value === undefined
      ? null
      : h("div", { class: cls }, h("div", { class: "small muted" }, label), h("pre", {}, pretty(value)));
  return h(
    "details",
    { class: "span-io" },
    h("summary", { class: "small" }, "input and output"),
    block("input", sp.input, "span-input"),
    block("output", sp.output, "span-output"),
    sp.truncated ? h("p", { class: "small muted" }, `cut short: ${sp.original_bytes} bytes in all`) : null,
    block("attributes", sp.attributes, "span-attributes"),
  );
}
