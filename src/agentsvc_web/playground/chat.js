// The chat panel: a thread's current branch, a reply streaming in (tokens as
// Markdown, tool calls folded with their results, errors), stop, the answers to
// client-side tool calls, and the tree's actions: edit, regenerate, "2 of 3",
// fork, copy, and a reply's trace. Every event of the last reply is kept as it
// came, for the raw event view.

import { treeActions } from "./actions.js";
import { Composer } from "./composer.js";
import { $, clear, h, pretty } from "./dom.js";
import {
  contextNotes,
  messageView,
  pendingUserView,
  plainNote,
  replyView,
  toolNote,
  toolResultNote,
} from "./messages.js";

const enc = encodeURIComponent;

export class Chat {
  /**
   * ``signal`` ends this instance's listeners: each sign-in builds a Chat, and
   * sign-out aborts its signal, so a later sign-in's Chat is the only one the
   * page's forms reach (an old one would answer with the old key or none).
   * ``hooks``: ended() (a reply ended), forked(thread), trace(traceId).
   */
  constructor(api, showError, hooks, signal) {
    this.api = api;
    this.showError = showError;
    this.hooks = hooks;
    this.composer = new Composer(api, showError, signal);
    this.thread = null;
    this.running = null; // the AbortController of the stream being read
    this.pending = []; // client tool calls waiting for an answer
    this.tools = null; // the client tool offered with the last send
    this.carry = null; // the notes of a reply waiting for tool results
    // what the page saw live, by message id: tool notes, the meta line, the trace
    this.live = new Map();
    // which open() is the latest: one that awaited past a newer open or a close
    // stops, so two threads' messages never mix in the list
    this.generation = 0;
    this.actions = treeActions(this); // a message's buttons
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
    this.composer.loadModels().catch((err) => showError(err.message));
  }

  /** Shows a thread's history; follows its reply when one is running. */
  async open(thread) {
    this.abort();
    const generation = ++this.generation;
    this.thread = thread;
    this.composer.threadId = thread.id;
    this.pending = [];
    this.carry = null;
    $("tool-answers").hidden = true;
    $("composer").hidden = false;
    $("snippet-box").hidden = true;
    const page = await this.history();
    if (generation !== this.generation) return; // another thread was opened meanwhile
    this.draw(page);
    if (thread.active_run_id) {
      const follow = (signal) => this.api.follow(thread.id, thread.active_run_id, signal);
      await this.read(follow, this.replyItem(), "a reply is running: following it");
    } else {
      this.setStatus(`${page.total} message(s)`);
    }
  }

  close() {
    this.abort();
    this.generation++; // an open() still awaiting shows nothing
    this.thread = null;
    this.composer.threadId = null;
    clear($("messages"));
    $("composer").hidden = true;
    $("tool-answers").hidden = true;
  }

  abort() {
    if (this.running) this.running.abort();
    this.running = null;
  }

  /** The current branch, and its replies' tool calls (from the thread's context). */
  async history() {
    const path = `/api/threads/${enc(this.thread.id)}`;
    const [page, context] = await Promise.all([
      this.api.get(`${path}/messages?limit=200`),
      // best effort: a 422 (no family serves the agent's model) shows no calls
      this.api.get(`${path}/context`).catch(() => null),
    ]);
    page.notes = context ? contextNotes(context.messages, page.messages) : new Map();
    return page;
  }

  /** The branch's messages, drawn again (what the page saw live kept by id). */
  draw(page) {
    const { messages } = page;
    const list = clear($("messages"));
    messages.forEach((m, i) => {
      const seen = this.live.get(m.id);
      const notes = seen?.notes ?? page.notes.get(m.id);
      const last = i === messages.length - 1;
      const item = messageView(m, { actions: this.actions, last, notes, meta: seen?.meta });
      if (seen?.traceId) item.dataset.traceId = seen.traceId;
      list.append(item);
    });
    this.scroll();
  }

  /** Reads the current branch again and draws it. */
  async refresh() {
    if (!this.thread) return;
    const generation = this.generation;
    const page = await this.history();
    if (generation !== this.generation || this.running) return;
    this.draw(page);
  }

  async sendTyped() {
    const input = $("message");
    const content = input.value;
    if (!this.thread || this.running || !content.trim()) return;
    const body = this.composer.body(content);
    if (!body) return; // a field is wrong: already said
    this.tools = body.tools ?? null;
    input.value = "";
    $("snippet-box").hidden = true;
    const mine = pendingUserView(content);
    $("messages").append(mine);
    const path = `/api/threads/${enc(this.thread.id)}/messages`;
    if (!(await this.stream(path, body))) {
      mine.remove(); // refused before the stream (the error bar says why): nothing was stored
      input.value = content;
    }
  }

  async guard(action) {
    this.showError("");
    try {
      return await action();
    } catch (err) {
      this.showError(err.message);
      return null;
    }
  }

  stream(path, body) {
    return this.read((signal) => this.api.stream(path, body, signal), this.replyItem());
  }

