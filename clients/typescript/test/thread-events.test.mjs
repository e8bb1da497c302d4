// A multiplayer thread's live events (`client.threads.events`): typed, with their
// ids, and picked up after a connection cut by a loopback proxy with
// `Last-Event-ID`, each event seen once.

import assert from "node:assert/strict";
import { test } from "node:test";

import { URL_, client, cuttingProxy } from "./helpers.mjs";

/** A multiplayer thread whose agent answers only mentions, with two of Bob's messages. */
async function room(c) {
  const agent = await c.agents.create({ name: "Helper" });
  await c.agents.multiplayer.put(agent.id, { respondTo: "mentions", displayName: "Helpy" });
  const thread = (await c.threads.create({ agentId: agent.id, kind: "multiplayer" })).id;
  await c.threads.participants.add(thread, { userId: "bob", displayName: "Bob" });
  const quiet = await c.sendMessage(thread, "hello all", { senderId: "bob" }).final();
  assert.equal(quiet.data.replied, false);
  await c.sendMessage(thread, "@helpy hi", { senderId: "bob" }).final();
  return thread;
}

async function first(stream, n) {
  const got = [];
  for await (const event of stream) {
    got.push(event);
    if (got.length === n) break;
  }
  return got;
}

function check(events) {
  assert.deepEqual(
    events.map((e) => [e.type, e.id]),
    [
      ["message", 1],
      ["message", 2],
      ["reply", 3],
    ],
  );
  assert.deepEqual([events[0].data.sender_name, events[0].data.content], ["Bob", "hello all"]);
  assert.match(events[2].data.content, /^You said: "@helpy hi"/);
}

test("a thread's events from the first, and again after a cut", async () => {
  const c = client();
  const thread = await room(c);
  check(await first(c.threads.events(thread, { after: 0 }), 3));
  const proxy = await cuttingProxy(Number(new URL(URL_).port));
  try {
    // cut once the first event went through: the stream asks again after it
    proxy.cuts = [{ prefix: "GET /api/threads/", containing: "/events", afterBytes: 700 }];
    const cut = client({ baseUrl: proxy.url, streamBackoffMs: 20 });
    check(await first(cut.threads.events(thread, { after: 0 }), 3));
    const asked = proxy.requests.filter((r) => r.startsWith("GET /api/threads/"));
    assert.equal(asked.length, 2);
    assert.match(asked[1], /last-event-id: [12]\r\n/i);
  } finally {
    await proxy.close();
  }
});
