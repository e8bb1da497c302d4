// The building blocks every Manage page shares: labelled fields, checkboxes and
// selects, a status line screen readers announce, a titled section, a table
// whose rows become cards on a narrow screen, badges, dates, a secret shown once,
// a delete button that asks twice (no window.confirm: a keyboard user and a test
// answer it the same way), JSON typed by the user, ids in paths and links.
// Everything an API answer holds goes in as text (dom.js's h()).

import { h } from "../dom.js";

let counter = 0;

/** A fresh element id, one counter for the whole console (labels point at their inputs with it). */
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** A path segment: an id from an answer never changes the path's shape. */
export const enc = (value) => encodeURIComponent(String(value));

/** An answer's snake_case name as a request body's camelCase one (fetch_timeout_ms -> fetchTimeoutMs). */
export const camel = (name) => name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());

/**
 * A label above its control. `control` is an element (input, select,
 * textarea); it gets an id when it has none. `hint` is a short muted line.
 */
export function field(label, control, hint) {
  if (!control.id) control.id = uid("f");
  return h(
    "div",
    { class: "field" },
    h("label", { for: control.id }, label),
    control,
    hint ? h("span", { class: "muted small" }, hint) : null,
  );
}

/**
 * field() that builds its control too: labelled("Name", "input", {required: true})
 * answers {wrap, input}, `wrap` the label over the control.
 */
export function labelled(label, tag, attrs = {}, ...children) {
  const input = h(tag, attrs, ...children);
  return { wrap: field(label, input), input };
}

/** A checkbox with its label after it: {input, wrap}. */
export function check(label, attrs = {}) {
  const input = h("input", { type: "checkbox", id: uid("c"), ...attrs });
  return { input, wrap: h("label", { class: "check", for: input.id }, input, ` ${label}`) };
}

/** The <option>s of [value, text] pairs (text defaults to the value), `selected` chosen. */
export function options(pairs, selected) {
  return pairs.map(([value, text]) =>
    h("option", { value, selected: selected != null && String(value) === String(selected) }, text ?? value),
  );
}

/** A <select> of [value, text] pairs, `current` selected. */
export function select(pairs, current, attrs) {
  return h("select", attrs ?? {}, options(pairs, current ?? ""));
}

/** A status line screen readers announce (aria-live polite); `say(text)` puts text in it. */
export function status(attrs) {
  const el = h("span", { class: "muted small status-line", "aria-live": "polite", role: "status", ...attrs });
  el.say = (text) => {
    el.textContent = text;
  };
  return el;
}

/**
 * A button that deletes (or revokes) only on a second press: the first turns
 * it into "Press again to <label>"; leaving it (blur) or Escape resets it.
 */
export function dangerButton(label, action, attrs) {
  const button = h("button", { type: "button", class: "danger", ...attrs }, label);
  let armed = false;
  const reset = () => {
    armed = false;
    button.textContent = label;
    button.removeAttribute("data-armed");
  };
  button.addEventListener("click", async (event) => {
    if (!armed) {
      armed = true;
      button.textContent = `Press again to ${label.toLowerCase()}`;
      button.setAttribute("data-armed", "true");
      return;
    }
    reset();
    await action(event);
  });
  button.addEventListener("blur", reset);
  button.addEventListener("keydown", (e) => {
    if (e.key === "Escape") reset();
  });
  return button;
}

const isAttrs = (value) => value !== null && Object.getPrototypeOf(value) === Object.prototype;

/** A titled part of a page: section(title, ...children), or section(title, {id: ...}, ...children). */
export function section(title, ...children) {
  const attrs = isAttrs(children[0]) ? children.shift() : {};
  return h("section", { class: "mpart", "aria-label": title, ...attrs }, h("h3", {}, title), ...children);
}

/** A table: cols = [[heading, row => cell]], rows = objects (a row's id goes in data-id). */
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

/** A date from the API (ISO 8601) in the reader's local time; `none` when there is none. */
export function when(iso, none = "-") {
  if (!iso) return none;
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? String(iso) : d.toLocaleString();
}

/**
 * A small badge: the text says the state; the class is `kind` (ok, bad, warn,
 * info) or, without one, st-<state> (the style sheet colours those).
 */
export function badge(text, kind) {
  return h("span", { class: `badge ${kind ?? `st-${String(text).replace(/[^a-z_]/gi, "")}`}` }, String(text));
}

/**
 * A secret shown once (a token, a signing secret): in a read-only field the
 * user can select, with a note that it will not be shown again.
 */
export function secretOnce(label, value) {
  const { wrap } = labelled(label, "input", { value, readonly: true, class: "secret-once", spellcheck: "false" });
  return h("div", { class: "once", role: "alert" }, wrap, h("p", { class: "small" }, "Copy it now: it is shown this once."));
}

/** The paragraph a page shows when it needs the side bar's agent. */
export function needAgent(what) {
  return h("p", { class: "muted" }, `Pick or create an agent in the side bar to ${what}.`);
}

/** Parses JSON typed by the user; a mistake is an Error naming the field. */
export function parseJson(text, name, fallback) {
  const trimmed = text.trim();
  if (!trimmed) return fallback;
  try {
    return JSON.parse(trimmed);
  } catch (err) {
    throw new Error(`${name} is not valid JSON: ${err.message}`);
  }
}

/** A number input's value: a number, or null when empty. */
export function numberOrNull(input) {
  const v = input.value.trim();
  return v === "" ? null : Number(v);
}

/** Names from a text box: split on commas and line breaks, blanks dropped. */
export function names(text) {
  return text
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A form's last row: its submit button, then its status line (status()). */
export function submitRow(label, said) {
  return h("div", { class: "row" }, h("button", { type: "submit" }, label), said);
}

/** Runs `handler` when the form is submitted (the default send prevented). */
export function onSubmit(form, ctx, handler) {
  form.addEventListener("submit", ctx.guarded(handler));
  return form;
}

/** Appends children, leaving out null, undefined and false (Element.append prints them). */
export function add(el, ...children) {
  el.append(...children.flat(Infinity).filter((c) => c !== null && c !== undefined && c !== false));
  return el;
}

/** A link target from an answer, only when it is http(s): never javascript: or data:. */
export function webUrl(text) {
  const url = new URL(String(text), location.href);
  if (url.protocol !== "https:" && url.protocol !== "http:") {
    throw new Error(`the service answered a link that is not a web address (${url.protocol})`);
  }
  return url.href;
}
