// Integrations: the organization's database connections (PostgreSQL, read
// only). Register one (the service tests the connection first; the connection
// string is write-only), attach it to the side bar's agent with the tools whose
// calls wait for approval, detach it, change it (Edit: only the fields changed
// are sent; a blank connection keeps the stored one), delete it.

import { h } from "../dom.js";
import { add, check, dangerButton, enc, field, names, onSubmit, section, status, submitRow } from "./formkit.js";

const DB_TOOLS = ["list_tables", "describe_table", "query"];

function registerForm(ctx) {
  const name = h("input", { required: true, maxlength: 200, placeholder: "Warehouse", "data-field": "name" });
  const connection = h("input", {
    type: "password", required: true, autocomplete: "off", spellcheck: "false",
    placeholder: "postgresql://reader:...@db.example.com:5432/shop", "data-field": "connection",
  });
  const tables = h("input", { placeholder: "blank: every table", "data-field": "allowedTables" });
  const maxRows = h("input", { type: "number", min: 1, max: 10000, placeholder: "200", "data-field": "maxRows" });
  const timeout = h("input", { type: "number", min: 100, max: 60000, placeholder: "5000", "data-field": "statementTimeoutMs" });
  const saved = status({ id: "integration-saved" });
  const form = h(
    "form",
    { class: "stack", id: "integration-register", "aria-label": "Register a database" },
    field("Name", name, "The tools are named db_<slug>__list_tables, __describe_table and __query."),
    field("Connection (write-only; tested before it is kept)", connection),
    field("Allowed tables (comma separated)", tables),
    field("Rows per answer at most", maxRows),
    field("Statement timeout in milliseconds", timeout),
    submitRow("Register", saved),
  );
  onSubmit(form, ctx, async () => {
    const body = { name: name.value.trim(), type: "postgresql", connection: connection.value };
    const only = names(tables.value);
    if (only.length) body.allowedTables = only;
    if (maxRows.value) body.maxRows = Number(maxRows.value);
    if (timeout.value) body.statementTimeoutMs = Number(timeout.value);
    saved.textContent = "testing the connection...";
    try {
      await ctx.api.post("/api/integrations", body);
    } catch (err) {
      saved.textContent = "not registered";
      throw err;
    } finally {
      connection.value = ""; // never kept in the page
    }
    await ctx.refresh();
  });
  return form;
}

function attachPart(ctx, integration, attachment) {
  const agent = ctx.agent();
  if (!agent) return h("p", { class: "muted small" }, "Pick an agent in the side bar to attach it.");
  const waiting = new Set(attachment?.require_approval ?? []);
  const boxes = DB_TOOLS.map((t) => check(`${t} waits for approval`, { checked: waiting.has(t), value: t }));
  const form = h(
    "form",
    { class: "stack", "data-attach": integration.id },
    h("p", { class: "small" }, attachment ? `Attached to ${agent.name}.` : `Not attached to ${agent.name}.`),
    h("div", { class: "row wrap" }, boxes.map((b) => b.wrap)),
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit" }, attachment ? "Save approvals" : `Attach to ${agent.name}`),
      attachment
        ? h("button", {
            type: "button",
            "data-detach": integration.id,
            onclick: ctx.guarded(async () => {
              const q = new URLSearchParams({ integrationId: integration.id });
              await ctx.api.delete(`/api/agents/${enc(agent.id)}/integrations?${q}`);
              await ctx.refresh();
            }),
          }, "Detach")
        : null,
    ),
  );
  onSubmit(form, ctx, async () => {
    const requireApproval = boxes.filter((b) => b.input.checked).map((b) => b.input.value);
    await ctx.api.post(`/api/agents/${enc(agent.id)}/integrations`, { integrationId: integration.id, requireApproval });
    await ctx.refresh();
  });
  return form;
}

