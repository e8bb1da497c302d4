// API keys: the organization's keys (admins only). Make one (its secret is
// shown this once, with a copy button, and never again: the API keeps only a
// hash), list them with their prefixes, revoke one (it answers 401 from then
// on). The key this page is signed in with is marked: revoking it signs out.

import { h } from "../dom.js";
import { add, badge, dangerButton, enc, onSubmit, section, status, when } from "./formkit.js";

function shownOnce(made) {
  const secret = h("input", { readonly: true, value: made.key, id: "key-secret", "aria-label": "The new key", spellcheck: "false", class: "secret" });
  const copied = status();
  return h(
    "div",
    { class: "card once", id: "key-created", role: "region", "aria-label": "The new key" },
    h("p", {}, h("strong", {}, `Key "${made.name || made.prefix}" made. `), "Copy it now: it is shown this once and cannot be shown again."),
    h(
      "div",
      { class: "row" },
      secret,
      h("button", {
        type: "button",
        id: "key-copy",
        onclick: async () => {
          secret.select();
          try {
            await navigator.clipboard.writeText(made.key);
            copied.textContent = "copied";
          } catch {
            copied.textContent = "select it and copy (the browser refused the clipboard)";
          }
        },
      }, "Copy"),
      copied,
    ),
    h("button", { type: "button", id: "key-hide", onclick: (e) => e.target.closest("#key-created").remove() }, "Done: hide it"),
  );
}

function keyRow(ctx, key, mine, reload) {
  return h(
    "tr",
    { "data-key-id": key.id, "data-revoked": key.revoked_at ? "true" : "false" },
    h("td", {}, key.name || h("span", { class: "muted" }, "(no name)"), mine ? badge("this session", "info") : null),
    h("td", {}, h("code", {}, `${key.prefix}…`)),
    h("td", {}, when(key.created_at)),
    h("td", {}, key.revoked_at ? badge(`revoked ${when(key.revoked_at)}`, "bad") : badge("active", "ok")),
    h(
      "td",
      {},
      key.revoked_at
        ? null
        : dangerButton(mine ? "Revoke (signs you out)" : "Revoke", ctx.guarded(async () => {
            await ctx.api.delete(`/api/keys/${enc(key.id)}`);
            if (mine) {
              document.getElementById("signout")?.click();
              return;
            }
            await reload();
          }), { "data-revoke": key.id }),
    ),
  );
}

export default {
  id: "keys",
  title: "API keys",
  async render(root, ctx) {
    const keys = await ctx.api.get("/api/keys");
    const ownPrefix = (k) => ctx.api.key.startsWith(k.prefix);
    // prefixes may repeat (bootstrap keys share theirs): mark one only when unambiguous
    const mineCount = keys.filter((k) => !k.revoked_at && ownPrefix(k)).length;
    const name = h("input", { maxlength: 200, placeholder: "what it is for (e.g. the CI)", "aria-label": "New key's name", "data-field": "name" });
    const created = h("div", { "aria-live": "polite" });
    const table = h("tbody", {});
    const reload = async () => {
      const fresh = await ctx.api.get("/api/keys");
      table.replaceChildren(...fresh.map((k) => keyRow(ctx, k, mineCount === 1 && !k.revoked_at && ownPrefix(k), reload)));
    };
    const form = h("form", { class: "row", id: "key-create" }, name, h("button", { type: "submit" }, "Create key"));
    onSubmit(form, ctx, async () => {
      const made = await ctx.api.post("/api/keys", name.value.trim() ? { name: name.value.trim() } : {});
      name.value = "";
      created.replaceChildren(shownOnce(made));
      await reload();
    });
    table.replaceChildren(...keys.map((k) => keyRow(ctx, k, mineCount === 1 && !k.revoked_at && ownPrefix(k), reload)));
    add(root, 
      h("h2", {}, "API keys"),
      h("p", { class: "muted small" }, "Organization keys act as an admin of the organization. Keep them out of browsers you do not control."),
      section("New key", form, created),
      section(
        "Keys",
        h(
          "div",
          { class: "table-wrap" },
          h(
            "table",
            { class: "mtable", id: "key-list" },
            h("thead", {}, h("tr", {}, ["Name", "Prefix", "Made", "Status", ""].map((t) => h("th", { scope: "col" }, t)))),
            table,
          ),
        ),
      ),
    );
  },
};
