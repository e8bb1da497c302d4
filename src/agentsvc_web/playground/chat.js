// The chat panel: a thread's history, a reply streaming in (tokens, tool calls
// and results, errors), stop, and the answers to client-side tool calls.

import { $, clear, h, pretty } from "./dom.js";

export class Chat {
  /**
   * ``signal`` ends this instance's listeners: each sign-in builds a Chat, and
   * sign-out aborts its signal, so a later sign-in's Chat is the only one the
   * page's forms reach (an old one would answer with the old key or none).
   */
  constructor(api, showError, onEnded, signal) {
    this.api = api;
    this.showError = showError;
    this.onEnded = onEnded; // a reply ended (the thread list shows which reply)
    this.thread = null;
    this.running = null; // the AbortController of the stream being read
    this.pending = []; // client tool calls waiting for an answer
    // which open() is the latest: one that awaited past a newer open or a close
    // stops, so two threads' messages never mix in the list
    this.generation = 0;
    const on = (id, type, handler) => $(id).addEventListener(type, handler, { signal });
    on("composer", "submit", (e) => {
      e.preventDefault();
      this.sendTyped();
    });
    on("message", "keydown", (e) => {
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        e.preventDefault();
        this.sendTyped();
      }
    });
    on("stop", "click", () => this.stop());
    on("tool-answers", "submit", (e) => {
      e.preventDefault();
      this.answerTools();
    });
  }

  /** Shows a thread's history; follows its reply when one is running. */
  async open(thread) {
    this.abort();
    const generation = ++this.generation;
    this.thread = thread;
    this.pending = [];
    $("tool-answers").hidden = true;
    $("composer").hidden = false;
    clear($("thread-title")).append(
      h("span", {}, thread.title || "Thread "),
      h("code", {}, thread.id),
    );
    const list = clear($("messages"));
    const page = await this.api.get(
      `/api/threads/${encodeURIComponent(thread.id)}/messages?limit=200`,
    );
    if (generation !== this.generation) return; // another thread was opened meanwhile
    for (const m of page.messages) list.append(messageItem(m.role, m.content, m));
    this.scroll();
    if (thread.active_run_id) {
      const reply = this.replyItem();
      const follow = (signal) => this.api.follow(thread.id, thread.active_run_id, signal);
      await this.read(follow, reply, "a reply is running: following it");
    } else {
      this.setStatus(`${page.total} message(s)`);
    }
  }

  close() {
    this.abort();
    this.generation++; // an open() still awaiting shows nothing
    this.thread = null;
    clear($("messages"));
    $("composer").hidden = true;
    $("tool-answers").hidden = true;
    $("thread-title").textContent = "Open or create a thread.";
  }

  abort() {
    if (this.running) this.running.abort();
    this.running = null;
  }

  async sendTyped() {
    const input = $("message");
    const content = input.value;
    if (!this.thread || this.running || !content.trim()) return;
    const body = { content };
    const tool = this.declaredTool();
    if (tool === undefined) return; // the form's JSON is wrong: already said
    if (tool) body.tools = [tool];
    input.value = "";
    const mine = messageItem("user", content);
    $("messages").append(mine);
    if (!(await this.send(body))) {
      mine.remove(); // refused before the stream (the error bar says why): nothing was stored
      input.value = content;
    }
  }

  /** The client-side tool to offer with the message, null for none. */
  declaredTool() {
    if (!$("tool-enabled").checked) return null;
    let parameters;
    try {
      parameters = JSON.parse($("tool-parameters").value || "{}");
    } catch (err) {
      this.showError(`the tool's parameters are not JSON: ${err.message}`);
      return undefined;
    }
    this.tools = { name: $("tool-name").value.trim(), description: $("tool-description").value, parameters };
    return this.tools;
  }

  async send(body) {
    const thread = this.thread;
    const reply = this.replyItem();
    return this.read((signal) => this.api.send(thread.id, body, signal), reply);
  }

  /**
   * Reads one reply's events into its list item until done or error; false when
   * the request was refused before its stream began (the API's error is shown).
   */
  async read(open, reply, status = "streaming...") {
    const controller = new AbortController();
    this.running = controller;
    $("send").disabled = true;
    $("stop").disabled = false;
    this.setStatus(status);
    let ended = false;
    let started = false;
    try {
      for await (const { event, data } of open(controller.signal)) {
        started = true;
        ended = this.onEvent(event, data, reply) || ended;
      }
      if (!ended) this.note(reply, "error", "the stream ended without done or error");
    } catch (err) {
      if (err.name === "AbortError") return true;
      if (started) {
        this.note(reply, "error", "the connection broke", err.message);
        this.setStatus("the connection broke: open the thread again to follow the reply");
        return true;
      }
      reply.item.remove();
      this.showError(err.message);
      this.setStatus("");
      return false;
    } finally {
      reply.item.classList.remove("streaming");
      if (this.running === controller) {
        this.running = null;
        $("send").disabled = false;
        $("stop").disabled = true;
        this.onEnded?.();
      }
      this.scroll();
    }
    return true;
  }

  /** Shows one event; true when it ends the reply. */
  onEvent(event, data, reply) {
    switch (event) {
      case "meta":
        reply.item.dataset.runId = data.runId;
        reply.item.dataset.traceId = data.traceId;
        reply.meta.textContent = `${data.model} · run ${data.runId}`;
        return false;
      case "token":
        reply.text.append(document.createTextNode(data.delta));
        this.scroll();
        return false;
      case "tool_call":
        this.note(reply, "tool-call", `tool call ${data.tool.name}`, pretty(data.tool.arguments), {
          "data-tool-call-id": data.tool.id,
        });
        return false;
      case "tool_executing":
        this.setStatus(`running ${data.tool_name}...`);
        return false;
      case "tool_result":
        this.note(reply, "tool-result", `tool result ${data.tool_name}`, pretty(data.result), {
          "data-tool-call-id": data.tool_call_id,
        });
        return false;
      case "requires_action":
        for (const call of data.toolCalls) {
          this.note(reply, "tool-call", `your tool ${call.name}`, pretty(call.arguments), {
            "data-tool-call-id": call.id,
          });
        }
        this.askForToolResults(data.toolCalls);
        return false;
      case "auth_challenge":
        this.note(reply, "notice", `${data.toolName} needs authorization`, pretty(data.challenge));
        return false;
      case "profile_switch_proposal":
        this.note(reply, "notice", `the agent proposes the tool profile ${data.target}`, data.reason);
        return false;
      case "done":
        reply.item.classList.add(data.stopped ? "stopped" : "complete");
        if (data.messageId) reply.item.dataset.messageId = data.messageId;
        reply.item.dataset.status = data.stopped ? "stopped" : "complete";
        reply.meta.append(` · ${data.stopped ? "stopped" : "done"}`);
        if (data.usage) reply.meta.append(` · ${data.usage.totalTokens} tokens`);
        this.setStatus(data.stopped ? "stopped" : this.pending.length ? "waiting for your tool results" : "done");
        return true;
      case "error":
        reply.item.classList.add("failed");
        reply.item.dataset.status = "error";
        this.note(reply, "error", `error ${data.code}`, data.detail);
        this.setStatus(`error ${data.code}`);
        return true;
      default:
        return false;
    }
  }

  replyItem() {
    const text = h("div", { class: "text" });
    const meta = h("div", { class: "meta muted small" });
    const notes = h("div", { class: "notes" });
    const item = h("li", { class: "message assistant streaming" }, h("div", { class: "role" }, "assistant"), notes, text, meta);
    $("messages").append(item);
    this.scroll();
    return { item, text, meta, notes };
  }

  note(reply, kind, title, body, attrs) {
    reply.notes.append(
      h("div", { class: `note ${kind}`, ...attrs }, h("div", { class: "note-title" }, title), body ? h("pre", {}, body) : null),
    );
    this.scroll();
  }

  askForToolResults(calls) {
    this.pending = calls;
    const fields = clear($("tool-answer-fields"));
    for (const call of calls) {
      const id = `answer-${call.id}`;
      fields.append(
        h("label", { for: id }, `${call.name}(${JSON.stringify(call.arguments)}) returns:`),
        h("textarea", { id, rows: 2, "data-tool-call-id": call.id, class: "tool-output" }),
      );
    }
    $("tool-answers").hidden = false;
    $("composer").hidden = true;
  }

  async answerTools() {
    const toolResults = [...document.querySelectorAll("#tool-answer-fields textarea")].map((t) => ({
      toolCallId: t.dataset.toolCallId,
      output: t.value,
    }));
    this.pending = [];
    $("tool-answers").hidden = true;
    $("composer").hidden = false;
    const body = { content: "", toolResults };
    if (this.tools) body.tools = [this.tools]; // still offered while the reply goes on
    await this.send(body);
  }

  async stop() {
    if (!this.thread) return;
    try {
      const answer = await this.api.post(`/api/threads/${encodeURIComponent(this.thread.id)}/stop`);
      if (!answer.ok) this.setStatus("nothing was running");
    } catch (err) {
      this.showError(err.message);
    }
  }

  setStatus(text) {
    $("status").textContent = text;
  }

  scroll() {
    const list = $("messages");
    list.scrollTop = list.scrollHeight;
  }
}

function messageItem(role, content, stored) {
  const item = h(
    "li",
    { class: `message ${role}`, "data-message-id": stored?.id, "data-status": stored?.status },
    h("div", { class: "role" }, stored?.sender_name ? `${role} · ${stored.sender_name}` : role),
    h("div", { class: "text" }, content),
  );
  if (stored && stored.status !== "complete") {
    item.classList.add(stored.status);
    item.append(h("div", { class: "meta muted small" }, stored.status));
  }
  return item;
}
