// Small building blocks the Manage pages of agents, MCP servers, tools,
// integrations, knowledge, memories, plans and API keys share: labelled fields,
// a polite status line, a delete button that asks twice (no window.confirm:
// a keyboard user and a test answer it the same way), dates and ids in paths.
// Everything an API answer holds goes in as text (dom.js's h()).

import { h } from "../dom.js";

let counter = 0;

/** A fresh element id (labels point at their inputs with it). */
export function uid(prefix) {
  counter += 1;
  return `${prefix}-${counter}`;
}

/** A path segment: an id from an answer never changes the path's shape. */
export const enc = (value) => encodeURIComponent(String(value));

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

/** A checkbox with its label to the right. */
export function check(label, attrs) {
  const box = h("input", { type: "checkbox", id: uid("c"), ...attrs });
  return { box, el: h("label", { class: "check", for: box.id }, box, ` ${label}`) };
}

/** A <select> of [value, text] pairs, `current` selected. */
export function select(options, current, attrs) {
  return h(
    "select",
    attrs ?? {},
    options.map(([value, text]) =>
      h("option", { value, selected: String(value) === String(current ?? "") }, text),
    ),
  );
}

/** A status line screen readers announce (aria-live polite). */
export function status(attrs) {
  return h("span", { class: "muted small status-line", "aria-live": "polite", role: "status", ...attrs });
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

/** A titled part of a page. */
export function section(title, ...children) {
  return h("section", { class: "mpart", "aria-label": title }, h("h3", {}, title), ...children);
}

/** A date from the API (ISO 8601) for people, or "never". */
export function when(iso) {
  return iso ? new Date(iso).toLocaleString() : "never";
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

/** Names from a text box: split on commas and line breaks, blanks dropped. */
export function names(text) {
  return text
    .split(/[\n,]/)
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A small badge (a status such as ready, failed, revoked). */
export function badge(text, kind) {
  return h("span", { class: `badge ${kind ?? text}` }, text);
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
