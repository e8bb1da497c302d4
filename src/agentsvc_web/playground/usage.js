// The Usage panel: GET /api/analytics as charts, for a period and one agent or
// all of them (the organization's usage). Admin only: a member sees the API's 403.

import { barChart } from "./charts.js";
import { $, clear, h, put } from "./dom.js";

const money = (v) => `$${Number(v).toFixed(4)}`;

/** The agent filter's options: every agent of the organization, kept choice. */
export function fillAgentFilter(agents) {
  const select = $("usage-agent");
  const keep = select.value;
  clear(select).append(h("option", { value: "" }, "All agents"));
  for (const a of agents) select.append(h("option", { value: a.id, selected: a.id === keep }, a.name));
}

export async function showUsage(api, agents) {
  const period = $("usage-period").value;
  const agentId = $("usage-agent").value;
  const query = new URLSearchParams({ period });
  if (agentId) query.set("agentId", agentId);
  const report = await api.get(`/api/analytics?${query}`);
  const label = (p) =>
    report.granularity === "hour"
      ? new Date(p.start).toLocaleString([], { month: "short", day: "numeric", hour: "2-digit" })
      : new Date(p.start).toLocaleDateString();
  const series = (field) => report.series.map((p) => ({ label: label(p), value: p[field] }));
  const t = report.totals;
  const name = (id) => agents.find((a) => a.id === id)?.name ?? id;
  const root = $("usage");
  root.dataset.agentId = report.agent_id ?? "";
  root.dataset.period = report.period;
  put(
    root,
    h("h3", {}, report.agent_id ? `Usage of ${name(report.agent_id)}` : "Usage of the organization"),
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
      h("dd", { "data-total": "replies" }, `${t.replies} / ${t.threads}`),
      h("dt", {}, "tool calls / errors"),
      h("dd", {}, `${t.tool_calls} (${t.tool_errors} failed) / ${t.errors}`),
    ),
    h(
      "div",
      { class: "charts" },
      barChart("Model calls", series("model_calls")),
      barChart("Tokens", series("total_tokens")),
      barChart("Cost (USD)", series("cost_usd"), money),
    ),
    table(
      "By model",
      ["model", "calls", "tokens in / out", "cost"],
      report.by_model.map((m) => [m.model, m.model_calls, `${m.input_tokens} / ${m.output_tokens}`, m.cost_usd === null ? "no price" : money(m.cost_usd)]),
      "by-model",
    ),
    report.agent_id
      ? null
      : table(
          "By agent",
          ["agent", "replies", "calls", "tokens", "cost"],
          report.by_agent.map((a) => [name(a.agent_id), a.replies, a.model_calls, a.total_tokens, money(a.cost_usd)]),
          "by-agent",
        ),
    h("p", { class: "muted small" }, `${report.from} to ${report.to}, by ${report.granularity}; prices of ${report.prices_taken ?? "-"}.`),
  );
}

function table(caption, heads, rows, cls) {
  if (!rows.length) return null;
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: `data ${cls}` },
      h("caption", {}, caption),
      h("thead", {}, h("tr", {}, heads.map((x) => h("th", { scope: "col" }, x)))),
      h("tbody", {}, rows.map((r) => h("tr", {}, r.map((c) => h("td", {}, c))))),
    ),
  );
}
