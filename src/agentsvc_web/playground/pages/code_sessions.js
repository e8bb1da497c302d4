// Code sessions: a code agent (a model, a repository, a sandbox) at work on a
// task. The page lists the sessions newest first, starts one, and follows the
// open one's timeline live (GET /api/code-sessions/{id}/events as Server-Sent
// Events; after a dropped connection it re-attaches with Last-Event-ID, so no
// event shows twice), with a follow-up box, cancel and archive. It also lists the
// code agents: add, edit (name, model, repository, git token) and delete one.

import { followLog } from "../api.js";
import { h, pretty } from "../dom.js";
import { badge, check, dangerButton, enc, labelled, onSubmit, options, section, status, submitRow, table, webUrl, when } from "./formkit.js";

const ENDED = new Set(["finished", "error", "cancelled", "expired"]);
let openSession = null;
let follower = null; // the AbortController of the timeline being followed
let editing = null; // the id of the code agent whose edit form is open

/** One timeline event as a list item: its type, and what it says. */
function eventItem(ev) {
  const d = ev.data ?? {};
  let body;
  if (ev.type === "status") body = badge(d.status);
  else if (ev.type === "message") body = h("span", {}, h("strong", {}, `${d.role}: `), d.content);
  else if (ev.type === "tool_call") body = h("span", {}, h("code", {}, d.name), " ", h("code", {}, pretty(d.arguments)));
  else if (ev.type === "tool_result") body = h("details", {}, h("summary", {}, `${d.name}${d.is_error ? " (error)" : ""}`), h("pre", {}, pretty(d.output)));
  else if (ev.type === "command") body = h("details", {}, h("summary", {}, h("code", {}, `$ ${d.command}`), ` exit ${d.exit_code}`), h("pre", {}, d.output ?? ""));
  else if (ev.type === "file_change") body = h("details", {}, h("summary", {}, `${d.change} ${d.path}${d.final ? " (pushed)" : ""}`), h("pre", { class: "diff" }, d.diff ?? ""));
  else if (ev.type === "pull_request") body = h("a", { href: webUrl(d.url), target: "_blank", rel: "noopener noreferrer" }, `pull request #${d.number} (${d.branch})`);
  else if (ev.type === "notice" && typeof d.text === "string") body = d.text;
  else if (ev.type === "usage") body = `${d.input_tokens} in / ${d.output_tokens} out tokens, $${d.cost_usd}`;
  else body = h("code", {}, pretty(d));
  return h("li", { "data-seq": ev.seq, "data-type": ev.type }, h("span", { class: "ev-type" }, ev.type), body);
}

/** Follows a session's events into `list` until it ends or the page is left. */
function follow(ctx, session, list, onStatus) {
  follower?.abort();
  const controller = new AbortController();
  follower = controller;
  const path = `/api/code-sessions/${enc(session.id)}`;
  return followLog(ctx.api, `${path}/events`, list, controller, {
    what: "the timeline",
    onEvent: (e) => {
      list.append(eventItem(e));
      list.scrollTop = list.scrollHeight;
      if (e.type === "status") onStatus(e.data.status);
      return false; // a session's end is read from the session (a waiting one has no last event)
    },
    // the stream ended: because the session did, or the connection dropped
    ended: async (last) => {
      const now = await ctx.api.get(path);
      onStatus(now.status);
      return ENDED.has(now.status) && now.last_event_seq <= (last ?? 0) ? null : 1000;
    },
  });
}

