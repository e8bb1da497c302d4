// Small building blocks the runner, scheduled-task, publishing, skill, channel,
// code-session, webhook and organization pages share: a labelled field that
// answers its input too, a status line read out by screen readers, a table whose
// rows become cards on a narrow screen, dates ("-" for none), and a secret shown
// once. formkit.js has the rest (a delete that asks twice, ids in paths, links).
// Everything goes through dom.js's h(): API answers stay text.

import { h } from "../dom.js";
import { uid } from "./formkit.js";

// shared with the other Manage pages: one id counter for the whole console
export { parseJson, uid } from "./formkit.js";

/**
 * A labelled control: field("Name", "input", {required: true}) answers
 * {wrap, input}; `wrap` is a label over the control, tied by for/id.
 */
export function field(label, tag, attrs = {}, ...children) {
  const id = attrs.id ?? uid("f");
  const input = h(tag, { ...attrs, id }, ...children);
  const wrap = h("div", { class: "field" }, h("label", { for: id }, label), input);
  return { wrap, input };
}

/** A checkbox with its label after it. */
export function checkbox(label, attrs = {}) {
  const id = attrs.id ?? uid("c");
  const input = h("input", { type: "checkbox", ...attrs, id });
  return { wrap: h("label", { class: "check", for: id }, input, ` ${label}`), input };
}

/** A <select> of [value, text] pairs. */
export function options(pairs, selected) {
  return pairs.map(([value, text]) =>
    h("option", { value, selected: value === selected ? true : null }, text ?? value),
  );
}

/** A status line: screen readers announce what is put in it. */
export function statusLine(cls = "") {
  const el = h("p", { class: `muted small status-line ${cls}`.trim(), role: "status", "aria-live": "polite" });
  el.say = (text) => {
    el.textContent = text;
  };
  return el;
}

/** A section of a page, with its heading. */
export function section(title, attrs, ...children) {
  return h("section", { class: "mpage-section", ...attrs }, h("h3", {}, title), ...children);
}

/** A table: cols = [[heading, row => cell]], rows = objects. */
export function table(cols, rows, attrs = {}) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { class: "mtable", ...attrs },
      h("thead", {}, h("tr", {}, cols.map(([name]) => h("th", { scope: "col" }, name)))),
      h(
        "tbody",
        {},
        // data-label: a narrow screen shows each row as a card, a cell under its column's name
        rows.map((row) => h("tr", { "data-id": row.id ?? null }, cols.map(([name, cell]) => h("td", { "data-label": name }, cell(row))))),
      ),
    ),
  );
}

/** A date-time as the reader's local time ("-" for none). */
export function when(iso) {
  if (!iso) return "-";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/** A number input's value: a number, or null when empty. */
export function numberOrNull(input) {
  const v = input.value.trim();
  return v === "" ? null : Number(v);
}

/** A status badge: the class says which state, the text says it too. */
export function badge(status) {
  return h("span", { class: `badge st-${String(status).replace(/[^a-z_]/gi, "")}` }, String(status));
}

/**
 * A secret shown once (a token, a signing secret): in a read-only field the
 * user can select, with a note that it will not be shown again.
 */
export function secretOnce(label, value) {
  const { wrap } = field(label, "input", { value, readonly: true, class: "secret-once", spellcheck: "false" });
  return h("div", { class: "once", role: "alert" }, wrap, h("p", { class: "small" }, "Copy it now: it is shown this once."));
}