/** Edit: PATCH what changed; the connection only when typed (blank keeps it). */
function editForm(ctx, integration) {
  const i = integration;
  const name = h("input", { value: i.name, required: true, maxlength: 200, "data-field": "edit-name" });
  const connection = h("input", {
    type: "password", autocomplete: "off", spellcheck: "false",
    placeholder: "blank keeps the stored one", "data-field": "edit-connection",
  });
  const tables = h("input", { value: (i.allowed_tables ?? []).join(", "), placeholder: "blank: every table", "data-field": "edit-allowedTables" });
  const maxRows = h("input", { type: "number", min: 1, max: 10000, value: i.max_rows, "data-field": "edit-maxRows" });
  const maxBytes = h("input", { type: "number", min: 1024, max: 1048576, value: i.max_bytes, "data-field": "edit-maxBytes" });
  const timeout = h("input", { type: "number", min: 100, max: 60000, value: i.statement_timeout_ms, "data-field": "edit-statementTimeoutMs" });
  const saved = status({ "data-edit-saved": i.id });
  const form = h(
    "form",
    { class: "stack", "data-edit": i.id },
    field("Name", name, "A new name gives new tool names (db_<slug>__...); attachments stay."),
    field("Connection (write-only; tested before it is kept)", connection),
    field("Allowed tables (comma separated)", tables),
    field("Rows per answer at most", maxRows),
    field("Bytes per answer at most", maxBytes),
    field("Statement timeout in milliseconds", timeout),
    submitRow("Save integration", saved),
  );
  onSubmit(form, ctx, async () => {
    const body = {};
    if (name.value.trim() !== i.name) body.name = name.value.trim();
    if (connection.value) body.connection = connection.value;
    const only = names(tables.value);
    if (only.join(",") !== (i.allowed_tables ?? []).join(",")) body.allowedTables = only.length ? only : null;
    for (const [input, key, was] of [[maxRows, "maxRows", i.max_rows], [maxBytes, "maxBytes", i.max_bytes], [timeout, "statementTimeoutMs", i.statement_timeout_ms]]) {
      if (input.value !== "" && Number(input.value) !== was) body[key] = Number(input.value);
    }
    saved.textContent = body.connection ? "testing the connection..." : "saving...";
    try {
      await ctx.api.patch(`/api/integrations/${enc(i.id)}`, body);
    } catch (err) {
      saved.textContent = "not saved";
      throw err;
    } finally {
      connection.value = ""; // never kept in the page
    }
    await ctx.refresh();
  });
  return h("details", {}, h("summary", {}, "Edit"), form);
}

function card(ctx, integration, attachment) {
  return h(
    "li",
    { class: "card", "data-integration-id": integration.id },
    h(
      "div",
      { class: "row wrap" },
      h("strong", {}, integration.name),
      h("code", {}, integration.slug),
      h("span", { class: "muted small" }, `${integration.type}, read only`),
    ),
    h(
      "p",
      { class: "small" },
      "Tools: ",
      DB_TOOLS.map((t) => h("code", { class: "chip" }, `db_${integration.slug}__${t}`)),
    ),
    h(
      "p",
      { class: "muted small" },
      `Tables: ${integration.allowed_tables?.length ? integration.allowed_tables.join(", ") : "all"} · `
        + `at most ${integration.max_rows} rows and ${integration.max_bytes} bytes an answer · `
        + `statements stop after ${integration.statement_timeout_ms} ms`,
    ),
    editForm(ctx, integration),
    attachPart(ctx, integration, attachment),
    h("div", { class: "row" }, dangerButton("Delete", ctx.guarded(async () => {
      await ctx.api.delete(`/api/integrations/${enc(integration.id)}`);
      await ctx.refresh();
    }), { "data-delete": integration.id })),
  );
}

export default {
  id: "integrations",
  title: "Integrations",
  async render(root, ctx) {
    const agent = ctx.agent();
    const [all, attached] = await Promise.all([
      ctx.api.get("/api/integrations"),
      agent ? ctx.api.get(`/api/agents/${enc(agent.id)}/integrations`) : [],
    ]);
    const on = new Map(attached.map((a) => [a.id, a]));
    add(root, 
      h("h2", {}, "Integrations"),
      h("p", { class: "muted small" }, "Databases the organization's agents may read, one read-only transaction a call."),
      all.length
        ? h("ul", { class: "plain cards", id: "integration-list" }, all.map((i) => card(ctx, i, on.get(i.id))))
        : h("p", { class: "muted" }, "No integration yet."),
      section("Register a PostgreSQL database", registerForm(ctx)),
    );
  },
};
