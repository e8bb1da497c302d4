// One message of the chat as a list item: its text as Markdown (markdown.js:
// elements only, never parsed HTML), tool calls folded in <details> with their
// arguments and results, "< 2 of 3 >" between the versions at its place in the
// thread's tree, and its actions (copy, edit, regenerate, fork, trace).

import { h, pretty } from "./dom.js";
import { render } from "./markdown.js";

/**
 * A stored message (GET /api/threads/{id}/messages) as an <li>. ``actions`` holds
 * the handlers: copy(m), edit(m, content), regenerate(m), fork(m), switchTo(id),
 * trace(m); ``last`` says whether it is the branch's last message (regenerate
 * is offered there only); ``notes`` its tool calls, if any; ``meta`` the line
 * the page wrote under it live (model, state, tokens), if it saw it.
 */
export function messageView(m, { actions, last, notes, meta }) {
  const role = m.role;
  const text = h("div", { class: "text md" });
  text.append(render(m.content));
  const item = h(
    "li",
    {
      class: `message ${role}`,
      "data-message-id": m.id,
      "data-status": m.status,
      "aria-label": `${role} message`,
    },
    h(
      "div",
      { class: "head" },
      h("span", { class: "role" }, m.sender_name ? `${role} · ${m.sender_name}` : role),
      m.sibling_count > 1 ? branchNav(m, actions) : null,
    ),
    notes ?? h("div", { class: "notes" }),
    text,
  );
  const unfinished = m.status && m.status !== "complete";
  if (unfinished) item.classList.add(m.status);
  if (meta || unfinished) item.append(h("div", { class: "meta muted small" }, meta ?? m.status));
  item.append(toolbar(m, item, text, actions, last));
  return item;
}

function branchNav(m, actions) {
  const go = (id, label) =>
    h(
      "button",
      {
        type: "button",
        class: "icon",
        "aria-label": label,
        disabled: !id,
        onclick: id ? () => actions.switchTo(id) : null,
      },
      label.startsWith("previous") ? "‹" : "›",
    );
  return h(
    "span",
    { class: "branch-nav", role: "group", "aria-label": "versions of this message" },
    go(m.prev_sibling_id, "previous version"),
    h("span", { class: "branch-pos" }, `${m.sibling_index} of ${m.sibling_count}`),
    go(m.next_sibling_id, "next version"),
  );
}

function toolbar(m, item, text, actions, last) {
  const button = (label, action, name) =>
    h("button", { type: "button", class: "act", "data-action": name, "aria-label": `${label}: ${m.role} message`, onclick: action }, label);
  const bar = h("div", { class: "actions", role: "toolbar", "aria-label": "message actions" });
  bar.append(button("Copy", () => actions.copy(m), "copy"));
  if (m.role === "user") bar.append(button("Edit", () => editInPlace(m, item, text, actions), "edit"));
  if (m.role === "assistant" && last) bar.append(button("Regenerate", () => actions.regenerate(m), "regenerate"));
  bar.append(button("Fork", () => actions.fork(m), "fork"));
  if (m.role === "assistant") bar.append(button("Trace", () => actions.trace(m), "trace"));
  return bar;
}

/** The message's text becomes a form; saving sends the edit (a new branch). */
function editInPlace(m, item, text, actions) {
  if (item.querySelector("form.edit")) return;
  const id = `edit-${m.id}`;
  const area = h("textarea", { id, rows: 3, class: "edit-text" });
  area.value = m.content;
  const form = h(
    "form",
    { class: "edit stack" },
    h("label", { for: id, class: "small muted" }, "Edit the message (a new branch; the old one stays)"),
    area,
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit", class: "edit-save" }, "Save and send"),
      h("button", { type: "button", class: "edit-cancel", onclick: () => cancel() }, "Cancel"),
    ),
  );
  const cancel = () => {
    form.remove();
    text.hidden = false;
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    if (!area.value.trim()) return;
    actions.edit(m, area.value);
  });
  area.addEventListener("keydown", (e) => {
    if (e.key === "Escape") cancel();
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) form.requestSubmit();
  });
  text.hidden = true;
  text.after(form);
  area.focus();
}