function sessionView(ctx, session) {
  const state = h("span", { id: "session-status", "data-status": session.status }, badge(session.status));
  const list = h("ol", { class: "timeline", id: "session-timeline", "aria-label": "Timeline", "aria-live": "polite" });
  const onStatus = (status) => {
    state.dataset.status = status;
    state.replaceChildren(badge(status));
    // the list above shows it too
    document.querySelector(`#session-table tr[data-id="${session.id}"] .badge`)?.replaceWith(badge(status));
  };
  const act = (what) =>
    ctx.guarded(async () => {
      const s = await ctx.api.post(`/api/code-sessions/${enc(session.id)}/${what}`);
      onStatus(s.status);
      if (what === "archive") await ctx.refresh();
    });
  const reply = labelled("Follow-up (the answer to the model's question, or a next instruction)", "input", { id: "session-reply" });
  const replyStatus = status();
  const form = h("form", { class: "row" }, reply.wrap, h("button", { type: "submit" }, "Send"), replyStatus);
  reply.wrap.classList.add("grow");
  onSubmit(form, ctx, async () => {
    await ctx.api.post(`/api/code-sessions/${enc(session.id)}/messages`, { content: reply.input.value });
    reply.input.value = "";
    replyStatus.say("sent");
  });
  const view = section(
    session.title || session.id,
    { id: "session-detail", "data-session-id": session.id },
    h(
      "dl",
      { class: "facts" },
      h("dt", {}, "status"),
      h("dd", {}, state),
      h("dt", {}, "repository"),
      h("dd", {}, `${session.repo_url}${session.ref ? ` @ ${session.ref}` : ""}`),
      h("dt", {}, "branch / pull request"),
      h("dd", {}, `${session.branch ?? "-"} / `, session.pr_url ? h("a", { href: webUrl(session.pr_url), target: "_blank", rel: "noopener noreferrer" }, session.pr_url) : "-"),
      h("dt", {}, "usage"),
      h("dd", {}, `${session.usage.tokens} tokens, $${session.usage.cost_usd}`),
      session.error ? [h("dt", {}, "error"), h("dd", { class: "step-error" }, session.error)] : null,
      h("dt", {}, "archived"),
      h("dd", {}, session.archived ? "yes (its sandbox is gone, its timeline stays)" : "no"),
    ),
    h(
      "div",
      { class: "row" },
      h("button", { type: "button", id: "session-cancel", onclick: act("cancel") }, "Cancel"),
      session.archived ? null : h("button", { type: "button", id: "session-archive", onclick: act("archive") }, "Archive"),
    ),
    form,
    list,
  );
  return { view, list, onStatus };
}

function startForm(ctx, agents) {
  const agent = labelled("Code agent", "select", { id: "session-agent" }, options(agents.map((a) => [a.id, `${a.name} (${a.model})`]), agents[0]?.id));
  const prompt = labelled("Task", "textarea", { rows: 3, required: true, id: "session-prompt", placeholder: "add() subtracts: fix it and run test_app.py" });
  const repo = labelled("Repository (empty: the code agent's)", "input", { type: "url", id: "session-repo" });
  const ref = labelled("Branch or commit", "input", {});
  const title = labelled("Title", "input", { maxlength: 200 });
  const said = status();
  const form = h("form", { class: "grid-form", id: "session-start" }, agent.wrap, repo.wrap, ref.wrap, title.wrap, h("div", { class: "row" }, prompt.wrap), submitRow("Start session", said));
  prompt.wrap.classList.add("grow");
  onSubmit(form, ctx, async () => {
    const body = { codeAgentId: agent.input.value, prompt: prompt.input.value };
    if (repo.input.value) body.repoUrl = repo.input.value;
    if (ref.input.value) body.ref = ref.input.value;
    if (title.input.value) body.title = title.input.value;
    const made = await ctx.api.post("/api/code-sessions", body);
    openSession = made.id;
    await ctx.refresh();
  });
  return form;
}

function codeAgentForm(ctx) {
  const name = labelled("Name", "input", { required: true, maxlength: 200, id: "coder-name" });
  const model = labelled("Model", "input", { required: true, value: "local", id: "coder-model" });
  const repo = labelled("Repository URL", "input", { type: "url", id: "coder-repo", placeholder: "https://github.com/you/app.git" });
  const cred = labelled("Git token (write-only)", "input", { type: "password", autocomplete: "off" });
  const form = h("form", { class: "grid-form", id: "coder-create" }, name.wrap, model.wrap, repo.wrap, cred.wrap, h("div", { class: "row" }, h("button", { type: "submit" }, "Add code agent")));
  onSubmit(form, ctx, async () => {
    const body = { name: name.input.value, model: model.input.value };
    if (repo.input.value) body.repoUrl = repo.input.value;
    if (cred.input.value) body.gitCredential = cred.input.value;
    cred.input.value = "";
    await ctx.api.post("/api/code-agents", body);
    await ctx.refresh();
  });
  return form;
}

/**
 * A code agent's edit form: name, model, repository (empty: none), and its git
 * token, replaced when one is typed, removed when asked, else kept (the API
 * never answers it, only whether there is one).
 */
