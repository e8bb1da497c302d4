// Organization settings: how long untouched threads are kept (the maintenance
// sweep deletes them after that many days; empty: kept for ever), the sites that
// may embed the organization's published chats and runner buttons, and the
// signing secret the service signs its calls to your tools and webhook steps
// with (hidden until asked for; rotating it makes a new one at once).

import { h } from "../dom.js";
import { check, dangerButton, labelled, onSubmit, status, submitRow } from "./formkit.js";

export default {
  id: "settings",
  title: "Organization",
  async render(root, ctx) {
    const s = await ctx.api.get("/api/orgs/settings");
    const retention = labelled("Delete threads untouched for (days, 1-3650; empty: keep them)", "input", {
      type: "number",
      min: 1,
      max: 3650,
      step: 1,
      value: s.thread_retention_days ?? "",
      id: "org-retention",
    });
    const domains = labelled("Sites that may embed chats and buttons (one a line: example.com, *.example.org, localhost:3000)", "textarea", { rows: 3, id: "org-domains" }, s.allowed_embed_domains.join("\n"));
    const said = status();
    const form = h(
      "form",
      { class: "stack", id: "org-form", "aria-label": "Organization settings" },
      retention.wrap,
      domains.wrap,
      submitRow("Save", said),
    );
    onSubmit(form, ctx, async () => {
      const days = retention.input.value.trim();
      const saved = await ctx.api.post("/api/orgs/settings", {
        threadRetentionDays: days === "" ? null : Number(days),
        allowedEmbedDomains: domains.input.value.split("\n").map((l) => l.trim()).filter(Boolean),
      });
      said.say(`saved: ${saved.thread_retention_days === null ? "threads are kept for ever" : `threads untouched for ${saved.thread_retention_days} days are deleted`}`);
    });

    const secret = labelled("Signing secret", "input", { type: "password", readonly: true, value: s.signing_secret, id: "org-secret", autocomplete: "off", spellcheck: "false" });
    const show = check("show it", { id: "org-secret-show" });
    show.input.addEventListener("change", () => {
      secret.input.type = show.input.checked ? "text" : "password";
    });
    const rotateStatus = status();
    const rotate = dangerButton("Rotate", ctx.guarded(async () => {
      const r = await ctx.api.post("/api/orgs/settings", { rotateSigningSecret: true });
      secret.input.value = r.signing_secret;
      rotateStatus.say("rotated: the new secret signs from now on");
    }));
    root.append(
      h("h2", {}, "Organization"),
      h("p", { class: "muted" }, `Settings of the organization "${s.org_id}".`),
      form,
      h(
        "form",
        { class: "mpart", id: "org-secret-form", "aria-label": "Signing secret", onsubmit: (ev) => ev.preventDefault() },
        h("h3", {}, "Signing secret"),
        h("p", { class: "muted small" }, "Your tools and webhook steps check the service's calls with it (X-Service-* headers)."),
        secret.wrap,
        h("div", { class: "row" }, show.wrap, rotate, rotateStatus),
      ),
    );
  },
};