/** A reply streaming in: its parts, filled by the Chat as events arrive. */
export function replyView() {
  const text = h("div", { class: "text md" });
  const meta = h("div", { class: "meta muted small" });
  const notes = h("div", { class: "notes" });
  const item = h(
    "li",
    { class: "message assistant streaming", "aria-label": "assistant reply", "aria-busy": "true" },
    h("div", { class: "head" }, h("span", { class: "role" }, "assistant")),
    notes,
    text,
    meta,
  );
  let source = "";
  let queued = false;
  return {
    item,
    text,
    meta,
    notes,
    get content() {
      return source;
    },
    /** Adds a token; the Markdown is drawn again at most once a frame. */
    append(delta) {
      source += delta;
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => {
        queued = false;
        text.replaceChildren(render(source));
      });
    },
    flush() {
      text.replaceChildren(render(source));
    },
  };
}

/** A user message shown before the API has stored it (it has no id yet). */
export function pendingUserView(content) {
  const text = h("div", { class: "text md" });
  text.append(render(content));
  return h(
    "li",
    { class: "message user pending", "aria-label": "user message" },
    h("div", { class: "head" }, h("span", { class: "role" }, "user")),
    text,
  );
}

/**
 * A tool call, folded: its name in the summary, its arguments inside; the result
 * joins the same fold when it comes (matched by the call's id).
 */
export function toolNote(notes, call, mine) {
  const fold = h(
    "details",
    { class: "note tool-call", "data-tool-call-id": call.id },
    h("summary", { class: "note-title" }, mine ? `your tool ${call.name}` : `tool call ${call.name}`),
    h("div", { class: "small muted" }, "arguments"),
    h("pre", { class: "tool-args" }, pretty(call.arguments)),
  );
  notes.append(fold);
  return fold;
}

export function toolResultNote(notes, data) {
  const call = [...notes.querySelectorAll("details.tool-call")].find(
    (d) => d.dataset.toolCallId === data.tool_call_id,
  );
  const result = h(
    "div",
    { class: "note tool-result", "data-tool-call-id": data.tool_call_id },
    h("div", { class: "note-title" }, `tool result ${data.tool_name}`),
    h("pre", {}, pretty(data.result)),
  );
  if (call) {
    call.append(result);
    call.querySelector("summary").append(" · returned");
  } else {
    notes.append(h("details", { class: "note tool-call" }, h("summary", { class: "note-title" }, `tool result ${data.tool_name}`), result));
  }
}

export function plainNote(notes, kind, title, body) {
  notes.append(
    h("div", { class: `note ${kind}` }, h("div", { class: "note-title" }, title), body ? h("pre", {}, body) : null),
  );
}

/**
 * The tool calls of the listed replies, from the thread's context (GET
 * /api/threads/{id}/context: the history lists no tool step). A call and its
 * result go with the next listed assistant message: the reply that went on
 * after them. Answers a Map of message id -> notes element.
 */
export function contextNotes(context, listed) {
  const ids = new Set(listed.filter((m) => m.role === "assistant").map((m) => m.id));
  const found = new Map();
  let notes = null;
  const names = new Map(); // tool call id -> tool name
  for (const m of context) {
    if (m.role === "assistant" && m.tool_calls?.length) {
      notes ??= h("div", { class: "notes" });
      for (const call of m.tool_calls) {
        names.set(call.id, call.name);
        toolNote(notes, call, false);
      }
    } else if (m.role === "tool" && notes) {
      const name = names.get(m.tool_call_id) ?? m.sender_name ?? "tool";
      toolResultNote(notes, { tool_call_id: m.tool_call_id, tool_name: name, result: m.content });
    }
    if (m.role === "assistant" && ids.has(m.id) && notes) {
      found.set(m.id, notes);
      notes = null;
    }
  }
  return found;
}
