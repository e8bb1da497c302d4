// MCP servers: register one (HTTP or stdio), test it (connects, lists and
// refreshes its tools), connect it with OAuth where it is an HTTP server, attach
// it to the side bar's agent (with the tools allowed and those that wait for
// approval), delete it; an HTTP server shows whether the signed-in caller holds an
// OAuth grant for it (Connected / Not connected) and can disconnect it; and the managed OAuth providers this deployment offers.
// Credentials typed here are sent once and never shown again (the API answers
// hasCredentials only).

import { h } from "../dom.js";
import { add, badge, dangerButton, enc, field, names, onSubmit, parseJson, section, select, status, webUrl, when } from "./formkit.js";

const HTTP = new Set(["streamable_http", "sse"]);

function registerForm(ctx) {
  const name = h("input", { required: true, maxlength: 200, "data-field": "name" });
  const transport = select(
    [["streamable_http", "streamable HTTP"], ["sse", "SSE (older HTTP)"], ["stdio", "stdio (a local command)"]],
    "streamable_http",
    { "data-field": "transport" },
  );
  const url = h("input", { type: "url", placeholder: "https://mcp.example.com/mcp", "data-field": "url" });
  const command = h("input", { placeholder: "npx", "data-field": "command" });
  const args = h("textarea", { rows: 2, placeholder: "one argument a line", "data-field": "args" });
  const headers = h("textarea", { rows: 2, placeholder: '{"Authorization": "Bearer ..."}', "data-field": "headers" });
  const env = h("textarea", { rows: 2, placeholder: '{"API_TOKEN": "..."}', "data-field": "env" });
  const allowed = h("input", { placeholder: "blank: every tool", "data-field": "allowedTools" });
  const httpPart = h("div", { class: "stack" }, field("URL", url), field("Headers (JSON, write-only)", headers));
  const stdioPart = h(
    "div",
    { class: "stack", hidden: true },
    field("Command", command),
    field("Arguments", args),
    field("Environment (JSON, write-only)", env),
  );
  const shown = () => {
    const http = HTTP.has(transport.value);
    httpPart.hidden = !http;
    stdioPart.hidden = http;
  };
  transport.addEventListener("change", shown);
  const form = h(
    "form",
    { class: "stack", id: "mcp-register", "aria-label": "Register an MCP server" },
    field("Name", name, "The slug, and so the tools' prefix, comes from it."),
    field("Transport", transport),
    httpPart,
    stdioPart,
    field("Allowed tools (comma separated)", allowed),
    h("div", {}, h("button", { type: "submit" }, "Register")),
  );
  onSubmit(form, ctx, async () => {
    const body = { name: name.value.trim(), transport: transport.value };
    if (HTTP.has(transport.value)) {
      body.url = url.value.trim();
      const hd = parseJson(headers.value, "Headers", null);
      if (hd) body.credentials = { headers: hd };
    } else {
      body.command = command.value.trim();
      body.args = args.value.split("\n").map((a) => a.trim()).filter(Boolean);
      const ev = parseJson(env.value, "Environment", null);
      if (ev) body.credentials = { env: ev };
    }
    const only = names(allowed.value);
    if (only.length) body.allowedTools = only;
    const made = await ctx.api.post("/api/mcps", body);
    await ctx.api.post(`/api/mcps/${enc(made.id)}/test`); // its tools, at once
    await ctx.refresh();
  });
  return form;
}

/** The attach / detach controls of one server for the side bar's agent. */
function attachPart(ctx, server, attachment) {
  const agent = ctx.agent();
  if (!agent) return h("p", { class: "muted small" }, "Pick an agent in the side bar to attach it.");
  const allowed = h("input", {
    value: (attachment?.allowedTools ?? []).join(", "), placeholder: "blank: every tool", "data-field": "attach-allowed",
  });
  const approval = h("input", {
    value: (attachment?.requireApproval ?? []).join(", "), placeholder: "tools whose calls wait for approval", "data-field": "attach-approval",
  });
  const form = h(
    "form",
    { class: "stack attach", "data-attach": server.id },
    h(
      "p",
      { class: "small" },
      attachment
        ? `Attached to ${agent.name}: the model sees ${attachment.effectiveTools.map((t) => `${server.slug}__${t}`).join(", ") || "no tool"}.`
        : `Not attached to ${agent.name}.`,
    ),
    field("Tools the agent may use", allowed),
    field("Tools that wait for approval", approval),
    h(
      "div",
      { class: "row" },
      h("button", { type: "submit" }, attachment ? "Save attachment" : `Attach to ${agent.name}`),
      attachment
        ? h("button", {
            type: "button",
            "data-detach": server.id,
            onclick: ctx.guarded(async () => {
              await ctx.api.delete(`/api/agents/${enc(agent.id)}/mcps`, { mcpServerId: server.id });
              await ctx.refresh();
            }),
          }, "Detach")
        : null,
    ),
  );
  onSubmit(form, ctx, async () => {
    const body = { mcpServerId: server.id, requireApproval: names(approval.value) };
    const only = names(allowed.value);
    if (only.length) body.allowedTools = only;
    await ctx.api.post(`/api/agents/${enc(agent.id)}/mcps`, body);
    await ctx.refresh();
  });
  return form;
}

