// The API client of the page: every call carries the key as a bearer token, in
// a header only (never in a URL). Errors keep the API's own code and detail.

export class ApiError extends Error {
  constructor(status, code, detail) {
    super(code ? `${code}: ${detail}` : `HTTP ${status}: ${detail}`);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

async function errorOf(response) {
  const text = await response.text();
  try {
    const body = JSON.parse(text);
    if (body && typeof body.error === "string") {
      return new ApiError(response.status, body.error, String(body.detail ?? ""));
    }
  } catch {
    // not the API's error body (a proxy's page): keep its start
  }
  return new ApiError(response.status, "", text.slice(0, 200) || response.statusText);
}

/**
 * A random (version 4) UUID. crypto.randomUUID exists in secure contexts only
 * (HTTPS or localhost); over plain HTTP on another address (a LAN address, a
 * container published beyond loopback) the page builds one from
 * crypto.getRandomValues, which every context has.
 */
export function uuid4() {
  if (typeof crypto.randomUUID === "function") return crypto.randomUUID();
  const b = crypto.getRandomValues(new Uint8Array(16));
  b[6] = (b[6] & 0x0f) | 0x40; // version 4
  b[8] = (b[8] & 0x3f) | 0x80; // the RFC 4122 variant
  const hex = [...b].map((x) => x.toString(16).padStart(2, "0")).join("");
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

export class Api {
  constructor(key) {
    this.key = key;
  }

  headers(extra) {
    return { Authorization: `Bearer ${this.key}`, Accept: "application/json", ...extra };
  }

  async request(method, path, body, signal) {
    const init = { method, headers: this.headers(), signal, cache: "no-store" };
    if (body !== undefined) {
      init.headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const response = await fetch(path, init);
    if (!response.ok) throw await errorOf(response);
    return response.json();
  }

  get(path) {
    return this.request("GET", path);
  }

  post(path, body) {
    return this.request("POST", path, body ?? {});
  }

  put(path, body) {
    return this.request("PUT", path, body);
  }

  patch(path, body) {
    return this.request("PATCH", path, body);
  }

  delete(path, body) {
    return this.request("DELETE", path, body);
  }

  /**
   * POSTs a message and yields the reply's events as {event, id, data}.
   * EventSource cannot POST, so the response body is read with fetch. An
   * Idempotency-Key makes a retried send answer the same reply.
   */
  send(threadId, body, signal) {
    return this.stream(`/api/threads/${encodeURIComponent(threadId)}/messages`, body, signal);
  }

  /** A POST that answers a reply as Server-Sent Events (a send, an edit, a regenerate). */
  async *stream(path, body, signal) {
    const response = await fetch(path, {
      method: "POST",
      headers: this.headers({
        "Content-Type": "application/json",
        Accept: "text/event-stream",
        "Idempotency-Key": uuid4(),
      }),
      body: JSON.stringify(body),
      signal,
      cache: "no-store",
    });
    if (!response.ok) throw await errorOf(response);
    yield* sseEvents(response);
  }

  /** Follows a reply that is already running (GET .../stream), from its start. */
  async *follow(threadId, runId, signal) {
    const query = new URLSearchParams({ runId }); // no Last-Event-ID: from its first event
    const response = await fetch(
      `/api/threads/${encodeURIComponent(threadId)}/stream?${query}`,
      { headers: this.headers({ Accept: "text/event-stream" }), signal, cache: "no-store" },
    );
    if (!response.ok) throw await errorOf(response);
    yield* sseEvents(response);
  }
}

/** Yields {event, id, data} for each Server-Sent Event of a fetch response. */
export async function* sseEvents(response) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
    let end;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      let id = null;
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue; // keep-alive comment
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("id:")) id = line.slice(3).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { event, id, data: JSON.parse(data.join("\n")) };
    }
  }
}

/** Follows a log of numbered events (a runner run's events, a code session's
 * timeline: GET `url` as Server-Sent Events, each event's `seq` its id) while
 * `list` is on the page and `controller` is not aborted; a log that sends nothing
 * for a while still stops being followed once `list` leaves the page. A dropped
 * connection is attached again with Last-Event-ID, so no event comes twice.
 * `onEvent(e)` takes each event and answers true after the log's last one. When a
 * stream ends before that, `ended(last, got)` (the last seq seen, how many events
 * that stream gave) answers null when the log is over, else how many milliseconds
 * to wait before attaching again. `what` names the log in an error. */
export async function followLog(api, url, list, controller, { what, onEvent, ended }) {
  const watch = setInterval(() => {
    if (!list.isConnected) controller.abort();
  }, 2000);
  try {
    let last = null;
    for (;;) {
      if (!list.isConnected) return;
      const headers = api.headers({ Accept: "text/event-stream" });
      if (last !== null) headers["Last-Event-ID"] = String(last);
      let response;
      try {
        response = await fetch(url, { headers, signal: controller.signal, cache: "no-store" });
      } catch (err) {
        if (controller.signal.aborted) return;
        throw err;
      }
      if (!response.ok) {
        const body = await response.json().catch(() => null); // the API's error body, if it is one
        throw new Error(body?.error ? `${body.error}: ${body.detail}` : `${what}: HTTP ${response.status}`);
      }
      let got = 0;
      try {
        for await (const ev of sseEvents(response)) {
          if (!list.isConnected) {
            controller.abort();
            return;
          }
          const e = ev.data;
          if (last !== null && e.seq <= last) continue;
          last = e.seq;
          got += 1;
          if (await onEvent(e)) return;
        }
      } catch (err) {
        if (controller.signal.aborted) return; // left, or another log opened
      }
      const wait = await ended(last, got);
      if (wait === null) return;
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  } finally {
    clearInterval(watch);
  }
}
