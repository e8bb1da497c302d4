// Channels: the agent picked in the side bar on messaging platforms (a signed
// webhook of your own, Telegram, Slack, WhatsApp Cloud, WhatsApp Web). The page
// lists its channels with their status, connects a new one, pairs WhatsApp Web
// by its QR code (an image the API hands over as a data: URL, drawn again until
// the phone has scanned it), and shows each channel's contacts (approve or block
// a pending one) and the messages that reached it.

import { h, put } from "../dom.js";
import { badge, dangerButton, enc, labelled, onSubmit, options, parseJson, secretOnce, section, status, submitRow, table, when } from "./formkit.js";

const TYPES = ["webhook", "telegram", "slack", "whatsapp_cloud", "whatsapp_web"];
const QR_POLL_MS = 3000;
let openChannel = null;

function createForm(ctx, agent, onMade) {
  const type = labelled("Type", "select", { id: "channel-type" }, options(TYPES.map((t) => [t]), "webhook"));
  const name = labelled("Name", "input", { maxlength: 200, id: "channel-name" });
  const dm = labelled("Direct messages", "select", {}, options([["open"], ["allowlist"], ["pairing", "pairing (a code, then your approval)"], ["disabled"]], "open"));
  const creds = labelled("Credentials (JSON, write-only)", "input", { spellcheck: "false", placeholder: '{"botToken": "..."}', autocomplete: "off" });
  const config = labelled("Config (JSON)", "input", { spellcheck: "false", placeholder: '{"target_url": "https://…"} (webhook)', id: "channel-config" });
  const said = status();
  const form = h(
    "form",
    { class: "grid-form", id: "channel-create", "aria-label": "New channel" },
    type.wrap,
    name.wrap,
    dm.wrap,
    creds.wrap,
    config.wrap,
    submitRow("Connect channel", said),
  );
  onSubmit(form, ctx, async () => {
    const body = { type: type.input.value, dmPolicy: dm.input.value };
    if (name.input.value) body.name = name.input.value;
    const c = parseJson(creds.input.value, "The credentials");
    const k = parseJson(config.input.value, "The config");
    if (c !== undefined) body.credentials = c;
    if (k !== undefined) body.config = k;
    const made = await ctx.api.post(`/api/agents/${enc(agent.id)}/channels`, body);
    creds.input.value = ""; // never left in the page
    said.say(`connected a ${made.type} channel: ${made.status}`);
    await onMade(made);
  });
  return form;
}

/** WhatsApp Web's QR code, asked again until the channel is connected. */
function qrBox(ctx, agent, channel) {
  const box = h("div", { class: "qr-box", id: "channel-qr", "aria-live": "polite" });
  let timer = null;
  const show = async () => {
    clearTimeout(timer);
    if (!box.isConnected && timer !== null) return;
    let answer;
    try {
      answer = await ctx.api.get(`/api/agents/${enc(agent.id)}/channels/${enc(channel.type)}/qr`);
    } catch (err) {
      if (err.status === 409) {
        box.dataset.state = "connected";
        box.replaceChildren(h("p", {}, "Connected: the phone has scanned the code."));
        return;
      }
      throw err;
    }
    const url = answer.qr?.data_url ?? "";
    box.dataset.state = answer.status;
    put(
      box,
      url.startsWith("data:image/")
        ? h("img", { src: url, alt: "QR code: scan it with WhatsApp on your phone (Linked devices)", width: 240, height: 240 })
        : h("p", { class: "muted" }, "No code yet: the platform is starting the session."),
      h("p", { class: "small" }, `Status: ${answer.status}${answer.qr?.expires_at ? `; this code expires at ${when(answer.qr.expires_at)}` : ""}`),
      answer.pairing_code ? h("p", {}, "Or enter this code on the phone: ", h("code", {}, answer.pairing_code)) : null,
    );
    timer = setTimeout(() => {
      if (box.isConnected) show().catch((e) => ctx.showError(e.message));
    }, QR_POLL_MS);
  };
  return { box, show };
}

