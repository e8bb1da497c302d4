// Publishing: the agent picked in the side bar as a chat anyone may use, at a
// public link (/c/<slug>). The page publishes it, changes or unpublishes it,
// shows the link, and previews the chat. The preview is a frame only when the
// chat page's own Content-Security-Policy lets this page frame it (its
// frame-ancestors names this page's origin: the chat's sites, or the
// organization's embed domains); otherwise the browser would refuse the frame,
// so the page says why and gives the link instead.

import { h } from "../dom.js";
import { check, dangerButton, enc, labelled, onSubmit, options, secretOnce, section, status, submitRow, table, webUrl, when } from "./formkit.js";

/** Whether a CSP's frame-ancestors lets `origin` (scheme://host[:port]) frame the page. */
export function framingAllowed(csp, origin) {
  const directive = (csp ?? "")
    .split(";")
    .map((d) => d.trim().split(/\s+/))
    .find((parts) => parts[0]?.toLowerCase() === "frame-ancestors");
  if (!directive) return true; // no frame-ancestors: framing is not restricted by CSP
  const here = new URL(origin);
  const port = (u) => u.port || (u.protocol === "https:" ? "443" : "80");
  return directive.slice(1).some((source) => {
    if (source === "'self'") return true; // the chat page is on this origin
    if (source.startsWith("'")) return false; // 'none'
    const m = /^(https?):\/\/(\*\.)?([^/:]+)(?::(\d+|\*))?$/i.exec(source);
    if (!m) return false;
    const [, scheme, wildcard, host, p] = m;
    if (`${scheme.toLowerCase()}:` !== here.protocol) return false;
    const portOk = p === "*" || (p ?? (scheme.toLowerCase() === "https" ? "443" : "80")) === port(here);
    const h0 = here.hostname.toLowerCase();
    const hostOk = wildcard ? h0.endsWith(`.${host.toLowerCase()}`) : h0 === host.toLowerCase();
    return portOk && hostOk;
  });
}

const lines = (text) => text.split("\n").map((l) => l.trim()).filter(Boolean);

function chatForm(ctx, agent, chat, onSaved) {
  const v = (x, d = "") => (chat ? (x ?? d) : d);
  const slug = labelled("Slug (the link's last part)", "input", { required: true, pattern: "[a-z0-9][a-z0-9-]*", value: v(chat?.slug, agent.name.toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-|-$/g, "")), id: "pub-slug" });
  const title = labelled("Title", "input", { value: v(chat?.title, agent.name), maxlength: 200 });
  const description = labelled("Description", "input", { value: v(chat?.description), maxlength: 2000 });
  const welcome = labelled("Welcome message", "textarea", { rows: 2, maxlength: 4000 }, v(chat?.welcome_message));
  const starters = labelled("Starter prompts (one a line)", "textarea", { rows: 2 }, v(chat?.starter_prompts, []).join("\n"));
  const visibility = labelled("Visibility", "select", {}, options([["public"], ["unlisted"], ["private", "private (signed visitors only)"]], v(chat?.visibility, "public")));
  const domains = labelled("Sites that may embed it (one a line; empty: the organization's embed domains)", "textarea", { rows: 2, id: "pub-domains" }, (v(chat?.allowed_domains, null) ?? []).join("\n"));
  const rate = labelled("Messages a minute per visitor", "input", { type: "number", min: 1, max: 600, value: v(chat?.rate_limit_per_min, 20) });
  const cap = labelled("Daily cost cap (USD, empty: none)", "input", { type: "number", min: 0, step: "any", value: v(chat?.daily_cost_cap_usd, 5) ?? "" });
  const active = check("active (visitors may chat)", { checked: v(chat?.is_active, true) ? true : null });
  const said = status();
  const form = h(
    "form",
    { class: "grid-form", id: "publish-form", "aria-label": chat ? "The published chat" : "Publish" },
    slug.wrap,
    title.wrap,
    visibility.wrap,
    rate.wrap,
    cap.wrap,
    description.wrap,
    h("div", { class: "row" }, welcome.wrap, starters.wrap, domains.wrap),
    h("div", { class: "row" }, active.wrap),
    submitRow(chat ? "Save" : "Publish", said),
  );
  for (const f of [welcome, starters, domains]) f.wrap.classList.add("grow");
  onSubmit(form, ctx, async () => {
    const capText = cap.input.value.trim();
    const body = {
      slug: slug.input.value.trim(),
      title: title.input.value,
      description: description.input.value,
      welcomeMessage: welcome.input.value,
      starterPrompts: lines(starters.input.value),
      visibility: visibility.input.value,
      allowedDomains: lines(domains.input.value).length ? lines(domains.input.value) : null,
      rateLimitPerMin: Number(rate.input.value || 20),
      dailyCostCapUsd: capText === "" ? null : Number(capText),
      isActive: active.input.checked,
    };
    const path = `/api/agents/${enc(agent.id)}/publish`;
    const saved = chat ? await ctx.api.patch(path, body) : await ctx.api.post(path, body);
    said.say(chat ? "saved" : "published");
    await onSaved(saved);
  });
  return form;
}

