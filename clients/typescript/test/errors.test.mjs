// Errors carry the service's error body and the answer's request id; the generated
// operations take and answer what the document says.

import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { test } from "node:test";

import {
  AgentsvcClient,
  AgentsvcError,
  APIConnectionError,
  NotFound,
  OPERATIONS,
  Unauthorized,
  ValidationError,
} from "../dist/index.js";
import { URL_, client, newThread } from "./helpers.mjs";

test("a 404 carries the error body and the request id", async () => {
  const c = client();
  await assert.rejects(c.agents.get(randomUUID()), (exc) => {
    assert.ok(exc instanceof NotFound);
    assert.ok(exc instanceof AgentsvcError);
    assert.equal(exc.status, 404);
    assert.equal(exc.error, "NOT_FOUND");
    assert.equal(exc.body.error, "NOT_FOUND");
    assert.match(exc.requestId, /\S{8,}/);
    return true;
  });
});

test("a 422 names the field; a stream's refusal is thrown before any event", async () => {
  const c = client();
  await assert.rejects(c.agents.create({ name: "" }), (exc) => {
    assert.ok(exc instanceof ValidationError);
    assert.equal(exc.status, 422);
    assert.equal(exc.error, "VALIDATION_ERROR");
    assert.match(exc.detail, /name/);
    assert.ok(exc.requestId);
    return true;
  });
  await assert.rejects(c.sendMessage(randomUUID(), "hi").text(), (exc) => {
    assert.ok(exc instanceof NotFound);
    assert.ok(exc.requestId);
    return true;
  });
});

test("a wrong key is 401; no service is APIConnectionError", async () => {
  const wrong = new AgentsvcClient({ baseUrl: URL_, apiKey: "ask_wrong_0123456789abcdefghijklmnopqrs" });
  await assert.rejects(wrong.agents.list(), (exc) => exc instanceof Unauthorized && exc.status === 401);
  const nobody = new AgentsvcClient({ baseUrl: "http://127.0.0.1:1", apiKey: "x" });
  await assert.rejects(nobody.agents.list(), (exc) => exc instanceof APIConnectionError);
});

test("generated operations: bodies, queries, answers, idempotency", async () => {
  const c = client();
  const key = randomUUID();
  const first = await c.agents.create({ name: "Twice" }, { idempotencyKey: key });
  const again = await c.agents.create({ name: "Twice" }, { idempotencyKey: key });
  assert.equal(again.id, first.id); // the retry got the first answer
  const thread = await newThread(c, "Listed");
  await c.sendMessage(thread, "one").final();
  const page = await c.threads.messages.list(thread, { limit: 1 });
  assert.equal(page.messages.length, 1);
  assert.equal(page.total, 2);
  assert.equal(OPERATIONS.listMessages, "threads.messages.list");
  assert.equal(OPERATIONS.attachAgentMcpServer, "agents.mcpServers.attach");
  assert.equal(typeof c.agents.mcpServers.attach, "function");
  const health = await c.service.health();
  assert.equal(health.ok, true);
  // a multipart form: a Blob is the file
  const doc = await c.knowledge.upload({ file: new Blob(["Atlantis lies west."]), filename: "atlantis.txt", title: "Atlantis" });
  assert.equal((await c.knowledge.get(doc.id)).title, "Atlantis");
});
