// The console's entry point: sign-in, agents, MCP attachments, and the tabs
// (the threads are threads.js's, the chat chat.js's, the traces observe.js's,
// the usage usage.js's). The API key lives in this tab's sessionStorage only
// (gone when the tab closes; never in a URL, a cookie or the console).

import { Api } from "./api.js";
import { Chat } from "./chat.js";
import { $, clear, h } from "./dom.js";
import { setDrawer, startDrawer, startTheme, tabKeys } from "./layout.js";
import { Manage, pageOfHash } from "./manage.js";
import { showTrace, showTraces } from "./observe.js";
import { Threads } from "./threads.js";
import { fillAgentFilter, showUsage } from "./usage.js";

const KEY_ITEM = "agentsvc.playground.key";

const state = { api: null, chat: null, threads: null, agents: [], agent: null, session: null, manage: null };

function showError(message) {
  const bar = $("error");
  bar.textContent = message;
  bar.hidden = !message;
}

/** Runs an action of the user's; its failure goes to the error bar. */
function guarded(action) {
  return async (event) => {
    event?.preventDefault?.();
    showError("");
    try {
      await action(event);
    } catch (err) {
      showError(err.message);
    }
  };
}

async function signIn(key) {
  const api = new Api(key);
  // a call every key may make: a wrong key is the API's own 401, shown as is
  const agents = await api.get("/api/agents");
  sessionStorage.setItem(KEY_ITEM, key);
  state.session?.abort(); // a sign-in over another (the kept key): one Chat listens
  state.chat?.close();
  state.session = new AbortController(); // signOut aborts it: the Chat's listeners go
  state.api = api;
  state.chat = new Chat(
    api,
    showError,
    {
      ended: () => {
        if (state.agent) state.threads.load().catch((err) => showError(err.message));
      },
      forked: (thread) => state.threads.open(thread.id),
      trace: async (traceId) => {
        selectTab("panel-traces");
        await showTrace(api, traceId);
        await showTraces(api, traceScope());
      },
    },
    state.session.signal,
  );
  state.threads = new Threads(
    {
      api,
      agent: () => state.agent,
      chat: () => state.chat,
      guarded,
      showError,
      shown: () => {
        selectTab("panel-chat");
        setDrawer(false);
      },
    },
    state.session.signal,
  );
  $("key").value = "";
  $("signin").hidden = true;
  $("signed-in").hidden = false;
  $("drawer-toggle").hidden = false;
  $("whoami").textContent = "signed in";
  $("app").hidden = false;
  state.agents = agents;
  state.manage = new Manage({ api, agent: () => state.agent, guarded, showError, changed: sideBarChanged });
  renderAgents();
  if (agents.length) await selectAgent(agents[agents.length - 1].id);
  const page = pageOfHash(location.hash);
  if (page) await openTab("panel-manage", page);
}

function signOut() {
  sessionStorage.removeItem(KEY_ITEM);
  state.chat?.close();
  state.threads?.reset(); // an open() still awaiting stops
  state.session?.abort();
  Object.assign(state, { api: null, chat: null, threads: null, agents: [], agent: null, session: null, manage: null });
  $("app").hidden = true;
  $("signin").hidden = false;
  $("signed-in").hidden = true;
  $("drawer-toggle").hidden = true;
  setDrawer(false);
  showError("");
  clear($("mcp-list"));
  clear($("usage"));
  clear($("trace-list"));
  clear($("trace-detail"));
  clear($("raw-events"));
  $("raw-count").textContent = "";
}

// --- agents ----------------------------------------------------------------------

function renderAgents() {
  const select = clear($("agent-select"));
  select.append(h("option", { value: "" }, state.agents.length ? "Pick an agent" : "No agent yet: create one"));
  for (const a of state.agents) {
    select.append(h("option", { value: a.id, selected: state.agent?.id === a.id }, a.name));
  }
  fillAgentFilter(state.agents);
}

async function selectAgent(id) {
  state.chat.close();
  state.threads.reset();
  state.agent = id ? await state.api.get(`/api/agents/${encodeURIComponent(id)}`) : null;
  renderAgents();
  const a = state.agent;
  $("agent-edit").hidden = !a;
  $("thread-section").hidden = !a;
  $("mcp-section").hidden = !a;
  $("agent-saved").textContent = "";
  if (!a) return;
  $("agent-preamble").value = a.stable_preamble ?? "";
  $("agent-model").value = a.default_model ?? "";
  await Promise.all([state.threads.load(), loadMcps()]);
}

/** A Manage page changed something the side bar shows: read it again. */
async function sideBarChanged(pageId) {
  if (pageId === "agents") {
    state.agents = await state.api.get("/api/agents");
    const still = state.agents.find((a) => a.id === state.agent?.id);
    if (state.agent && !still) {
      // the side bar's agent was deleted: pick another (or none)
      await selectAgent(state.agents.length ? state.agents[state.agents.length - 1].id : "");
    } else {
      if (still) state.agent = { ...state.agent, ...still };
      renderAgents();
    }
  } else if (pageId === "mcps" && state.agent) {
    await loadMcps();
  }
}

