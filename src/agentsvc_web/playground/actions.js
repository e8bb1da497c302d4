// A message's actions in the chat: edit, regenerate, a switch between the
// versions of a message ("2 of 3"), fork, copy, and the reply's trace. Each is
// the thread tree's API call (threads.md), then the branch drawn again.

import { copyText } from "./clipboard.js";
import { $ } from "./dom.js";
import { pendingUserView } from "./messages.js";

const enc = encodeURIComponent;

/** The handlers messageView() calls, acting through ``chat`` (a Chat). */
export function treeActions(chat) {
  return {
    /** An edit of a user message: a new branch from it, its reply streamed. */
    async edit(m, content) {
      if (chat.running) return;
      const body = chat.composer.body(content);
      if (!body) return;
      const item = $("messages").querySelector(`[data-message-id="${m.id}"]`);
      if (item) {
        while (item.nextSibling) item.nextSibling.remove();
        item.replaceWith(pendingUserView(content));
      }
      const path = `/api/threads/${enc(chat.thread.id)}/messages/${enc(m.id)}/edit`;
      if (!(await chat.stream(path, body))) await chat.refresh();
    },

    /** Answers the branch's last user message again: a new version of the reply. */
    async regenerate(m) {
      if (chat.running) return;
      const full = chat.composer.body("");
      if (!full) return; // a field is wrong: already said
      const { content: _, ...body } = full;
      $("messages").querySelector(`[data-message-id="${m.id}"]`)?.remove();
      const path = `/api/threads/${enc(chat.thread.id)}/regenerate`;
      if (!(await chat.stream(path, body))) await chat.refresh();
    },

    /** Makes the branch through message ``id`` the current one. */
    async switchTo(id) {
      if (chat.running) return;
      await chat.guard(() => chat.api.put(`/api/threads/${enc(chat.thread.id)}/branch`, { messageId: id }));
      await chat.refresh();
      $("messages").querySelector(`[data-message-id="${id}"]`)?.scrollIntoView({ block: "nearest" });
      chat.setStatus("switched to another version");
    },

    /** A new thread with the branch up to this message. */
    async fork(m) {
      const thread = await chat.guard(() => chat.api.post(`/api/threads/${enc(chat.thread.id)}/fork`, { messageId: m.id }));
      if (thread) await chat.guard(() => chat.hooks.forked(thread));
    },

    async copy(m) {
      const ok = await copyText(m.content);
      chat.setStatus(ok ? "copied" : "the browser refused to copy");
    },

    /** The trace of a reply: the one seen live, else the thread's trace naming it. */
    async trace(m) {
      let traceId = chat.live.get(m.id)?.traceId;
      if (!traceId) {
        const query = new URLSearchParams({ threadId: chat.thread.id, limit: "100" });
        const page = await chat.guard(() => chat.api.get(`/api/logs?${query}`));
        traceId = page?.traces.find((t) => t.message_id === m.id)?.id;
      }
      if (!traceId) {
        chat.setStatus("no trace is stored for this reply");
        return;
      }
      await chat.guard(() => chat.hooks.trace(traceId));
    },
  };
}