async function preview(chat) {
  const url = webUrl(chat.url); // the service's own /c/<slug>, made absolute
  const link = h("a", { href: url, target: "_blank", rel: "noopener noreferrer", id: "pub-link" }, url);
  const box = h("div", { id: "pub-preview" });
  // the chat page's headers say whether this page may frame it
  const response = await fetch(url, { cache: "no-store", credentials: "omit" });
  const csp = response.headers.get("content-security-policy");
  if (response.ok && framingAllowed(csp, location.origin)) {
    box.dataset.mode = "frame";
    box.append(h("iframe", { src: url, title: `Preview of the chat ${chat.title}`, class: "preview-frame", loading: "lazy", referrerpolicy: "no-referrer" }));
  } else {
    box.dataset.mode = "link";
    box.append(
      h(
        "p",
        { class: "muted" },
        response.ok
          ? `The chat page may be framed only by its sites (frame-ancestors), and this console (${location.origin}) is not one of them, so it is not previewed here. Add ${location.host} to its sites to preview it here, or open the link.`
          : `The chat page answered ${response.status}: ${chat.is_active ? "" : "the chat is not active. "}Open the link to see what a visitor sees.`,
      ),
    );
  }
  return [h("p", {}, "Public link: ", link), box];
}

async function visitorThreads(ctx, agent) {
  let page;
  try {
    page = await ctx.api.get(`/api/agents/${enc(agent.id)}/publish/threads?limit=20`);
  } catch (err) {
    if (err.status !== 403) throw err;
    return h("p", { class: "muted" }, "The visitors' threads are for admins.");
  }
  if (!page.threads.length) return h("p", { class: "muted" }, "No visitor has started a thread yet.");
  return table(
    [
      ["Thread", (t) => t.thread_id.slice(0, 8)],
      ["Visitor", (t) => `${t.visitor_id.slice(0, 12)}${t.identified ? " (identified)" : ""}`],
      ["Started", (t) => when(t.created_at)],
    ],
    page.threads,
    { "aria-label": "Visitors' threads" },
  );
}

export default {
  id: "publishing",
  title: "Publishing",
  async render(root, ctx) {
    root.append(h("h2", {}, "Publishing"));
    const agent = ctx.agent();
    if (!agent) {
      root.append(h("p", { class: "muted" }, "Pick or create an agent in the side bar: it is the agent you publish."));
      return;
    }
    let chat = null;
    try {
      chat = await ctx.api.get(`/api/agents/${enc(agent.id)}/publish`);
    } catch (err) {
      if (err.status !== 404) throw err;
    }
    const onSaved = async (saved) => {
      await ctx.refresh();
      // the identity secret is in the answer that published the chat, this once
      if (saved.identity_secret) document.getElementById("pub-secret")?.replaceChildren(secretOnce("Identity secret (signs private visitors)", saved.identity_secret));
    };
    root.append(h("p", { class: "muted" }, `${agent.name} as a chat anyone with the link may use${chat ? "" : ": not published yet"}.`));
    root.append(h("div", { id: "pub-secret", "aria-live": "polite" }), chatForm(ctx, agent, chat, onSaved));
    if (!chat) return;
    const unpublish = dangerButton("Unpublish", ctx.guarded(async () => {
      await ctx.api.delete(`/api/agents/${enc(agent.id)}/publish`);
      await ctx.refresh();
    }));
    root.append(
      h("p", { class: "muted small" }, `Cost today: $${chat.cost_today_usd}${chat.cap_reached ? " (cap reached: visitors are refused until tomorrow)" : ""}. `, unpublish),
      section("Preview", ...(await preview(chat))),
      section("Visitors' threads", await visitorThreads(ctx, agent)),
    );
  },
};
