// Client tools: a `requires_action` answered by a handler the caller registers, the
// results sent back as `toolResults` (the local model calls an offered tool when the
// message says `call <tool> {json arguments}`).

import assert from "node:assert/strict";
import { test } from "node:test";

import { runTools } from "../dist/index.js";
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
