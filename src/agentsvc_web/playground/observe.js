// The Traces and Usage panels: GET /api/logs (a thread's traces), GET
// /api/logs/{traceId} (its span tree) and GET /api/analytics (the organization's
// usage as charts). All three need an admin credential; a member sees the API's
// 403 in the error bar.

import { barChart, spanWaterfall } from "./charts.js";
import { $, clear, h, put } from "./dom.js";

export async function showTraces(api, threadId) {
  const list = clear($("trace-list"));
  clear($("trace-detail"));
  if (!threadId) {
    list.append(h("li", { class: "muted" }, "Open a thread first."));
    return;
  }
  const page = await api.get(`/api/logs?${new URLSearchParams({ threadId, limit: "50" })}`);
  if (!page.traces.length) list.append(h("li", { class: "muted" }, "No trace yet: a trace is stored when its turn ends."));
  for (const t of page.traces) {
    list.append(
      h(
        "li",
        {},
        h(
          "button",
          { type: "button", class: "trace", "data-trace-id": t.id, onclick: () => showTrace(api, t.id) },
          `${new Date(t.started_at).toLocaleTimeString()} · ${t.run_status ?? t.status} · `,
          `${t.duration_ms} ms · ${t.total_tokens} tokens · ${t.model ?? "no model"}`,
        ),
      ),
    );
  }
}

export async function showTrace(api, traceId) {
  const detail = await api.get(`/api/logs/${encodeURIComponent(traceId)}`);
  const t = detail.trace;
  const facts = [
    ["trace", t.id],
    ["status", `${t.status} (${t.run_status ?? "?"})`],
    ["duration", `${t.duration_ms} ms`],
    ["first token", t.first_token_ms === null ? "-" : `${t.first_token_ms} ms`],
    ["tokens", `${t.input_tokens} in / ${t.output_tokens} out (${t.total_tokens})`],
    ["cost", t.cost_usd === null ? "no price" : `$${t.cost_usd}`],
    ["model calls / tool calls", `${t.model_calls} / ${t.tool_calls}`],
  ];
  put(
    $("trace-detail"),
    h("h3", {}, `Trace of ${t.name}`),
    h("dl", { class: "facts" }, facts.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)])),
    spanWaterfall(detail.spans),
    detail.evaluations.length
      ? h(
          "ul",
          { class: "plain evaluations" },
          detail.evaluations.map((e) =>
            h("li", {}, `${e.name}: ${e.label ?? ""} ${e.score ?? ""} ${e.detail ?? ""}`),
          ),
        )
      : null,
  );
}

const money = (v) => `$${v.toFixed(4)}`;

export async function showUsage(api, period) {
  const report = await api.get(`/api/analytics?${new URLSearchParams({ period })}`);
  const label = (p) =>
    report.granularity === "hour"
      ? new Date(p.start).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit" })
      : new Date(p.start).toLocaleDateString();
  const series = (field) => report.series.map((p) => ({ label: label(p), value: p[field] }));
  const t = report.totals;
  put(
    $("usage"),
    h(
      "dl",
      { class: "facts", id: "usage-totals" },
      h("dt", {}, "model calls"),
      h("dd", { "data-total": "model_calls" }, t.model_calls),
      h("dt", {}, "tokens"),
      h("dd", { "data-total": "total_tokens" }, `${t.total_tokens} (${t.input_tokens} in / ${t.output_tokens} out)`),
      h("dt", {}, "cost"),
      h("dd", { "data-total": "cost_usd" }, money(t.cost_usd), t.unpriced_calls ? ` + ${t.unpriced_calls} unpriced call(s)` : ""),
      h("dt", {}, "replies / threads"),
      h("dd", {}, `${t.replies} / ${t.threads}`),
    ),
    barChart("Model calls", series("model_calls")),
    barChart("Tokens", series("total_tokens")),
    barChart("Cost (USD)", series("cost_usd"), money),
    report.by_model.length
      ? h(
          "table",
          { class: "by-model" },
          h("thead", {}, h("tr", {}, h("th", {}, "model"), h("th", {}, "calls"), h("th", {}, "tokens in / out"), h("th", {}, "cost"))),
          h(
            "tbody",
            {},
            report.by_model.map((m) =>
              h(
                "tr",
                {},
                h("td", {}, m.model),
                h("td", {}, m.model_calls),
                h("td", {}, `${m.input_tokens} / ${m.output_tokens}`),
                h("td", {}, m.cost_usd === null ? "no price" : money(m.cost_usd)),
              ),
            ),
          ),
        )
      : null,
    h("p", { class: "muted small" }, `${report.from} to ${report.to}, by ${report.granularity}; prices of ${report.prices_taken ?? "-"}.`),
  );
}
