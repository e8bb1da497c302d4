// Knowledge: documents the agents answer from. Upload one (a progress bar while
// the bytes go up: XMLHttpRequest reports upload progress, fetch does not), see
// it go queued -> processing -> ready (or failed, with the reason) while the page
// polls, open its chunks to see how it was cut, reindex or delete it, and
// search as the model's knowledge_search tool would, seeing exactly the results
// the model would get.

import { h, pretty } from "../dom.js";
import { add, badge, dangerButton, enc, field, onSubmit, section, select, status, submitRow, when } from "./formkit.js";

const POLL_MS = 1000;
const BUSY = new Set(["queued", "processing"]);

/** POSTs a multipart form with XMLHttpRequest, reporting progress 0..1. */
function uploadWithProgress(key, form, onProgress) {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open("POST", "/api/knowledge/upload");
    xhr.setRequestHeader("Authorization", `Bearer ${key}`);
    xhr.setRequestHeader("Accept", "application/json");
    xhr.upload.addEventListener("progress", (e) => {
      if (e.lengthComputable) onProgress(e.loaded / e.total);
    });
    xhr.addEventListener("load", () => {
      let body = null;
      try {
        body = JSON.parse(xhr.responseText);
      } catch {
        // a proxy's page: reported below with its status
      }
      if (xhr.status >= 200 && xhr.status < 300 && body) {
        onProgress(1);
        resolve(body);
      } else if (body && typeof body.error === "string") {
        reject(new Error(`${body.error}: ${body.detail ?? ""}`));
      } else {
        reject(new Error(`HTTP ${xhr.status}: ${xhr.responseText.slice(0, 200) || xhr.statusText}`));
      }
    });
    xhr.addEventListener("error", () => reject(new Error("the upload did not reach the service")));
    xhr.send(form);
  });
}

const CHUNK_PAGE = 50;

function chunkItem(c) {
  const where = [
    `#${c.ordinal}`,
    `${c.chars} characters, about ${c.tokens} tokens`,
    c.headings.length ? c.headings.join(" › ") : null,
    c.page !== null ? `page ${c.page}` : null,
  ].filter(Boolean);
  return h(
    "li",
    { class: "card", "data-chunk-id": c.id, "data-ordinal": c.ordinal },
    h("p", { class: "muted small" }, where.join(" · ")),
    h("pre", { class: "chunk" }, c.text),
  );
}

/** The document's chunks, fetched when opened, fifty at a time. `opened` keeps
 * the ids of open ones, so that the list's polling re-renders them open. */
function chunksPart(ctx, doc, opened) {
  const list = h("ol", { class: "plain cards", "data-chunk-list": doc.id });
  const said = status({ "data-chunks-status": doc.id });
  const more = h("button", { type: "button", hidden: true, "data-chunks-more": doc.id }, "More chunks");
  let next = 0;
  const load = async (fresh) => {
    const page = await ctx.api.get(`/api/knowledge/${enc(doc.id)}/chunks?offset=${fresh ? 0 : next}&limit=${CHUNK_PAGE}`);
    const items = page.chunks.map(chunkItem);
    if (fresh) list.replaceChildren(...items);
    else list.append(...items);
    next = page.next_offset;
    more.hidden = next === null;
    const shown = list.children.length;
    if (shown) said.textContent = `${shown} of ${page.chunk_count} chunk(s)${BUSY.has(page.status) ? `, until the ${page.status} reindex replaces them` : ""}`;
    else said.textContent = BUSY.has(page.status) ? `${page.status}: no chunk yet` : "no chunk";
  };
  const box = h("details", { "data-chunks": doc.id }, h("summary", {}, "Chunks"), said, list, more);
  box.addEventListener("toggle", () => {
    if (!box.open) {
      opened.delete(doc.id);
      return;
    }
    opened.add(doc.id);
    ctx.guarded(() => load(true))();
  });
  more.addEventListener("click", ctx.guarded(() => load(false)));
  if (opened.has(doc.id)) box.open = true; // its toggle event loads it
  return box;
}

function docRow(ctx, doc, reload, opened) {
  const tone = doc.status === "ready" ? "ok" : doc.status === "failed" ? "bad" : "warn";
  return h(
    "li",
    { class: "card", "data-document-id": doc.id, "data-status": doc.status },
    h(
      "div",
      { class: "row wrap" },
      h("strong", {}, doc.title),
      badge(doc.status, tone),
      h("span", { class: "muted small" }, `${doc.scope}${doc.agent_id ? " (agent)" : ""} · ${doc.mime_type} · ${doc.bytes} bytes · ${doc.chunk_count} chunk(s)`),
    ),
    doc.error ? h("p", { class: doc.status === "failed" ? "error-text small" : "muted small" }, doc.error) : null,
    h("p", { class: "muted small" }, `uploaded ${when(doc.created_at)} · indexed ${when(doc.indexed_at, "never")}`),
    h(
      "div",
      { class: "row" },
      h("button", {
        type: "button",
        "data-reindex": doc.id,
        onclick: ctx.guarded(async () => {
          await ctx.api.post(`/api/knowledge/${enc(doc.id)}/reindex`);
          await reload();
        }),
      }, "Reindex"),
      dangerButton("Delete", ctx.guarded(async () => {
        await ctx.api.delete(`/api/knowledge/${enc(doc.id)}`);
        await reload();
      }), { "data-delete": doc.id }),
    ),
    chunksPart(ctx, doc, opened),
  );
}

