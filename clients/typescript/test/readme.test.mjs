// The README's examples run as written against the real service: "Stream a reply",
// then the "Events" loop on the same thread, and the "Errors" example; and the
// client guide's (docs/client-guide.md).

import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { KEY, URL_ } from "./helpers.mjs";

const README = readFileSync(new URL("../README.md", import.meta.url), "utf8");
const GUIDE = readFileSync(new URL("../../../docs/client-guide.md", import.meta.url), "utf8");
const INDEX = new URL("../dist/index.js", import.meta.url).href;

function block(after, text = README) {
  const start = text.indexOf(after);
  assert.notEqual(start, -1, after);
  const match = /```js\n([\s\S]*?)```/.exec(text.slice(start));
  return match[1];
}

function run(code) {
  const dir = mkdtempSync(join(tmpdir(), "agentsvc-readme-"));
  const file = join(dir, "example.mjs");
  const source = code
    .replaceAll('"agentsvc-client"', JSON.stringify(INDEX))
    .replaceAll("http://127.0.0.1:8000", URL_)
    .replaceAll("ask_...", KEY);
  writeFileSync(file, source);
  return new Promise((resolve, reject) =>
    execFile(process.execPath, [file], (err, stdout, stderr) => {
      rmSync(dir, { recursive: true });
      if (err) reject(new Error(`${err.message}\n${stderr}`));
      else resolve(stdout);
    }),
  );
}

test("the README's stream and events examples run", async () => {
  const out = await run(block("## Stream a reply") + block("## Events"));
  assert.match(out, /^You said: "Hello!"\. This is message 1/);
  assert.match(out, /You said: "What time is it in Lyon\?"[^\n]*\n\d+ tokens\n$/);
});

test("the README's errors example runs", async () => {
  const setup = block("## Stream a reply").split("\n").slice(0, 3).join("\n");
  const out = await run(setup + "\n" + block("## Errors"));
  assert.match(out, /^422 VALIDATION_ERROR \S.* \S+\n$/);
});

test("the client guide's TypeScript example runs", async () => {
  const out = await run(block("## With TypeScript", GUIDE));
  assert.match(out, /^You said: "Hello!"\. This is message 1/);
});
