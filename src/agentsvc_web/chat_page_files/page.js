// The hosted chat page (/c/{slug}), alone or in the widget's frame. It talks to
// the chat's public API on this origin with a visitor token kept in the tab's
// sessionStorage; replies stream in as Server-Sent Events and are shown through
// the Markdown renderer (markdown.js), which never parses HTML.
import { render } from "./markdown.js";

const root = document.getElementById("chat");
const slug = root.dataset.slug;
const base = `/api/public/chat/${encodeURIComponent(slug)}`;
const storeKey = `agentsvc.chat.${slug}`;
const $ = (id) => document.getElementById(id);
const list = $("messages");
const input = $("chat-input");
const sendButton = $("chat-send");
const stopButton = $("chat-stop");
const errorBar = $("chat-error");

let state = load();

function load() {
  try {
    return JSON.parse(sessionStorage.getItem(storeKey) || "{}");
  } catch {
    return {};
  }
}

function save() {
  sessionStorage.setItem(storeKey, JSON.stringify(state));
}

function showError(message) {
  errorBar.textContent = message;
  errorBar.hidden = !message;
}

async function failure(response) {
  let detail = response.statusText;
  let code = `HTTP ${response.status}`;
  try {
    const body = await response.json();
    detail = String(body.detail ?? detail);
    code = String(body.error ?? code);
  } catch {
    // not the API's error body
  }
  const error = new Error(`${detail}`);
  error.code = code;
  error.status = response.status;
  return error;
}

async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  if (state.token) headers.Authorization = `Bearer ${state.token}`;
  const init = { method, headers, cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(base + path, init);
  if (!response.ok) throw await failure(response);
  return response;
}

function identity() {
  const fragment = new URLSearchParams(location.hash.slice(1));
  const vid = fragment.get("vid");
  const exp = fragment.get("exp");
  const sig = fragment.get("sig");
  return vid && exp && sig ? { visitorId: vid, expiresAt: Number(exp), signature: sig } : {};
}

async function session() {
  if (state.token && state.expiresAt && Date.parse(state.expiresAt) > Date.now() + 60000) return;
  const started = await (await call("POST", "/sessions", identity())).json();
  state = { token: started.token, expiresAt: started.expires_at };
  save();
}

async function thread() {
  if (state.threadId) return state.threadId;
  const made = await (await call("POST", "/threads", {})).json();
  state.threadId = made.id;
  save();
  return made.id;
}

function bubble(role, content) {
  const item = document.createElement("li");
  item.className = `message ${role}`;
  item.dataset.role = role;
  const body = document.createElement("div");
  body.className = "body";
  if (role === "assistant") body.append(render(content));
  else body.textContent = content;
  item.append(body);
  list.append(item);
  item.scrollIntoView({ block: "end" });
  return { item, body };
}

async function* events(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { event, data: JSON.parse(data.join("\n")) };
    }
  }
}

let busy = false;

function setBusy(value) {
  busy = value;
  sendButton.disabled = value;
  stopButton.hidden = !value;
}

async function send(content) {
  if (busy || !content.trim()) return;
  showError("");
  setBusy(true);
  try {
    await session();
    const threadId = await thread();
    bubble("user", content);
    const reply = bubble("assistant", "");
    reply.item.dataset.status = "streaming";
    let text = "";
    const response = await call("POST", `/threads/${threadId}/messages`, { content });
    for await (const { event, data } of events(response)) {
      if (event === "token") {
        text += data.delta;
        reply.body.replaceChildren(render(text));
      } else if (event === "done") {
        reply.item.dataset.status = data.stopped ? "stopped" : "complete";
      } else if (event === "error") {
        reply.item.dataset.status = "error";
        showError(String(data.detail || data.code || "the reply failed"));
      }
    }
  } catch (error) {
    if (error.status === 401) {
      state = {};
      save();
    }
    showError(error.message || String(error));
    input.value = content;
  } finally {
    setBusy(false);
  }
}

async function history() {
  if (!state.token || !state.threadId) return;
  try {
    const found = await (await call("GET", `/threads/${state.threadId}/messages?limit=200`)).json();
    for (const m of found.messages) bubble(m.role, m.content);
  } catch {
    state = {};
    save();
  }
}

async function start() {
  try {
    const face = await (await call("GET", "/")).json();
    $("chat-title").textContent = face.title;
    document.title = face.title;
    $("chat-description").textContent = face.description;
    if (face.welcome_message) bubble("assistant", face.welcome_message).item.classList.add("welcome");
    const starters = $("starters");
    for (const prompt of face.starter_prompts) {
      const button = document.createElement("button");
      button.type = "button";
      button.className = "starter";
      button.textContent = prompt;
      button.addEventListener("click", () => send(prompt));
      starters.append(button);
    }
    await history();
  } catch (error) {
    showError(error.message || String(error));
  }
}

$("composer").addEventListener("submit", (event) => {
  event.preventDefault();
  const content = input.value;
  input.value = "";
  send(content);
});
input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey) {
    event.preventDefault();
    $("composer").requestSubmit();
  }
});
stopButton.addEventListener("click", async () => {
  if (state.threadId) {
    try {
      await call("POST", `/threads/${state.threadId}/stop`);
    } catch (error) {
      showError(error.message || String(error));
    }
  }
});

start();
