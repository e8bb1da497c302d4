// The runner button page's script, inlined with the answer's CSP nonce
// (agentsvc_web/runner_button.py). A constant: it reads the form back from its
// data- attributes and builds the body on an object without a prototype (a property
// named "__proto__" stays a property); it writes text only, never HTML.
"use strict";
(() => {
  const form = document.getElementById("run-form");
  const button = document.getElementById("run-submit");
  const status = document.getElementById("run-status");
  const show = (text, ok) => {
    status.textContent = text;
    status.className = ok === null ? "status" : "status " + (ok ? "ok" : "error");
  };
  const refuse = (el, message) => {
    el.setCustomValidity(message);
    el.reportValidity();
    el.focus();
    return null;
  };
  for (const el of form.querySelectorAll("[data-kind]")) {
    el.addEventListener("input", () => el.setCustomValidity(""));
  }
  const collect = () => {
    const body = Object.create(null);
    for (const el of form.querySelectorAll("[data-kind]")) {
      const name = el.dataset.name;
      const kind = el.dataset.kind;
      if (kind === "boolean") {
        body[name] = el.checked;
        continue;
      }
      const raw = kind === "json" ? el.value.trim() : el.value;
      if (raw === "") {
        if (el.required) return refuse(el, "Please fill in this field.");
        continue;
      }
      if (kind === "string") {
        body[name] = raw;
      } else if (kind === "integer" || kind === "number") {
        const n = Number(raw);
        if (!Number.isFinite(n) || (kind === "integer" && !Number.isInteger(n))) {
          return refuse(el, kind === "integer" ? "Enter a whole number." : "Enter a number.");
        }
        body[name] = n;
      } else {
        let value;
        try {
          value = JSON.parse(raw);
        } catch (error) {
          return refuse(el, "This is not valid JSON.");
        }
        const shape = el.dataset.json;
        if (shape === "array" && !Array.isArray(value)) return refuse(el, "Enter a JSON array.");
        const isObject = value !== null && typeof value === "object" && !Array.isArray(value);
        if (shape === "object" && !isObject) return refuse(el, "Enter a JSON object.");
        body[name] = value;
      }
    }
    return body;
  };
  const failure = (code, data) => {
    if (data && typeof data.detail === "string") return data.detail;
    if (data && data.error && typeof data.error.detail === "string") return data.error.detail;
    const named = data && typeof data.error === "string" ? data.error + ", " : "";
    return "The run could not be started (" + named + "HTTP " + code + ").";
  };
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (button.disabled) return;
    const body = collect();
    if (body === null) return;
    button.disabled = true;
    form.setAttribute("aria-busy", "true");
    show("Starting…", null);
    try {
      const res = await fetch(form.action, {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify(body),
        credentials: "omit",
        cache: "no-store",
      });
      let data = null;
      try {
        data = await res.json();
      } catch (error) {
        data = null;
      }
      if (res.ok && data && typeof data.runId === "string") {
        show("Started run " + data.runId, true);
      } else if (res.ok) show("Started.", true);
      else show(failure(res.status, data), false);
    } catch (error) {
      show("The service could not be reached; try again.", false);
    } finally {
      button.disabled = false;
      form.removeAttribute("aria-busy");
    }
  });
  if (window.parent !== window) {
    const post = () => window.parent.postMessage(
      { type: "agentsvc-runner-height",
        height: Math.ceil(document.documentElement.getBoundingClientRect().height) },
      "*",
    );
    new ResizeObserver(post).observe(document.documentElement);
  }
})();