  /**
   * Reads one reply's events into its list item until done or error, then draws
   * the branch again as stored; false when the request was refused before its
   * stream began (the API's error is shown).
   */
  async read(open, reply, status = "streaming...") {
    const controller = new AbortController();
    this.running = controller;
    this.events = [];
    clear($("raw-events"));
    $("send").disabled = true;
    $("stop").disabled = false;
    this.setStatus(status);
    let ended = null; // "done" or "error"
    let started = false;
    try {
      for await (const ev of open(controller.signal)) {
        started = true;
        this.record(ev);
        if (this.onEvent(ev.event, ev.data, reply)) ended = ev.event;
      }
      if (!ended) plainNote(reply.notes, "error", "the stream ended without done or error");
    } catch (err) {
      if (err.name === "AbortError") return true;
      if (started) {
        plainNote(reply.notes, "error", "the connection broke", err.message);
        this.setStatus("the connection broke: open the thread again to follow the reply");
        return true;
      }
      reply.item.remove();
      this.showError(err.message);
      this.setStatus("");
      return false;
    } finally {
      reply.flush();
      reply.item.classList.remove("streaming");
      reply.item.removeAttribute("aria-busy");
      if (this.running === controller) {
        this.running = null;
        $("send").disabled = false;
        $("stop").disabled = true;
        this.hooks.ended();
      }
      this.scroll();
    }
    // drawn again as stored once done (an error's note stays in view); a reply
    // waiting for tool results stays as seen until the one that goes on ends
    if (ended === "done" && !this.pending.length) await this.refresh().catch((err) => this.showError(err.message));
    return true;
  }

  /** One event as received, in the raw event view. */
  record(ev) {
    this.events.push(ev);
    const line = `${ev.id === null ? "" : `id: ${ev.id}\n`}event: ${ev.event}\ndata: ${JSON.stringify(ev.data)}\n\n`;
    $("raw-events").append(document.createTextNode(line));
    $("raw-count").textContent = `${this.events.length} event(s)`;
  }

  /** Shows one event; true when it ends the reply. */
  onEvent(event, data, reply) {
    switch (event) {
      case "meta":
        reply.item.dataset.runId = data.runId;
        reply.item.dataset.traceId = data.traceId;
        reply.model = data.model;
        reply.meta.textContent = `${data.model} · run ${data.runId}`;
        return false;
      case "token":
        reply.append(data.delta);
        this.scroll();
        return false;
      case "tool_call":
        toolNote(reply.notes, data.tool, false);
        return false;
      case "tool_executing":
        this.setStatus(`running ${data.tool_name}...`);
        return false;
      case "tool_result":
        toolResultNote(reply.notes, data);
        return false;
      case "requires_action":
        for (const call of data.toolCalls) toolNote(reply.notes, call, true).open = true;
        this.askForToolResults(data.toolCalls);
        return false;
      case "auth_challenge":
        plainNote(reply.notes, "notice", `${data.toolName} needs authorization`, pretty(data.challenge));
        return false;
      case "profile_switch_proposal":
        plainNote(reply.notes, "notice", `the agent proposes the tool profile ${data.target}`, data.reason);
        return false;
      case "done":
        this.done(data, reply);
        return true;
      case "error":
        reply.item.classList.add("failed");
        reply.item.dataset.status = "error";
        plainNote(reply.notes, "error", `error ${data.code}`, data.detail);
        this.setStatus(`error ${data.code}`);
        return true;
      default:
        return false;
    }
  }

  done(data, reply) {
    const state = data.stopped ? "stopped" : "done";
    reply.item.classList.add(data.stopped ? "stopped" : "complete");
    reply.item.dataset.status = data.stopped ? "stopped" : "complete";
    // a stopped reply's usage is counted when its trace is stored, not here:
    // no "0 tokens" for it
    const tokens = data.usage?.totalTokens ? ` · ${data.usage.totalTokens} tokens` : "";
    const meta = `${reply.model ?? "reply"} · ${state}${tokens}`;
    reply.meta.textContent = meta;
    // the tool calls of a reply that waited for results belong with the reply
    // that goes on (the history lists no tool step, only the final message)
    if (this.carry) reply.notes.prepend(...this.carry.childNodes);
    this.carry = this.pending.length ? reply.notes : null;
    if (data.messageId) {
      reply.item.dataset.messageId = data.messageId;
      this.live.set(data.messageId, { notes: reply.notes, meta, traceId: reply.item.dataset.traceId });
    }
    this.setStatus(data.stopped ? "stopped" : this.pending.length ? "waiting for your tool results" : "done");
    $("announce").textContent = data.content ? `The reply: ${data.content.slice(0, 2000)}` : "";
  }

  replyItem() {
    const reply = replyView();
    $("messages").append(reply.item);
    this.scroll();
    return reply;
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
    fields.querySelector("textarea")?.focus();
  }

  async answerTools() {
    const toolResults = [...document.querySelectorAll("#tool-answer-fields textarea")].map((t) => ({
      toolCallId: t.dataset.toolCallId,
      output: t.value,
    }));
    for (const call of this.pending) {
      const answer = toolResults.find((r) => r.toolCallId === call.id);
      if (this.carry && answer) toolResultNote(this.carry, { tool_call_id: call.id, tool_name: call.name, result: answer.output });
    }
    this.pending = [];
    $("tool-answers").hidden = true;
    $("composer").hidden = false;
    const body = { content: "", toolResults };
    if (this.tools) body.tools = this.tools; // still offered while the reply goes on
    await this.stream(`/api/threads/${enc(this.thread.id)}/messages`, body);
  }

  async stop() {
    if (!this.thread) return;
    const answer = await this.guard(() => this.api.post(`/api/threads/${enc(this.thread.id)}/stop`));
    if (answer && !answer.ok) this.setStatus("nothing was running");
  }

  setStatus(text) {
    $("status").textContent = text;
  }

  scroll() {
    const list = $("messages");
    list.scrollTop = list.scrollHeight;
  }
}