function codeAgentEdit(ctx, coder) {
  const name = labelled("Name", "input", { required: true, maxlength: 200, value: coder.name, id: "coder-edit-name" });
  const model = labelled("Model", "input", { required: true, value: coder.model, id: "coder-edit-model" });
  const repo = labelled("Repository URL (empty: none)", "input", { type: "url", value: coder.repo_url ?? "", id: "coder-edit-repo" });
  const cred = labelled(coder.has_git_credential ? "New git token (empty: keep it)" : "Git token", "input", { type: "password", autocomplete: "off", id: "coder-edit-token" });
  const drop = check("remove the git token", { id: "coder-edit-drop", disabled: !coder.has_git_credential });
  const said = status();
  const form = h(
    "form",
    { class: "grid-form", id: "coder-edit", "data-code-agent-id": coder.id, "aria-label": `Edit ${coder.name}` },
    name.wrap,
    model.wrap,
    repo.wrap,
    cred.wrap,
    h("div", { class: "row" }, drop.wrap, h("button", { type: "submit" }, "Save code agent"), said),
  );
  onSubmit(form, ctx, async () => {
    const body = { name: name.input.value, model: model.input.value, repoUrl: repo.input.value || null };
    if (cred.input.value) body.gitCredential = cred.input.value;
    else if (drop.input.checked) body.gitCredential = null;
    cred.input.value = "";
    await ctx.api.patch(`/api/code-agents/${enc(coder.id)}`, body);
    editing = null;
    await ctx.refresh();
  });
  return form;
}

/** The code agents: each with Edit and Delete (its sessions stay). */
function codeAgentTable(ctx, agents) {
  if (!agents.length) return h("p", { class: "muted" }, "No code agent yet.");
  return table(
    [
      ["Name", (a) => a.name],
      ["Model", (a) => a.model],
      ["Repository", (a) => a.repo_url ?? "-"],
      ["Git token", (a) => (a.has_git_credential ? "stored" : "none")],
      [
        "",
        (a) =>
          h(
            "div",
            { class: "row" },
            h("button", { type: "button", class: "coder-edit", "aria-label": `Edit ${a.name}`, onclick: ctx.guarded(async () => { editing = a.id; await ctx.refresh(); }) }, "Edit"),
            dangerButton("Delete", ctx.guarded(async () => {
              await ctx.api.delete(`/api/code-agents/${enc(a.id)}`);
              if (editing === a.id) editing = null;
              await ctx.refresh();
            }), { class: "danger coder-delete", "aria-label": `Delete ${a.name}` }),
          ),
      ],
    ],
    agents,
    { "aria-label": "Code agents", id: "coder-table" },
  );
}

export default {
  id: "code-sessions",
  title: "Code sessions",
  async render(root, ctx) {
    follower?.abort();
    const [agents, page] = await Promise.all([ctx.api.get("/api/code-agents"), ctx.api.get("/api/code-sessions?limit=30")]);
    const coder = agents.find((a) => a.id === editing);
    root.append(
      h("h2", {}, "Code sessions"),
      h("p", { class: "muted" }, "A code agent works on a repository in a sandbox and hands the change back as a branch and a pull request."),
      page.sessions.length
        ? table(
            [
              ["Session", (s) => h("button", { type: "button", class: "link", "data-session-id": s.id, onclick: ctx.guarded(async () => { openSession = s.id; await ctx.refresh(); }) }, s.title || s.id.slice(0, 8))],
              ["Status", (s) => [badge(s.status), s.archived ? " archived" : ""]],
              ["Code agent", (s) => agents.find((a) => a.id === s.code_agent_id)?.name ?? s.code_agent_id.slice(0, 8)],
              ["Started", (s) => when(s.created_at)],
            ],
            page.sessions,
            { "aria-label": "Code sessions, newest first", id: "session-table" },
          )
        : h("p", { class: "muted" }, "No session yet."),
      agents.length ? section("Start a session", startForm(ctx, agents)) : h("p", { class: "muted" }, "Add a code agent first."),
      section(
        "Code agents",
        codeAgentTable(ctx, agents),
        coder ? codeAgentEdit(ctx, coder) : null,
        h("details", { open: agents.length ? null : true }, h("summary", {}, "Add a code agent"), codeAgentForm(ctx)),
      ),
    );
    if (!openSession) return;
    const session = await ctx.api.get(`/api/code-sessions/${enc(openSession)}`);
    const { view, list, onStatus } = sessionView(ctx, session);
    root.append(view);
    follow(ctx, session, list, onStatus).catch((e) => ctx.showError(e.message));
  },
};
