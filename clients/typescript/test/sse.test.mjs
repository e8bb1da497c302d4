// The SSE decoder on its own: lines split anywhere between chunks (a "\r\n" too),
// comments, multi-line data, and a half event at the end never delivered.

import assert from "node:assert/strict";
import { test } from "node:test";

import { SSEDecoder, lines } from "../dist/sse.js";

function body(...chunks) {
  const encoder = new TextEncoder();
  return new ReadableStream({
    start(controller) {
      for (const chunk of chunks) controller.enqueue(encoder.encode(chunk));
      controller.close();
    },
  });
}

async function decode(...chunks) {
  const decoder = new SSEDecoder();
  const events = [];
  for await (const line of lines(body(...chunks))) {
    const event = decoder.feed(line);
    if (event) events.push(event);
  }
  return events;
}

test("events split across chunks anywhere decode the same", async () => {
  const text = ': keep-alive\r\nevent: meta\r\nid: 1\r\ndata: {"a":1}\r\n\r\nevent: token\nid: 2\ndata: {"delta":"é"}\n\n';
  const whole = await decode(text);
  assert.deepEqual(whole, [
    { name: "meta", id: "1", data: '{"a":1}' },
    { name: "token", id: "2", data: '{"delta":"é"}' },
  ]);
  const bytes = new TextEncoder().encode(text);
  for (let cut = 1; cut < bytes.length; cut++) {
    const decoder = new SSEDecoder();
    const got = [];
    const stream = new ReadableStream({
      start(controller) {
        controller.enqueue(bytes.slice(0, cut)); // a multi-byte character split too
        controller.enqueue(bytes.slice(cut));
        controller.close();
      },
    });
    for await (const line of lines(stream)) {
      const event = decoder.feed(line);
      if (event) got.push(event);
    }
    assert.deepEqual(got, whole, `cut at ${cut}`);
  }
});

test("multi-line data joins; a half event at the end is not delivered", async () => {
  const events = await decode("data: one\ndata: two\n\n", "event: done\nid: 9\ndata: {}");
  assert.deepEqual(events, [{ name: "message", id: "", data: "one\ntwo" }]);
});
