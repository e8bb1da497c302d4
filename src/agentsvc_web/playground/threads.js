// The agent's threads: the list (searched with GET /api/threads?q=, showing
// what the API answers), a new thread, and the open thread's rename (PATCH
// title), fork and delete (asked for again on the page first).

import { $, clear, h } from "./dom.js";

const enc = encodeURIComponent;

export class Threads {
  /** ctx: {api, agent(), chat(), guarded, showError, shown(thread): the chat tab is shown} */
  constructor(ctx, signal) {
    this.ctx = ctx;
    this.current = null;
    this.opening = 0; // which open() is the latest: an older one still awaiting stops
    const on = (id, type, handler) => $(id).addEventListener(type, handler, { signal });
    const { guarded } = ctx;
    on("thread-new", "click", guarded(() => this.create()));
    // the same beside "Open or create a thread.": on a narrow screen the side bar's
    // button is behind the menu
    on("thread-new-here", "click", guarded(() => this.create()));
    on("thread-search", "submit", guarded(() => this.load()));
    on("thread-q", "search", guarded(() => this.load())); // the field's clear button
    on("thread-rename", "click", () => this.startRename());
    on("thread-rename-cancel", "click", () => this.endRename());
    on("thread-rename-form", "submit", guarded(() => this.rename()));
    on("thread-title-input", "keydown", (e) => {
      if (e.key === "Escape") this.endRename();
    });
    on("thread-delete", "click", () => this.askDelete(true));
    on("thread-delete-no", "click", () => this.askDelete(false));
    on("thread-delete-yes", "click", guarded(() => this.remove()));
    on("thread-fork", "click", guarded(() => this.forkAll()));
  }

  /** The agent's threads (those matching the search box, when it holds words). */
  async load() {
    const agent = this.ctx.agent();
    if (!agent) return;
    const query = new URLSearchParams({ agentId: agent.id, limit: "100" });
    const q = $("thread-q").value.trim();
    if (q) query.set("q", q);
    const page = await this.ctx.api.get(`/api/threads?${query}`);
    const list = clear($("thread-list"));
    if (!page.threads.length) list.append(h("li", { class: "muted small" }, q ? "No thread matches." : "No thread yet."));
    for (const t of page.threads) {
      const active = this.current?.id === t.id;
      list.append(
        h(
          "li",
          {},
          h(
            "button",
            {
              type: "button",
              class: active ? "thread active" : "thread",
              "data-thread-id": t.id,
              "aria-current": active ? "true" : null,
              onclick: this.ctx.guarded(() => this.open(t.id)),
            },
            t.title || new Date(t.created_at).toLocaleString(),
            t.active_run_id ? h("span", { class: "muted small" }, " · replying") : null,
          ),
        ),
      );
    }
    $("thread-count").textContent = `${page.threads.length} thread(s)${q ? ` for "${q}"` : ""}`;
  }

  async open(id) {
    const mine = ++this.opening;
    const thread = await this.ctx.api.get(`/api/threads/${enc(id)}`);
    if (mine !== this.opening) return; // another thread was opened meanwhile
    this.current = thread;
    this.head();
    await this.load();
    if (mine !== this.opening) return;
    this.ctx.shown(thread);
    await this.ctx.chat().open(thread);
  }

  async create() {
    const t = await this.ctx.api.post("/api/threads", { agentId: this.ctx.agent().id });
    await this.open(t.id);
  }

  /** Nothing open (another agent, sign-out). */
  reset() {
    this.opening++;
    this.current = null;
    this.head();
    clear($("thread-list"));
  }

  /** The open thread's title and actions above the chat. */
  head() {
    const t = this.current;
    this.endRename();
    this.askDelete(false);
    $("thread-actions").hidden = !t;
    $("thread-new-here").hidden = Boolean(t);
    const title = clear($("thread-title"));
    if (!t) {
      title.append("Open or create a thread.");
      return;
    }
    title.append(h("span", { class: "thread-name" }, t.title || "Untitled thread"), " ", h("code", { class: "small muted" }, t.id));
  }

  startRename() {
    if (!this.current) return;
    $("thread-rename-form").hidden = false;
    $("thread-actions").hidden = true;
    const input = $("thread-title-input");
    input.value = this.current.title ?? "";
    input.focus();
    input.select();
  }

  endRename() {
    $("thread-rename-form").hidden = true;
    $("thread-actions").hidden = !this.current;
  }

  async rename() {
    const title = $("thread-title-input").value.trim() || null; // empty: no title
    this.current = await this.ctx.api.patch(`/api/threads/${enc(this.current.id)}`, { title });
    this.head();
    await this.load();
    $("thread-rename").focus();
  }

  askDelete(show) {
    $("thread-delete-confirm").hidden = !show;
    if (show) $("thread-delete-no").focus();
  }

  async remove() {
    await this.ctx.api.delete(`/api/threads/${enc(this.current.id)}`);
    this.ctx.chat().close();
    this.current = null;
    this.head();
    await this.load();
    $("thread-note").textContent = "the thread was deleted";
  }

  /** The whole current branch copied into a new thread, opened. */
  async forkAll() {
    const t = await this.ctx.api.post(`/api/threads/${enc(this.current.id)}/fork`, {});
    await this.open(t.id);
  }
}