/** Edit: PATCH the fields changed; credentials only when typed (blank keeps them). */
function editForm(ctx, server) {
  const http = HTTP.has(server.transport);
  const name = h("input", { value: server.name, required: true, maxlength: 200, "data-field": "edit-name" });
  const where = http
    ? h("input", { type: "url", value: server.url ?? "", "data-field": "edit-url" })
    : h("input", { value: server.command ?? "", "data-field": "edit-command" });
  const args = http ? null : h("textarea", { rows: 2, "data-field": "edit-args" }, (server.args ?? []).join("\n"));
  const secrets = h("textarea", {
    rows: 2, "data-field": "edit-credentials",
    placeholder: server.hasCredentials ? "set: blank keeps them; {} removes them" : "none set",
  });
  const allowed = h("input", { value: (server.allowedTools ?? []).join(", "), placeholder: "blank: every tool", "data-field": "edit-allowed" });
  const form = h(
    "form",
    { class: "stack", "data-edit": server.id },
    field("Name", name),
    field(http ? "URL" : "Command", where),
    args ? field("Arguments (one a line)", args) : null,
    field(http ? "Headers (JSON, replaces the stored ones)" : "Environment (JSON, replaces the stored one)", secrets),
    field("Allowed tools", allowed),
    h("div", {}, h("button", { type: "submit" }, "Save server")),
  );
  onSubmit(form, ctx, async () => {
    const body = { name: name.value.trim(), allowedTools: names(allowed.value).length ? names(allowed.value) : null };
    // only what changed: a new address or command clears the listed tools (and OAuth tokens)
    if (http && where.value.trim() !== (server.url ?? "")) body.url = where.value.trim();
    if (!http) {
      const argv = args.value.split("\n").map((a) => a.trim()).filter(Boolean);
      if (where.value.trim() !== (server.command ?? "")) body.command = where.value.trim();
      if (argv.join("\n") !== (server.args ?? []).join("\n")) body.args = argv;
    }
    const typed = parseJson(secrets.value, http ? "Headers" : "Environment", undefined);
    if (typed !== undefined) {
      body.credentials = Object.keys(typed).length ? (http ? { headers: typed } : { env: typed }) : null;
    }
    await ctx.api.patch(`/api/mcps/${enc(server.id)}`, body);
    await ctx.refresh();
  });
  return h("details", {}, h("summary", {}, "Edit"), form);
}

/** The caller's OAuth grant for an HTTP server: Connected (with Disconnect) or not. */
function grantPart(ctx, server, grant) {
  if (!grant) return null;
  const shown = grant.connected
    ? [
        badge("Connected", "ok"),
        h("span", { class: "muted small" }, `${grant.scope ? `scope ${grant.scope}; ` : ""}token until ${when(grant.expiresAt, "no expiry")}`),
        h("button", {
          type: "button",
          "data-oauth-disconnect": server.id,
          onclick: ctx.guarded(async () => {
            await ctx.api.delete(`/api/mcps/${enc(server.id)}/oauth`);
            await ctx.refresh();
          }),
        }, "Disconnect"),
      ]
    : [badge("Not connected", "warn")];
  return h("span", { class: "row wrap", "data-oauth-status": server.id, "data-connected": String(grant.connected) }, ...shown);
}