async function createAgent() {
  const name = $("agent-name").value.trim();
  if (!name) return;
  const created = await state.api.post("/api/agents", { name, defaultModel: "local" });
  $("agent-name").value = "";
  state.agents.push(created);
  await selectAgent(created.id);
}

async function saveAgent() {
  $("agent-saved").textContent = "saving...";
  const body = {
    stablePreamble: $("agent-preamble").value,
    defaultModel: $("agent-model").value.trim() || null,
  };
  if (body.defaultModel === null) delete body.defaultModel;
  try {
    state.agent = await state.api.patch(`/api/agents/${encodeURIComponent(state.agent.id)}`, body);
  } catch (err) {
    $("agent-saved").textContent = "not saved";
    throw err;
  }
  state.agents = state.agents.map((a) => (a.id === state.agent.id ? state.agent : a));
  $("agent-saved").textContent = `saved at ${new Date(state.agent.updated_at).toLocaleTimeString()}`;
}

// --- MCP servers -----------------------------------------------------------------

async function loadMcps() {
  const agentId = state.agent.id;
  const [servers, attached] = await Promise.all([
    state.api.get("/api/mcps"),
    state.api.get(`/api/agents/${encodeURIComponent(agentId)}/mcps`),
  ]);
  const on = new Map(attached.map((a) => [a.mcpServerId, a]));
  const list = clear($("mcp-list"));
  if (!servers.length) {
    list.append(h("li", { class: "muted small" }, "The organization has no MCP server yet: Manage, then MCP servers, registers one."));
  }
  for (const server of servers) {
    const id = `mcp-${server.id}`;
    const box = h("input", { type: "checkbox", id, "data-mcp-id": server.id, checked: on.has(server.id) });
    box.addEventListener("change", guarded(() => toggleMcp(server.id, box)));
    const tools = on.get(server.id)?.effectiveTools ?? server.toolsCache.map((t) => t.name);
    list.append(
      h(
        "li",
        {},
        box,
        h("label", { for: id }, ` ${server.name} `, h("span", { class: "muted small" }, `${server.transport} · ${server.status}`)),
        tools.length ? h("div", { class: "muted small" }, `tools: ${tools.join(", ")}`) : null,
      ),
    );
  }
}

async function toggleMcp(serverId, box) {
  const path = `/api/agents/${encodeURIComponent(state.agent.id)}/mcps`;
  try {
    if (box.checked) await state.api.post(path, { mcpServerId: serverId });
    else await state.api.delete(path, { mcpServerId: serverId });
  } finally {
    await loadMcps(); // what the API says is attached, whatever happened
  }
}

// --- tabs ------------------------------------------------------------------------

function selectTab(panelId) {
  for (const tab of document.querySelectorAll(".tab")) {
    const active = tab.dataset.panel === panelId;
    tab.classList.toggle("active", active);
    tab.setAttribute("aria-selected", String(active));
    tab.tabIndex = active ? 0 : -1; // one tab stop; the arrow keys move between tabs
    $(tab.dataset.panel).hidden = !active;
  }
}

/** Whose traces the Traces tab lists: the open thread's, else the agent's. */
function traceScope() {
  return { threadId: state.threads?.current?.id, agentId: state.agent?.id };
}

async function openTab(panelId, page) {
  selectTab(panelId);
  if (panelId === "panel-traces") await showTraces(state.api, traceScope());
  if (panelId === "panel-usage") await showUsage(state.api, state.agents);
  if (panelId === "panel-manage") await state.manage.open(page ?? pageOfHash(location.hash));
}

// --- wiring ----------------------------------------------------------------------

function start() {
  $("signin").addEventListener(
    "submit",
    guarded(() => signIn($("key").value.trim())),
  );
  $("signout").addEventListener("click", signOut);
  $("agent-select").addEventListener("change", guarded((e) => selectAgent(e.target.value)));
  $("agent-create").addEventListener("submit", guarded(createAgent));
  $("agent-edit").addEventListener("submit", guarded(saveAgent));
  const tabs = [...document.querySelectorAll(".tab")];
  for (const tab of tabs) {
    tab.addEventListener("click", guarded(() => openTab(tab.dataset.panel)));
  }
  tabKeys(tabs, (tab) => guarded(() => openTab(tab.dataset.panel))());
  $("traces-refresh").addEventListener("click", guarded(() => showTraces(state.api, traceScope())));
  const usage = guarded(() => showUsage(state.api, state.agents));
  $("usage-refresh").addEventListener("click", usage);
  $("usage-period").addEventListener("change", usage);
  $("usage-agent").addEventListener("change", usage);
  startTheme();
  startDrawer();
  window.addEventListener(
    "hashchange",
    guarded(async () => {
      const page = pageOfHash(location.hash);
      if (page && state.manage) await openTab("panel-manage", page);
    }),
  );
  const kept = sessionStorage.getItem(KEY_ITEM);
  if (kept) {
    guarded(async () => {
      try {
        await signIn(kept);
      } catch (err) {
        sessionStorage.removeItem(KEY_ITEM); // a revoked key is not tried again
        throw err;
      }
    })();
  }
  document.body.dataset.ready = "true"; // the page's scripts run (tests wait for it)
}

start();
