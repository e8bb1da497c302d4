// Small SVG charts drawn here (no charting library): a bar chart of a series
// and a span waterfall. Sizes and colours are attributes and CSS classes, so
// the page's Content-Security-Policy (no inline style) holds.

import { h, s } from "./dom.js";

const WIDTH = 640;

/** A bar chart of points [{label, value}] with a title and the largest value. */
export function barChart(title, points, format = String) {
  const height = 140;
  const top = 10;
  const bottom = 22;
  const left = 8;
  const max = Math.max(0, ...points.map((p) => p.value));
  const step = (WIDTH - left * 2) / Math.max(1, points.length);
  const bars = points.map((p, i) => {
    const barHeight = max > 0 ? ((height - top - bottom) * p.value) / max : 0;
    const x = left + i * step;
    return s(
      "rect",
      {
        class: "bar",
        x: x + step * 0.1,
        y: height - bottom - barHeight,
        width: Math.max(1, step * 0.8),
        height: barHeight,
        "data-value": p.value,
      },
      s("title", {}, `${p.label}: ${format(p.value)}`),
    );
  });
  const first = points[0]?.label ?? "";
  const last = points[points.length - 1]?.label ?? "";
  const svg = s(
    "svg",
    { class: "chart", viewBox: `0 0 ${WIDTH} ${height}`, role: "img", "aria-label": title },
    s("line", { class: "axis", x1: left, x2: WIDTH - left, y1: height - bottom, y2: height - bottom }),
    bars,
    s("text", { class: "tick", x: left, y: height - 6 }, first),
    s("text", { class: "tick", x: WIDTH - left, y: height - 6, "text-anchor": "end" }, last),
  );
  return h(
    "figure",
    { class: "chart-box" },
    h("figcaption", {}, title, h("span", { class: "muted small" }, ` (max ${format(max)})`)),
    svg,
  );
}

/**
 * The spans of a trace as a tree (parent_span_id) with a bar per span on the
 * trace's time line: start offset and duration, tokens on model calls; under
 * each row, what ``body(span)`` gives (its input and output).
 */
export function spanWaterfall(spans, body = () => null) {
  if (!spans.length) return h("p", { class: "muted small" }, "No span was stored.");
  const byParent = new Map();
  const ids = new Set(spans.map((sp) => sp.span_id));
  for (const sp of spans) {
    const parent = sp.parent_span_id && ids.has(sp.parent_span_id) ? sp.parent_span_id : null;
    if (!byParent.has(parent)) byParent.set(parent, []);
    byParent.get(parent).push(sp);
  }
  const rows = [];
  const walk = (parent, depth) => {
    for (const sp of byParent.get(parent) || []) {
      rows.push({ sp, depth });
      walk(sp.span_id, depth + 1);
    }
  };
  walk(null, 0);
  const start = Math.min(...spans.map((sp) => Date.parse(sp.started_at)));
  const end = Math.max(...spans.map((sp) => Date.parse(sp.started_at) + sp.duration_ms));
  const total = Math.max(1, end - start);
  const rowHeight = 20;
  const labelWidth = 260;
  const barWidth = WIDTH - labelWidth - 8;
  const svg = s("svg", {
    class: "waterfall",
    viewBox: `0 0 ${WIDTH} ${rows.length * rowHeight + 4}`,
    role: "img",
    "aria-label": "spans on the trace's time line",
  });
  svg.append(s("title", {}, "spans on the trace's time line"));
  rows.forEach(({ sp }, i) => {
    const offset = Date.parse(sp.started_at) - start;
    svg.append(
      s(
        "rect",
        {
          class: `span-bar kind-${sp.kind} status-${sp.status}`,
          x: labelWidth + (barWidth * offset) / total,
          y: i * rowHeight + 4,
          width: Math.max(2, (barWidth * sp.duration_ms) / total),
          height: rowHeight - 6,
        },
        s("title", {}, `${sp.name}: ${sp.duration_ms.toFixed(1)} ms`),
      ),
      s("text", { class: "span-label", x: 4, y: i * rowHeight + 16 }, `${sp.kind} ${sp.name}`),
    );
  });
  const list = h(
    "ul",
    { class: "span-tree plain" },
    rows.map(({ sp, depth }) =>
      h(
        "li",
        { class: `span depth-${Math.min(depth, 6)} status-${sp.status}`, "data-span-id": sp.span_id },
        h("span", { class: "span-kind" }, sp.kind),
        " ",
        h("strong", {}, sp.name),
        " ",
        h("span", { class: "span-duration" }, `${sp.duration_ms.toFixed(1)} ms`),
        sp.input_tokens !== null || sp.output_tokens !== null
          ? h(
              "span",
              { class: "span-tokens muted" },
              ` · ${sp.model ?? ""} ${sp.input_tokens ?? 0} in / ${sp.output_tokens ?? 0} out tokens`,
              sp.cost_usd !== null ? ` · $${sp.cost_usd.toFixed(6)}` : "",
            )
          : null,
        sp.error ? h("div", { class: "span-error" }, sp.error) : null,
        body(sp),
      ),
    ),
  );
  return h("div", { class: "trace-spans" }, svg, list);
}
