// A script streams a reply; a proxy cuts the connection mid-reply (and before
// `meta`) and the client picks it up: every event exactly once, ids strictly
// increasing, the text equal to the stored message.

import assert from "node:assert/strict";
import { test } from "node:test";

import { ReplyError, StreamInterrupted } from "../dist/index.js";
import { URL_, client, collect, cuttingProxy, newThread } from "./helpers.mjs";

const SLOW = "tell me slowly"; // the local model's long, slow reply (word1 ... word50)
const servicePort = Number(new URL(URL_).port);

/** Ids 1..n without gap or repeat; meta first, done last; the tokens make the text. */
function checkOnce(events) {
  assert.deepEqual(
    events.map((e) => e.id),
    events.map((_, i) => i + 1),
  );
  assert.equal(events[0].type, "meta");
  const done = events.at(-1);
  assert.equal(done.type, "done");
  const text = events.filter((e) => e.type === "token").map((e) => e.data.delta).join("");
  assert.equal(text, done.data.content);
  assert.match(done.data.content, /word50/);
  return done;
}

async function stored(c, threadId) {
  return (await c.threads.messages.list(threadId)).messages;
}

function lastEventIds(requests) {
  return requests
    .filter((r) => r.startsWith("GET /api/threads/") && r.includes("/stream"))
    .map((r) => Number(/last-event-id: (\d+)/i.exec(r)?.[1]));
}

test("a script streams a reply, typed", async () => {
  const c = client();
  const thread = await newThread(c, "Streams");
  const stream = c.sendMessage(thread, "Hello from TypeScript");
  const types = [];
  let text = "";
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === "token") text += event.data.delta;
    if (event.type === "meta") assert.equal(event.data.threadId, thread);
  }
  assert.equal(types[0], "meta");
  assert.equal(types.at(-1), "done");
  assert.ok(stream.runId);
  const history = await stored(c, thread);
  assert.deepEqual(history.map((m) => m.role), ["user", "assistant"]);
  assert.equal(history[1].content, text);
  assert.match(text, /Hello from TypeScript/);
  // text() and final() read a reply to its end
  assert.equal(await c.sendMessage(thread, "again").text(), (await stored(c, thread))[3].content);
  const done = await c.sendMessage(thread, "and again").final();
  assert.equal(done.type, "done");
  assert.equal(done.data.ok, true);
  assert.ok(done.data.messageId);
});

test("a cut mid-reply is picked up where it left, every event once", async () => {
  const c = client();
  const thread = await newThread(c, "Cut");
  const proxy = await cuttingProxy(servicePort);
  try {
    // the send is cut ~20 tokens in, the first re-attach too: two re-attaches
    proxy.cuts = [
      { prefix: "POST /api/threads/", containing: "/messages", afterBytes: 1500 },
      { prefix: "GET /api/threads/", containing: "/stream", afterBytes: 700 },
    ];
    const cut = client({ baseUrl: proxy.url, streamBackoffMs: 20 });
    const stream = cut.sendMessage(thread, SLOW);
    const events = await collect(stream);
    assert.ok(proxy.cuts.every((x) => x.done), "both cuts happened");
    const resumed = lastEventIds(proxy.requests);
    assert.equal(resumed.length, 2);
    assert.ok(1 < resumed[0] && resumed[0] < resumed[1] && resumed[1] < events.length, `${resumed}`);
    const attaches = proxy.requests.filter((r) => r.startsWith("GET /api/threads/"));
    assert.ok(attaches.every((r) => r.includes(`runId=${stream.runId}`)));
    const done = checkOnce(events);
    const history = await stored(c, thread);
    assert.deepEqual(history.map((m) => m.role), ["user", "assistant"]);
    assert.equal(history[1].content, done.data.content);
  } finally {
    await proxy.close();
  }
});

test("a cut before meta sends again with the same Idempotency-Key", async () => {
  const c = client();
  const thread = await newThread(c, "Resend");
  const proxy = await cuttingProxy(servicePort);
  try {
    proxy.cuts = [{ prefix: "POST /api/threads/", containing: "/messages", afterBytes: 0 }];
    const stream = client({ baseUrl: proxy.url, streamBackoffMs: 20 }).sendMessage(thread, SLOW);
    const events = await collect(stream);
    const posts = proxy.requests.filter((r) => r.startsWith("POST /api/threads/"));
    assert.equal(posts.length, 2);
    for (const post of posts) {
      assert.ok(post.toLowerCase().includes(`idempotency-key: ${stream.idempotencyKey}`), post);
    }
    const done = checkOnce(events);
    const history = await stored(c, thread);
    assert.deepEqual(history.map((m) => m.role), ["user", "assistant"]); // stored once
    assert.equal(history[1].content, done.data.content);
  } finally {
    await proxy.close();
  }
});

test("it gives up after the retries, with what re-attaching later needs", async () => {
  const c = client();
  const thread = await newThread(c, "Gives up");
  const proxy = await cuttingProxy(servicePort);
  const seen = [];
  try {
    proxy.cuts = [
      { prefix: "POST /api/threads/", containing: "/messages", afterBytes: 1500 },
      ...[1, 2, 3].map(() => ({ prefix: "GET /api/threads/", containing: "/stream", afterBytes: 0 })),
    ];
    const flaky = client({ baseUrl: proxy.url, streamRetries: 2, streamBackoffMs: 5 });
    await assert.rejects(
      (async () => {
        for await (const event of flaky.sendMessage(thread, SLOW)) seen.push(event);
      })(),
      (exc) => {
        assert.ok(exc instanceof StreamInterrupted);
        assert.equal(exc.attempts, 3);
        assert.equal(exc.runId, seen[0].data.runId);
        assert.equal(exc.lastEventId, seen.at(-1).id);
        return true;
      },
    );
  } finally {
    await proxy.close();
  }
  const rest = await collect(c.threads.attach(thread, { runId: seen[0].data.runId, lastEventId: seen.at(-1).id }));
  assert.equal(rest[0].id, seen.at(-1).id + 1);
  assert.equal(rest.at(-1).type, "done");
  checkOnce([...seen, ...rest]);
});

test("an error event ends the reply; text() throws ReplyError with its code", async () => {
  const c = client();
  const thread = await newThread(c, "Fails");
  // a provider nobody listens for (the service's AGENTSVC_BETA_BASE_URL)
  const events = await collect(c.sendMessage(thread, "hi", { modelOverride: "beta:nobody" }));
  assert.equal(events.at(-1).type, "error");
  assert.equal(events.at(-1).data.code, "PROVIDER_UNAVAILABLE");
  await assert.rejects(c.sendMessage(thread, "hi", { modelOverride: "beta:nobody" }).text(), (exc) => {
    assert.ok(exc instanceof ReplyError);
    assert.equal(exc.error, "PROVIDER_UNAVAILABLE");
    return true;
  });
});

test("the example script streams a reply", async () => {
  const { execFile } = await import("node:child_process");
  const { KEY } = await import("./helpers.mjs");
  const script = new URL("../examples/chat.mjs", import.meta.url);
  const out = await new Promise((resolve, reject) =>
    execFile(process.execPath, [script.pathname, URL_, KEY, "Hi from TS", "Again"], (err, stdout, stderr) =>
      err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout),
    ),
  );
  assert.match(out, /^> Hi from TS\n.*Hi from TS.*\n\[done: message [0-9a-f-]{36}\]\n> Again\n/s);
  assert.match(out, /history: 4 messages\n$/);
});
