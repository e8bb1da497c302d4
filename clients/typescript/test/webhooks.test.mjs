// Webhook verification (Standard Webhooks): a real delivery from the service to a
// loopback receiver verifies; a tampered body, a wrong signature and an old
// timestamp do not.

import assert from "node:assert/strict";
import http from "node:http";
import { test } from "node:test";

import { WebhookVerificationError, signWebhook, verifyWebhook } from "../dist/webhooks.js";
import { client, newThread } from "./helpers.mjs";

/**
 * A receiver on loopback; `next(type, about)` resolves with the first delivery of
 * `type` whose data holds every field of `about` (the other test files run at the
 * same time in the same organization: their messages are delivered here too).
 */
async function receiver() {
  const waiting = [];
  const got = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (c) => chunks.push(c));
    req.on("end", () => {
      const delivery = { headers: req.headers, body: Buffer.concat(chunks) };
      got.push(delivery);
      for (const w of waiting.splice(0)) w();
      res.writeHead(204).end();
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const matches = (d, type, about) => {
    const event = JSON.parse(d.body);
    return event.type === type && Object.entries(about).every(([k, v]) => event.data?.[k] === v);
  };
  const next = async (type, about = {}) => {
    for (;;) {
      const found = got.find((d) => matches(d, type, about));
      if (found) return found;
      await new Promise((resolve) => waiting.push(resolve));
    }
  };
  return { url: `http://127.0.0.1:${server.address().port}/hooks`, next, close: () => server.close() };
}

test("a real delivery verifies; tampered or old ones do not", async () => {
  const c = client();
  const hooks = await receiver();
  try {
    const made = await c.eventWebhooks.create({ url: hooks.url, events: ["message.created"] });
    assert.match(made.secret, /^whsec_/);
    const thread = await newThread(c, "Hooked");
    await c.sendMessage(thread, "hello hooks").final();
    const { headers, body } = await hooks.next("message.created", { thread_id: thread, role: "user" });

    const event = verifyWebhook(made.secret, headers, body);
    assert.equal(event.type, "message.created");
    assert.equal(event.data.content, "hello hooks");
    assert.equal(event.data.thread_id, thread);
    // the same as text, and with a web Headers
    assert.equal(verifyWebhook(made.secret, new Headers(headers), body.toString()).type, "message.created");

    const refused = (fn, reason) =>
      assert.throws(fn, (exc) => exc instanceof WebhookVerificationError && reason.test(exc.reason));
    const tampered = Buffer.from(body.toString().replace("hello hooks", "hello hacks"));
    refused(() => verifyWebhook(made.secret, headers, tampered), /no signature matches/);
    refused(() => verifyWebhook(made.secret, { ...headers, "webhook-id": "msg_other" }, body), /no signature/);
    const other = "whsec_" + Buffer.alloc(32, 7).toString("base64");
    refused(() => verifyWebhook(other, headers, body), /no signature matches/);
    // an old timestamp: refused even when signed right for it
    const old = Math.floor(Date.now() / 1000) - 301;
    const oldHeaders = {
      ...headers,
      "webhook-timestamp": String(old),
      "webhook-signature": signWebhook(made.secret, headers["webhook-id"], old, body),
    };
    refused(() => verifyWebhook(made.secret, oldHeaders, body), /tolerance/);
    assert.equal(verifyWebhook(made.secret, oldHeaders, body, { toleranceS: 600 }).type, "message.created");
    refused(() => verifyWebhook(made.secret, { ...headers, "webhook-signature": "v1,AAAA" }, body), /no signature/);
    refused(() => verifyWebhook(made.secret, { ...headers, "webhook-signature": "v2,x" }, body), /no signature/);
    refused(() => verifyWebhook(made.secret, { ...headers, "webhook-timestamp": "soon" }, body), /whole number/);
    refused(() => verifyWebhook("whsec_???", headers, body), /whsec_/);
    await c.eventWebhooks.delete(made.endpoint.id);
  } finally {
    hooks.close();
  }
});

test("a rotation's two signatures: one matching is enough", () => {
  const secret = "whsec_" + Buffer.alloc(24, 1).toString("base64");
  const other = "whsec_" + Buffer.alloc(24, 2).toString("base64");
  const body = JSON.stringify({ type: "run.failed", timestamp: "2026-11-01T12:00:00Z", data: { é: 1 } });
  const now = Math.floor(Date.now() / 1000);
  const headers = {
    "Webhook-Id": "msg_1",
    "Webhook-Timestamp": String(now),
    "Webhook-Signature": `${signWebhook(other, "msg_1", now, body)} ${signWebhook(secret, "msg_1", now, body)}`,
  };
  assert.deepEqual(verifyWebhook(secret, headers, body).data, { é: 1 });
});

test("a webhook tool's signed call verifies; tampered, stale or replayed ones do not", async () => {
  const { MemoryNonceCache, signCall, verifySignedCall } = await import("../dist/webhooks.js");
  const c = client();
  const calls = [];
  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on("data", (chunk) => chunks.push(chunk));
    req.on("end", () => {
      calls.push({ headers: req.headers, body: Buffer.concat(chunks) });
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok": true}');
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  try {
    const name = `hook_${Math.random().toString(16).slice(2, 10)}`;
    await c.tools.create({ name, url: `http://127.0.0.1:${server.address().port}/hook`, parameters: { type: "object" } });
    const result = await c.tools.execute({ name, arguments: { city: "Lyon" } });
    assert.equal(result.ok, true);
    const secret = (await c.settings.get()).signing_secret;
    const [{ headers, body }] = calls;
    assert.match(body.toString(), /Lyon/);

    const nonces = new MemoryNonceCache();
    verifySignedCall(secret, headers, body, { nonceCache: nonces });
    const refused = (fn, reason) =>
      assert.throws(fn, (exc) => exc instanceof WebhookVerificationError && reason.test(exc.reason));
    refused(() => verifySignedCall(secret, headers, body, { nonceCache: nonces }), /replayed/);
    refused(() => verifySignedCall(secret, headers, Buffer.from(body.toString().replace("Lyon", "Nice"))), /no signature/);
    refused(() => verifySignedCall("another secret", headers, body), /no signature/);
    const old = String(Math.floor(Date.now() / 1000) - 301);
    const nonce = headers["x-service-nonce"];
    const stale = { ...headers, "x-service-timestamp": old, "x-service-signature": signCall(secret, old, nonce, body) };
    refused(() => verifySignedCall(secret, stale, body), /tolerance/);
    // a rotation of yours: either secret
    verifySignedCall(["an old one", secret], headers, body);
  } finally {
    server.close();
  }
});
