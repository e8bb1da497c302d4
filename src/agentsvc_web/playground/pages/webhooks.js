// Event webhooks: the organization's endpoints that are sent its events (a
// message, a reply, a run...) signed with Standard Webhooks. The page adds an
// endpoint (its whsec_ secret shown this once), picks its events, switches it
// off and on (a disabled one says why), rotates the secret, and shows its recent
// deliveries with every attempt, each one redelivered with a click.

import { h } from "../dom.js";
import { badge, check, dangerButton, enc, labelled, onSubmit, secretOnce, section, status, submitRow, table, when } from "./formkit.js";

let openEndpoint = null;
let shownSecret = null; // {endpointId, secret}: shown on the next drawing, then forgotten

function eventPicker(types, chosen, idPrefix) {
  const boxes = types.map((t) => ({ type: t.type, ...check(t.type, { checked: chosen.includes(t.type) ? true : null, id: `${idPrefix}-${t.type}`, title: t.description }) }));
  const wrap = h("fieldset", { class: "events" }, h("legend", {}, "Events"), h("div", { class: "pick-list" }, boxes.map((b) => b.wrap)));
  return { wrap, value: () => boxes.filter((b) => b.input.checked).map((b) => b.type) };
}

function createForm(ctx, types) {
  const url = labelled("URL", "input", { type: "url", required: true, placeholder: "https://example.com/hooks/agentsvc", id: "hook-url" });
  const description = labelled("Description", "input", { maxlength: 500 });
  const events = eventPicker(types, ["reply.completed"], "hook-new");
  const said = status();
  const form = h("form", { class: "stack", id: "hook-create", "aria-label": "New endpoint" }, url.wrap, description.wrap, events.wrap, submitRow("Add endpoint", said));
  onSubmit(form, ctx, async () => {
    const made = await ctx.api.post("/api/webhooks", { url: url.input.value, description: description.input.value, events: events.value() });
    openEndpoint = made.endpoint.id;
    shownSecret = { endpointId: made.endpoint.id, secret: made.secret };
    await ctx.refresh();
  });
  return form;
}

function attemptsText(d) {
  return d.attempts.map((a) => `${when(a.at)}: ${a.status_code ?? a.error ?? "no answer"} (${a.duration_ms} ms)`).join("; ") || "not yet sent";
}

async function endpointDetail(ctx, types, e) {
  const base = `/api/webhooks/${enc(e.id)}`;
  const page = await ctx.api.get(`${base}/deliveries?limit=20`);
  const note = status();
  const events = eventPicker(types, e.events, `hook-${e.id.slice(0, 8)}`);
  const save = h("form", { class: "stack", id: "hook-events" }, events.wrap, submitRow("Save events", note));
  onSubmit(save, ctx, async () => {
    await ctx.api.patch(base, { events: events.value() });
    note.say("saved");
  });
  const secret = shownSecret?.endpointId === e.id ? secretOnce("Signing secret", shownSecret.secret) : null;
  shownSecret = null;
  return section(
    `Endpoint ${e.url}`,
    { id: "hook-detail", "data-endpoint-id": e.id },
    secret,
    e.disabled_reason ? h("p", { class: "step-error" }, `Disabled: ${e.disabled_reason}`) : null,
    save,
    h(
      "div",
      { class: "row" },
      h(
        "button",
        {
          type: "button",
          onclick: ctx.guarded(async () => {
            const r = await ctx.api.post(`${base}/rotate-secret`);
            shownSecret = { endpointId: e.id, secret: r.secret };
            await ctx.refresh();
          }),
        },
        "Rotate secret",
      ),
      h("button", { type: "button", onclick: ctx.guarded(() => ctx.refresh()) }, "Refresh deliveries"),
    ),
    h("h4", {}, "Recent deliveries"),
    page.deliveries.length
      ? table(
          [
            ["Event", (d) => h("span", {}, d.event_type, h("br"), h("code", { class: "small" }, d.event_id))],
            ["Status", (d) => badge(d.status)],
            ["Attempts", (d) => attemptsText(d)],
            ["Next attempt", (d) => when(d.next_attempt_at)],
            [
              "",
              (d) =>
                h(
                  "button",
                  {
                    type: "button",
                    "aria-label": `Redeliver ${d.event_type} ${d.event_id}`,
                    onclick: ctx.guarded(async () => {
                      await ctx.api.post(`${base}/deliveries/${enc(d.id)}/resend`);
                      await ctx.refresh();
                    }),
                  },
                  "Redeliver",
                ),
            ],
          ],
          page.deliveries,
          { "aria-label": "Deliveries, newest first", id: "delivery-table" },
        )
      : h("p", { class: "muted" }, "Nothing sent yet: a delivery appears when one of its events happens."),
  );
}

export default {
  id: "webhooks",
  title: "Webhooks",
  async render(root, ctx) {
    const [endpoints, types] = await Promise.all([ctx.api.get("/api/webhooks"), ctx.api.get("/api/webhooks/event-types")]);
    root.append(
      h("h2", {}, "Webhooks"),
      h("p", { class: "muted" }, "Endpoints the organization's events are sent to, signed (Standard Webhooks: webhook-id, webhook-timestamp, webhook-signature)."),
      endpoints.length
        ? table(
            [
              ["Endpoint", (e) => h("button", { type: "button", class: "link", "data-endpoint-id": e.id, onclick: ctx.guarded(async () => { openEndpoint = e.id; await ctx.refresh(); }) }, e.url)],
              ["Description", (e) => e.description || "-"],
              ["Events", (e) => e.events.join(", ")],
              [
                "Enabled",
                (e) => {
                  const c = check("enabled", { checked: e.enabled ? true : null, "aria-label": `Enabled: ${e.url}` });
                  c.input.addEventListener(
                    "change",
                    ctx.guarded(async () => {
                      await ctx.api.patch(`/api/webhooks/${enc(e.id)}`, { enabled: c.input.checked });
                      await ctx.refresh();
                    }),
                  );
                  return [c.wrap, e.disabled_reason ? h("span", { class: "small step-error" }, ` ${e.disabled_reason}`) : null];
                },
              ],
              [
                "",
                (e) =>
                  dangerButton("Delete", ctx.guarded(async () => {
                    await ctx.api.delete(`/api/webhooks/${enc(e.id)}`);
                    await ctx.refresh();
                  }), { "aria-label": `Delete ${e.url}` }),
              ],
            ],
            endpoints,
            { "aria-label": "Endpoints", id: "hook-table" },
          )
        : h("p", { class: "muted" }, "No endpoint yet."),
      h("details", { open: endpoints.length ? null : true }, h("summary", {}, "Add an endpoint"), createForm(ctx, types)),
    );
    const open = endpoints.find((e) => e.id === openEndpoint);
    if (open) root.append(await endpointDetail(ctx, types, open));
  },
};
