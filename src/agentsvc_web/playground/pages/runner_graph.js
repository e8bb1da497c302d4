// A runner's steps drawn as a graph (SVG, no library, no inline style): one box
// a step, top to bottom in their order, and an "end" box. An agent, webhook or
// computer step goes on to the next one; a condition has two ways out, `ifTrue`
// (default: next) and `ifFalse` (default: stop), each `next`, `stop` or the id of
// a later step; a jump past the next step is drawn as an arc on the right. With
// a run, each box carries the step's status in that run (class st-<status>, and
// the status in its text, so colour is never the only sign).

import { h, s } from "../dom.js";

const W = 260; // a box's width
const BOX = 46; // a box's height
const GAP = 34; // between two boxes
const TOP = 12;
const LEFT = 12;

function targetIndex(steps, i, target, fallback) {
  const t = target ?? fallback;
  if (t === "next") return i + 1; // steps.length is the end box
  if (t === "stop") return steps.length;
  const j = steps.findIndex((st) => st.id === t);
  return j > i ? j : steps.length;
}

/** The edges [{from, to, label}] of a runner's steps (indexes; steps.length is the end). */
export function edgesOf(steps) {
  const edges = [];
  steps.forEach((st, i) => {
    if (st.kind === "condition") {
      edges.push({ from: i, to: targetIndex(steps, i, st.if_true, "next"), label: "true" });
      edges.push({ from: i, to: targetIndex(steps, i, st.if_false, "stop"), label: "false" });
    } else {
      edges.push({ from: i, to: i + 1, label: "" });
    }
  });
  return edges;
}

function what(st) {
  if (st.kind === "agent") return st.prompt ? `prompt: ${st.prompt}` : "the run's input";
  if (st.kind === "webhook") return `${st.method ?? "POST"} ${st.url ?? ""}`;
  if (st.kind === "condition") return st.expression ?? "";
  if (st.kind === "computer") return st.command ?? "";
  return "";
}

function cut(text, n) {
  return text.length > n ? `${text.slice(0, n - 1)}…` : text;
}

/**
 * The graph of `steps`; `statuses` maps a step id to its status in a run (or is
 * empty). Each box is a <g class="node" data-step-id=... data-status=...>.
 */
export function runnerGraph(steps, statuses = {}) {
  const y = (i) => TOP + i * (BOX + GAP);
  const edges = edgesOf(steps);
  const jumps = edges.filter((e) => e.to !== e.from + 1);
  const width = LEFT + W + 50 + jumps.length * 22; // room for the last arc's label
  const height = y(steps.length) + BOX + TOP;
  const title = `Steps of the runner: ${steps.map((st) => st.id).join(", then ") || "none"}`;
  const svg = s(
    "svg",
    { class: "runner-graph", viewBox: `0 0 ${width} ${height}`, width, height, role: "img", "aria-label": title },
    s(
      "defs",
      {},
      s(
        "marker",
        { id: "rg-arrow", viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        s("path", { d: "M0,0 L10,5 L0,10 z", class: "rg-arrowhead" }),
      ),
    ),
  );
  const cx = LEFT + W / 2;
  let lane = 0;
  for (const e of edges) {
    const y1 = y(e.from) + BOX;
    const y2 = y(e.to);
    const cls = `rg-edge${e.label ? ` rg-${e.label}` : ""}`;
    if (e.to === e.from + 1) {
      // straight down; a condition's two edges to the same box sit side by side
      const dx = e.label === "true" ? -30 : e.label === "false" ? 30 : 0;
      svg.append(s("line", { class: cls, x1: cx + dx, y1, x2: cx + dx, y2, "marker-end": "url(#rg-arrow)" }));
      if (e.label) svg.append(s("text", { class: "rg-edge-label", x: cx + dx + 4, y: y1 + GAP / 2 + 4 }, e.label));
    } else {
      lane += 1;
      const x = LEFT + W + lane * 22;
      const ys = y(e.from) + BOX / 2;
      const toEnd = e.to === steps.length; // the end box is narrower, centred
      const ye = y(e.to) + (toEnd ? (BOX - 10) / 2 : BOX / 2);
      svg.append(
        s("path", {
          class: cls,
          d: `M${LEFT + W},${ys} H${x} V${ye} H${toEnd ? cx + 40 : LEFT + W}`,
          fill: "none",
          "marker-end": "url(#rg-arrow)",
        }),
        s("text", { class: "rg-edge-label", x: x + 3, y: ys + 4 }, e.label),
      );
    }
  }
  steps.forEach((st, i) => {
    const status = statuses[st.id];
    svg.append(
      s(
        "g",
        { class: `node kind-${st.kind}${status ? ` st-${status}` : ""}`, "data-step-id": st.id, "data-status": status ?? null },
        s("title", {}, `${st.id} (${st.kind})${status ? `: ${status}` : ""}. ${what(st)}`),
        s("rect", { x: LEFT, y: y(i), width: W, height: BOX, rx: 6, class: "rg-box" }),
        s("text", { x: LEFT + 10, y: y(i) + 19, class: "rg-name" }, cut(`${st.id} · ${st.kind}${status ? ` · ${status}` : ""}`, 38)),
        s("text", { x: LEFT + 10, y: y(i) + 36, class: "rg-what" }, cut(what(st), 40)),
      ),
    );
  });
  svg.append(
    s(
      "g",
      { class: "node rg-end" },
      s("rect", { x: cx - 40, y: y(steps.length), width: 80, height: BOX - 10, rx: 18, class: "rg-box" }),
      s("text", { x: cx, y: y(steps.length) + 23, class: "rg-name", "text-anchor": "middle" }, "end"),
    ),
  );
  return h("figure", { class: "graph-box" }, svg);
}