function serverCard(ctx, server, attachment, grant) {
  const result = status({ "data-test-result": server.id });
  const oauth = h("div", { class: "oauth", "data-oauth": server.id });
  const tools = server.toolsCache ?? [];
  const testButton = h("button", {
    type: "button",
    "data-test": server.id,
    onclick: ctx.guarded(async () => {
      result.textContent = "connecting...";
      const answer = await ctx.api.post(`/api/mcps/${enc(server.id)}/test`);
      if (answer.ok) {
        await ctx.refresh();
      } else {
        result.textContent = `failed: ${answer.error}`;
      }
    }),
  }, "Test and refresh tools");
  const connect = HTTP.has(server.transport)
    ? h("button", {
        type: "button",
        "data-oauth-start": server.id,
        onclick: ctx.guarded(async () => {
          const started = await ctx.api.post(`/api/mcps/${enc(server.id)}/oauth/start`);
          oauth.replaceChildren(
            h("a", { href: webUrl(started.redirectUrl), target: "_blank", rel: "noopener noreferrer", "data-oauth-link": server.id },
              "Open the authorization page"),
            h("span", { class: "muted small" }, ` (valid until ${when(started.expiresAt)}; then test the server again)`),
          );
        }),
      }, "Connect with OAuth")
    : null;
  return h(
    "li",
    { class: "card", "data-mcp-id": server.id },
    h(
      "div",
      { class: "row wrap" },
      h("strong", {}, server.name),
      h("code", {}, server.slug),
      badge(server.status, server.status === "active" ? "ok" : "warn"),
      h("span", { class: "muted small" }, server.transport === "stdio" ? `stdio: ${server.command ?? ""}` : server.url),
    ),
    h(
      "details",
      { open: tools.length > 0 && tools.length <= 6 ? true : null },
      h("summary", {}, `${tools.length} tool(s)`),
      h("ul", { class: "tools", "data-tools": server.id }, tools.map((t) =>
        h("li", {}, h("code", {}, t.name), t.description ? ` ${t.description.split("\n")[0]}` : ""))),
    ),
    h("div", { class: "row wrap" }, testButton, connect, grantPart(ctx, server, grant), dangerButton("Delete", ctx.guarded(async () => {
      await ctx.api.delete(`/api/mcps/${enc(server.id)}`);
      await ctx.refresh();
    }), { "data-delete": server.id }), result),
    oauth,
    editForm(ctx, server),
    attachPart(ctx, server, attachment),
  );
}

function managedPart(ctx, providers) {
  if (!providers.length) return null;
  const agent = ctx.agent();
  return section(
    "Managed OAuth providers",
    h("p", { class: "muted small" }, "One-click connections this deployment may offer; each needs the deployment's OAuth app."),
    h("ul", { class: "plain mlist", id: "mcp-managed" }, providers.map((p) => {
      const link = h("span", {});
      return h(
        "li",
        { "data-provider": p.id },
        h("strong", {}, p.name),
        " ",
        p.available
          ? h("button", {
              type: "button",
              onclick: ctx.guarded(async () => {
                const body = { provider: p.id };
                if (agent) body.agentId = agent.id;
                const started = await ctx.api.post("/api/mcps/managed-oauth/start", body);
                link.replaceChildren(h("a", { href: webUrl(started.authorization_url), target: "_blank", rel: "noopener noreferrer" }, "Open the authorization page"));
              }),
            }, agent ? `Connect for ${agent.name}` : "Connect")
          : h("span", { class: "muted small" }, `not available: ${p.reason}`),
        " ",
        link,
      );
    })),
  );
}

export default {
  id: "mcps",
  title: "MCP servers",
  async render(root, ctx) {
    const agent = ctx.agent();
    const [servers, attached, managed] = await Promise.all([
      ctx.api.get("/api/mcps"),
      agent ? ctx.api.get(`/api/agents/${enc(agent.id)}/mcps`) : [],
      ctx.api.get("/api/mcp-registry/managed").catch(() => []),
    ]);
    const on = new Map(attached.map((a) => [a.mcpServerId, a]));
    // whether the caller holds an OAuth grant, for each HTTP server (null: unknown)
    const grants = new Map(await Promise.all(servers.filter((s) => HTTP.has(s.transport)).map(async (s) =>
      [s.id, await ctx.api.get(`/api/mcps/${enc(s.id)}/oauth`).catch(() => null)])));
    add(root, 
      h("h2", {}, "MCP servers"),
      h("p", { class: "muted small" }, "The organization's servers. Their tools reach an agent once attached; the model sees them as <slug>__<tool>."),
      servers.length
        ? h("ul", { class: "plain cards", id: "mcp-servers" }, servers.map((s) => serverCard(ctx, s, on.get(s.id), grants.get(s.id))))
        : h("p", { class: "muted" }, "No MCP server yet."),
      section("Register a server", registerForm(ctx)),
      managedPart(ctx, managed),
    );
  },
};
