// A runner's triggers (what starts its runs: api and manual calls, a webhook, a
// button, a cron schedule) and its budget. A webhook or button trigger's token is
// in the answer that makes (or rotates) it and never again: the page shows it
// once, with the webhook URL it goes in.

import { h } from "../dom.js";
import { check, dangerButton, enc, labelled, numberOrNull, onSubmit, options, parseJson, secretOnce, status, submitRow, table, when } from "./formkit.js";

const KINDS = ["manual", "api", "webhook", "button", "cron"];

export async function renderTriggers(root, ctx, runner) {
  const base = `/api/runners/${enc(runner.id)}/triggers`;
  const triggers = await ctx.api.get(base);
  const shown = h("div", { id: "trigger-token", "aria-live": "polite" });

  const showToken = (t) => {
    if (!t.token) return;
    const url = new URL(t.webhook_url ?? `/api/runners/webhooks/${enc(t.token)}`, location.origin).href;
    shown.replaceChildren(secretOnce(`Token of "${t.name || t.kind}"`, t.token), h("p", { class: "small" }, "Webhook URL: ", h("code", {}, url)));
  };

  const kind = labelled("Kind", "select", {}, options(KINDS.map((k) => [k]), "webhook"));
  const name = labelled("Name", "input", { maxlength: 200 });
  const cron = labelled("Cron (for cron)", "input", { placeholder: "0 9 * * 1", maxlength: 200 });
  const tz = labelled("Time zone", "input", { value: "UTC", maxlength: 64 });
  const input = labelled("Default input (JSON)", "input", { spellcheck: "false", placeholder: "{}" });
  const said = status();
  const form = h(
    "form",
    { class: "grid-form", id: "trigger-create", "aria-label": "New trigger" },
    kind.wrap,
    name.wrap,
    cron.wrap,
    tz.wrap,
    input.wrap,
    submitRow("Add trigger", said),
  );
  onSubmit(form, ctx, async () => {
    const body = { kind: kind.input.value, name: name.input.value, timezone: tz.input.value || "UTC" };
    if (body.kind === "cron") body.cron = cron.input.value;
    const defaults = parseJson(input.input.value, "The default input");
    if (defaults !== undefined) body.input = defaults;
    const made = await ctx.api.post(base, body);
    said.say(`added a ${made.kind} trigger`);
    await redraw();
    showToken(made);
  });

  const list = h("div", {});
  const redraw = async () => {
    const rows = await ctx.api.get(base);
    list.replaceChildren(rowsOf(rows));
  };
  const rowsOf = (rows) =>
    rows.length
      ? table(
          [
            ["Kind", (t) => t.kind],
            ["Name", (t) => t.name || "-"],
            [
              "Enabled",
              (t) => {
                const c = check("enabled", { checked: t.enabled ? true : null, "aria-label": `Enabled: ${t.name || t.kind}` });
                c.input.addEventListener(
                  "change",
                  ctx.guarded(async () => {
                    await ctx.api.patch(`${base}/${enc(t.id)}`, { enabled: c.input.checked });
                    await redraw();
                  }),
                );
                return c.wrap;
              },
            ],
            ["Schedule", (t) => (t.cron ? `${t.cron} (${t.timezone}); next ${when(t.next_fire_at)}` : "-")],
            ["Token", (t) => (t.has_token ? `…${t.token_hint ?? ""}` : "-")],
            [
              "",
              (t) =>
                h(
                  "div",
                  { class: "row" },
                  t.has_token
                    ? h(
                        "button",
                        {
                          type: "button",
                          onclick: ctx.guarded(async () => {
                            showToken(await ctx.api.post(`${base}/${enc(t.id)}/rotate`));
                            await redraw();
                          }),
                        },
                        "Rotate token",
                      )
                    : null,
                  dangerButton("Delete", ctx.guarded(async () => {
                    await ctx.api.delete(`${base}/${enc(t.id)}`);
                    await redraw();
                  })),
                ),
            ],
          ],
          rows,
          { "aria-label": "Triggers", id: "trigger-table" },
        )
      : h("p", { class: "muted" }, "No trigger: runs start from this page or the API.");
  list.replaceChildren(rowsOf(triggers));
  root.append(list, shown, h("details", {}, h("summary", {}, "Add a trigger"), form));
}

export async function renderBudget(root, ctx, runner) {
  const path = `/api/runners/${enc(runner.id)}/budget`;
  const b = await ctx.api.get(path);
  const num = (label, value, attrs) => labelled(label, "input", { type: "number", min: 0, step: "any", value: value ?? "", ...attrs });
  const perRunUsd = num("Max cost per run (USD)", b.max_cost_usd_per_run);
  const perRunTokens = num("Max tokens per run", b.max_tokens_per_run, { step: 1 });
  const dayUsd = num("Daily cost (USD)", b.daily_cost_usd);
  const dayTokens = num("Daily tokens", b.daily_tokens, { step: 1 });
  const soft = num("Soft limit (% for a warning)", b.soft_limit_pct, { max: 100, step: 1 });
  const onExceed = labelled("When exceeded", "select", {}, options([["pause", "pause the run"], ["fail", "fail the run"]], b.on_exceed));
  const said = status();
  const form = h(
    "form",
    { class: "grid-form", id: "budget-form", "aria-label": "Budget" },
    perRunUsd.wrap,
    perRunTokens.wrap,
    dayUsd.wrap,
    dayTokens.wrap,
    soft.wrap,
    onExceed.wrap,
    submitRow("Save budget", said),
  );
  onSubmit(form, ctx, async () => {
    const saved = await ctx.api.request("PUT", path, {
      maxCostUsdPerRun: numberOrNull(perRunUsd.input),
      maxTokensPerRun: numberOrNull(perRunTokens.input),
      dailyCostUsd: numberOrNull(dayUsd.input),
      dailyTokens: numberOrNull(dayTokens.input),
      softLimitPct: numberOrNull(soft.input) ?? 80,
      onExceed: onExceed.input.value,
    });
    said.say(`saved: ${saved.max_tokens_per_run ?? "no"} tokens a run, on exceeding: ${saved.on_exceed}`);
  });
  root.append(h("p", { class: "muted small" }, "An empty field is no limit."), form);
}
