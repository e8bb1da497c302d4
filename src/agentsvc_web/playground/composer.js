// What goes with the message being composed: the model (GET /api/models), the
// model parameters, a client-side tool to offer, and the same request as curl,
// Python or TypeScript. A parameter is sent only when the user set it, so the
// agent's defaults hold otherwise.

import { copyText } from "./clipboard.js";
import { $, clear, h } from "./dom.js";
import { SNIPPETS } from "./snippets.js";

// the send body's names (camelCase) of the number fields, by input id
const NUMBERS = [
  ["param-temperature", "temperature", Number.parseFloat],
  ["param-top-p", "topP", Number.parseFloat],
  ["param-max-output-tokens", "maxOutputTokens", (v) => Number.parseInt(v, 10)],
];

export class Composer {
  constructor(api, showError, signal) {
    this.api = api;
    this.showError = showError;
    this.tool = null; // the client tool offered with the last send
    this.threadId = null;
    const on = (id, type, handler) => $(id).addEventListener(type, handler, { signal });
    for (const button of document.querySelectorAll("[data-snippet]")) {
      button.addEventListener("click", () => this.showSnippet(button.dataset.snippet), { signal });
    }
    on("model-choice", "change", () => this.bounds());
    on("snippet-copy", "click", async () => {
      const ok = await copyText($("snippet").textContent);
      $("snippet-status").textContent = ok ? "copied" : "select the text and copy it";
    });
  }

  /** The models a configured family serves, for the model choice. */
  async loadModels() {
    const select = $("model-choice");
    const keep = select.value;
    const models = await this.api.get("/api/models");
    this.models = models;
    clear(select).append(h("option", { value: "" }, "the agent's default"));
    for (const m of models) {
      const label = m.id === m.example ? m.id : `${m.id} (e.g. ${m.example})`;
      select.append(h("option", { value: m.example, selected: m.example === keep }, `${label} · ${m.family}`));
    }
  }

  /** The chosen model's highest temperature, where the listing says it. */
  bounds() {
    const model = (this.models ?? []).find((m) => m.example === $("model-choice").value);
    const max = model?.supports?.max_temperature;
    $("param-temperature").max = typeof max === "number" ? String(max) : "2";
  }

  /**
   * The send body for ``content`` with the chosen settings; undefined (and the
   * error bar says why) when a field is not what it must be.
   */
  body(content) {
    const body = { content };
    const model = $("model-choice").value;
    if (model) body.modelOverride = model;
    for (const [id, name, parse] of NUMBERS) {
      const raw = $(id).value.trim();
      if (!raw) continue;
      const value = parse(raw);
      if (!Number.isFinite(value)) {
        this.showError(`${name} must be a number`);
        return undefined;
      }
      body[name] = value;
    }
    const stop = $("param-stop")
      .value.split("\n")
      .filter((s) => s.length);
    if (stop.length) body.stop = stop;
    const schema = $("param-schema").value.trim();
    if (schema) {
      try {
        body.responseFormat = { type: "json_schema", jsonSchema: { name: "reply", schema: JSON.parse(schema) } };
      } catch (err) {
        this.showError(`the structured output's schema is not JSON: ${err.message}`);
        return undefined;
      }
    }
    const tool = this.declaredTool();
    if (tool === undefined) return undefined;
    if (tool) body.tools = [tool];
    return body;
  }

  /** The client-side tool to offer, null for none, undefined when its JSON is wrong. */
  declaredTool() {
    if (!$("tool-enabled").checked) return null;
    let parameters;
    try {
      parameters = JSON.parse($("tool-parameters").value || "{}");
    } catch (err) {
      this.showError(`the tool's parameters are not JSON: ${err.message}`);
      return undefined;
    }
    return { name: $("tool-name").value.trim(), description: $("tool-description").value, parameters };
  }

  /** The message being composed as code (curl, python or typescript), shown and copied. */
  async showSnippet(kind) {
    if (!this.threadId) return;
    const body = this.body($("message").value);
    if (!body) return;
    const code = SNIPPETS[kind](location.origin, this.threadId, body);
    $("snippet").textContent = code;
    $("snippet").dataset.kind = kind;
    $("snippet-box").hidden = false;
    const copied = await copyText(code);
    $("snippet-status").textContent = copied
      ? `copied: ${kind} for the message as composed now`
      : `${kind} for the message as composed now (select it and copy)`;
  }
}