function searchPart(ctx, scopeOf) {
  const query = h("input", { type: "search", required: true, maxlength: 1000, placeholder: "What would the model find?", "data-field": "query" });
  const topK = h("input", { type: "number", min: 1, max: 20, value: 5, "data-field": "topK" });
  const said = status({ id: "knowledge-search-status" });
  const results = h("ol", { class: "plain results", id: "knowledge-results" });
  const raw = h("pre", { id: "knowledge-tool-result" });
  const form = h(
    "form",
    { class: "stack", id: "knowledge-search", role: "search" },
    field("Query", query),
    field("Results (topK)", topK),
    submitRow("Search", said),
  );
  onSubmit(form, ctx, async () => {
    const body = { query: query.value, topK: Number(topK.value) || 5 };
    const agentId = scopeOf();
    if (agentId) body.agentId = agentId;
    said.textContent = "searching...";
    const answer = await ctx.api.post("/api/knowledge/search", body);
    said.textContent = `${answer.results.length} result(s), ${answer.mode.replace("_", " ")}`;
    results.replaceChildren(
      ...answer.results.map((r) =>
        h(
          "li",
          { class: "card", "data-chunk-id": r.chunk_id },
          h("div", { class: "row wrap" }, h("strong", {}, r.title), r.headings?.length ? h("span", { class: "muted small" }, r.headings.join(" › ")) : null,
            h("span", { class: "muted small" }, `score ${r.score}`)),
          h("pre", { class: "chunk" }, r.text),
        ),
      ),
    );
    // the knowledge_search tool's result, field for field, as the model reads it
    const tool = answer.results.map(({ document_id, title, chunk_id, headings, page, score, text }) => ({
      document_id, title, chunk_id, headings, page, score, text,
    }));
    raw.textContent = pretty({ results: tool });
  });
  return section(
    "Search as the model would",
    form,
    results,
    h("details", {}, h("summary", {}, "The tool result the model gets"), raw),
  );
}

export default {
  id: "knowledge",
  title: "Knowledge",
  async render(root, ctx) {
    const agent = ctx.agent();
    const scope = select(
      [["org", "the organization (every agent)"], ...(agent ? [["agent", `only ${agent.name}`]] : [])],
      "org",
      { id: "knowledge-scope" },
    );
    const agentId = () => (scope.value === "agent" && agent ? agent.id : null);
    const list = h("ul", { class: "plain cards", id: "knowledge-list", "aria-live": "polite" });
    let timer = null;
    let uploaded = null; // the id of the document uploaded last: its status is told
    const opened = new Set(); // the documents whose chunks are shown
    const said = status({ id: "knowledge-upload-status" });
    const reload = async () => {
      clearTimeout(timer);
      if (!list.isConnected) return; // the page was left (or opened again)
      const docs = await ctx.api.get("/api/knowledge");
      const mine = docs.find((d) => d.id === uploaded);
      if (mine) said.textContent = `${mine.title}: ${mine.status}${mine.error ? ` (${mine.error})` : ""}`;
      list.replaceChildren(
        ...(docs.length ? docs.map((d) => docRow(ctx, d, reload, opened)) : [h("li", { class: "muted" }, "No document yet.")]),
      );
      if (docs.some((d) => BUSY.has(d.status))) {
        timer = setTimeout(() => reload().catch((err) => ctx.showError(err.message)), POLL_MS);
      }
    };

    const file = h("input", { type: "file", required: true, accept: ".txt,.md,.markdown,.html,.htm,.pdf,text/*,application/pdf", "data-field": "file" });
    const title = h("input", { maxlength: 200, placeholder: "blank: the file's name", "data-field": "title" });
    const progress = h("progress", { max: 1, value: 0, id: "knowledge-progress", "aria-label": "Upload progress" });
    const upload = h(
      "form",
      { class: "stack", id: "knowledge-upload", "aria-label": "Upload a document" },
      field("File (text, Markdown, HTML or PDF)", file),
      field("Title", title),
      field("Who may search it", scope),
      h("div", { class: "row" }, h("button", { type: "submit" }, "Upload"), progress, said),
    );
    onSubmit(upload, ctx, async () => {
      const picked = file.files[0];
      if (!picked) return;
      const form = new FormData();
      form.append("file", picked, picked.name);
      if (title.value.trim()) form.append("title", title.value.trim());
      if (agentId()) form.append("agentId", agentId());
      said.textContent = `uploading ${picked.name}...`;
      progress.value = 0;
      const doc = await uploadWithProgress(ctx.api.key, form, (share) => {
        progress.value = share;
        said.textContent = `uploading ${picked.name}: ${Math.round(share * 100)}%`;
      }).catch((err) => {
        said.textContent = "not uploaded";
        throw err;
      });
      uploaded = doc.id;
      said.textContent = `${doc.title}: ${doc.status}`;
      file.value = "";
      title.value = "";
      await reload();
    });

    add(root, 
      h("h2", {}, "Knowledge"),
      h("p", { class: "muted small" }, "Documents the model searches with its knowledge_search tool, in the organization or one agent."),
      section("Upload", upload),
      section("Documents", list),
      searchPart(ctx, agentId),
    );
    await reload();
  },
};
