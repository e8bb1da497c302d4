// Client tools: a `requires_action` answered by a handler the caller registers, the
// results sent back as `toolResults` (the local model calls an offered tool when the
// message says `call <tool> {json arguments}`).

import assert from "node:assert/strict";
import { test } from "node:test";

import { runTools, sendApprovals } from "../dist/index.js";
import { client, collect, newThread } from "./helpers.mjs";

const PARAMS = { type: "object", properties: { zone: { type: "string" } } };

test("a client tool is answered by its handler", async () => {
  const c = client();
  const thread = await newThread(c, "Clock");
  const calls = [];
  const clock = {
    name: "get_time",
    description: "The current time in a zone",
    parameters: PARAMS,
    handler: async (args, call) => {
      calls.push({ args, id: call.id });
      return "12:34 in Lyon";
    },
  };
  const events = await collect(runTools(c, thread, 'call get_time {"zone": "CET"}', [clock]));
  const asked = events.filter((e) => e.type === "requires_action");
  assert.equal(asked.length, 1);
  assert.deepEqual(
    asked[0].data.toolCalls.map((t) => [t.name, t.arguments]),
    [["get_time", { zone: "CET" }]],
  );
  assert.deepEqual(calls, [{ args: { zone: "CET" }, id: asked[0].data.toolCalls[0].id }]);
  const dones = events.filter((e) => e.type === "done");
  assert.equal(dones.length, 2); // the step that asked, then the one that answered
  assert.equal(dones[1].data.content, "The tool get_time returned: 12:34 in Lyon");
  assert.equal(events.at(-1), dones[1]);
  const history = (await c.threads.messages.list(thread)).messages;
  assert.equal(history.at(-1).content, dones[1].data.content);
});

test("a handler's error and a non-string result reach the model", async () => {
  const c = client();
  const thread = await newThread(c, "Broken clock");
  const broken = {
    name: "get_time",
    description: "Now",
    parameters: PARAMS,
    handler: () => {
      throw new Error("the clock is broken");
    },
  };
  let events = await collect(runTools(c, thread, "call get_time {}", [broken]));
  assert.equal(events.at(-1).data.content, "The tool get_time returned: error: the clock is broken");
  const json = { ...broken, handler: () => ({ time: "08:00" }) };
  events = await collect(runTools(c, thread, "call get_time {}", [json]));
  assert.equal(events.at(-1).data.content, 'The tool get_time returned: {"time":"08:00"}');
});

/** A webhook tool on a loopback receiver that needs a person's approval; its calls. */
async function refundTool(c) {
  const { createServer } = await import("node:http");
  const calls = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on("end", () => {
      calls.push(req.url);
      res.writeHead(200, { "content-type": "application/json" }).end('{"ok": true}');
    });
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const tool = await c.tools.create({
    name: `refund_${Math.random().toString(16).slice(2, 8)}`,
    url: `http://127.0.0.1:${server.address().port}/refund`,
    parameters: { type: "object" },
    approval: "always",
  });
  const agent = await c.agents.create({ name: "Refunds" });
  await c.agents.delegated.put(agent.id, { toolIds: [tool.id] });
  const thread = (await c.threads.create({ agentId: agent.id })).id;
  return { name: tool.name, thread, calls, close: () => server.close() };
}

test("onApproval answers calls that wait for a person; sendApprovals answers later", async () => {
  const c = client();
  const refund = await refundTool(c);
  try {
    const asked = [];
    const yes = async (call) => {
      asked.push([call.name, call.kind]);
      return true;
    };
    let events = await collect(runTools(c, refund.thread, `call ${refund.name} {}`, [], { onApproval: yes }));
    assert.deepEqual(asked, [[refund.name, "approval"]]);
    assert.equal(refund.calls.length, 1); // approved: called once
    assert.match(events.at(-1).data.content, new RegExp(`^The tool ${refund.name} returned`));

    // without onApproval the loop stops where the turn waits
    events = await collect(runTools(c, refund.thread, `call ${refund.name} {}`, []));
    const waiting = events.find((e) => e.type === "requires_action");
    const [call] = waiting.data.toolCalls;
    assert.equal(call.kind, "approval");
    assert.equal(events.at(-1).type, "done");
    const answered = await collect(
      sendApprovals(c, refund.thread, { [call.id]: { approved: false, reason: "no receipt" } }),
    );
    assert.equal(refund.calls.length, 1); // denied: never called
    assert.match(answered.at(-1).data.content, /the user denied this call/);
    assert.match(answered.at(-1).data.content, /no receipt/);
  } finally {
    refund.close();
  }
});