async function channelDetail(ctx, agent, channel) {
  const base = `/api/agents/${enc(agent.id)}/channels/${enc(channel.id)}`;
  const [contacts, messages] = await Promise.all([ctx.api.get(`${base}/contacts?limit=50`), ctx.api.get(`${base}/messages?limit=20`)]);
  const setContact = (k, status) =>
    ctx.guarded(async () => {
      await ctx.api.patch(`${base}/contacts/${enc(k.id)}`, { status });
      await ctx.refresh();
    });
  const parts = [
    h("dl", { class: "facts" }, h("dt", {}, "inbound URL"), h("dd", {}, h("code", {}, channel.inbound_url)), h("dt", {}, "status"), h("dd", {}, badge(channel.status), channel.status_reason ? ` ${channel.status_reason}` : "")),
  ];
  if (channel.type === "whatsapp_web" && channel.status !== "connected") {
    const qr = qrBox(ctx, agent, channel);
    parts.push(h("h4", {}, "Pair by QR code"), qr.box);
    await qr.show();
  }
  parts.push(
    h("h4", {}, "Contacts"),
    contacts.contacts.length
      ? table(
          [
            ["Name", (k) => k.display_name || k.username || k.external_id],
            ["Status", (k) => badge(k.status)],
            ["Pairing code", (k) => k.pairing_code ?? "-"],
            ["Last message", (k) => when(k.last_message_at)],
            [
              "",
              (k) =>
                h(
                  "div",
                  { class: "row" },
                  k.status !== "approved" ? h("button", { type: "button", onclick: setContact(k, "approved") }, "Approve") : null,
                  k.status !== "blocked" ? h("button", { type: "button", class: "danger", onclick: setContact(k, "blocked") }, "Block") : null,
                ),
            ],
          ],
          contacts.contacts,
          { "aria-label": "Contacts" },
        )
      : h("p", { class: "muted" }, "No contact yet."),
    h("h4", {}, "Messages"),
    messages.messages.length
      ? table(
          [
            ["From", (m) => m.sender_name || m.sender_id],
            ["Text", (m) => m.text],
            ["State", (m) => [badge(m.state), m.error ? ` ${m.error}` : ""]],
            ["At", (m) => when(m.created_at)],
          ],
          messages.messages.map((m) => ({ ...m, id: m.event_id })),
          { "aria-label": "Messages that reached the channel" },
        )
      : h("p", { class: "muted" }, "No message has reached it yet."),
  );
  return section(`${channel.name || channel.type}`, { id: "channel-detail", "data-channel-id": channel.id }, ...parts);
}

export default {
  id: "channels",
  title: "Channels",
  async render(root, ctx) {
    root.append(h("h2", {}, "Channels"));
    const agent = ctx.agent();
    if (!agent) {
      root.append(h("p", { class: "muted" }, "Pick or create an agent in the side bar: channels belong to an agent."));
      return;
    }
    const channels = await ctx.api.get(`/api/agents/${enc(agent.id)}/channels`);
    const once = h("div", { id: "channel-secret", "aria-live": "polite" });
    const onMade = async (made) => {
      openChannel = made.id;
      await ctx.refresh();
      if (made.signing_secret) document.getElementById("channel-secret")?.replaceChildren(secretOnce("Signing secret", made.signing_secret));
    };
    root.append(
      h("p", { class: "muted" }, `Where people reach ${agent.name}: each channel's messages become threads, answered by the agent.`),
      channels.length
        ? table(
            [
              ["Channel", (c) => h("button", { type: "button", class: "link", "data-channel-id": c.id, onclick: ctx.guarded(async () => { openChannel = c.id; await ctx.refresh(); }) }, c.name || c.type)],
              ["Type", (c) => c.type],
              ["Status", (c) => [badge(c.status), c.status_reason ? h("span", { class: "small muted" }, ` ${c.status_reason}`) : null]],
              ["Direct messages", (c) => c.dm_policy],
              ["Credentials", (c) => (c.has_credentials ? "set" : "-")],
              [
                "",
                (c) =>
                  dangerButton("Disconnect", ctx.guarded(async () => {
                    await ctx.api.delete(`/api/agents/${enc(agent.id)}/channels/${enc(c.id)}`);
                    await ctx.refresh();
                  }), { "aria-label": `Disconnect ${c.name || c.type}` }),
              ],
            ],
            channels,
            { "aria-label": "Channels", id: "channel-table" },
          )
        : h("p", { class: "muted" }, "No channel yet."),
      once,
      h("details", { open: channels.length ? null : true }, h("summary", {}, "Connect a channel"), createForm(ctx, agent, onMade)),
    );
    const open = channels.find((c) => c.id === openChannel);
    if (open) root.append(await channelDetail(ctx, agent, open));
  },
};
