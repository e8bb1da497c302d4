// "Copy as curl / Python / TypeScript": the message being composed as code that
// sends the same request. The key is never in it: each reads AGENTSVC_API_KEY
// from the environment. The path and body are the page's own.

/** A value as a Python literal (JSON's true/false/null are not Python). */
function pyFlat(value) {
  if (value === null || value === undefined) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (typeof value === "number" || typeof value === "string") return JSON.stringify(value);
  if (Array.isArray(value)) return `[${value.map(pyFlat).join(", ")}]`;
  return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pyFlat(v)}`).join(", ")}}`;
}

/** The same, over several lines when it is long. */
function py(value, indent = "") {
  const flat = pyFlat(value);
  if (flat.length <= 60 || value === null || typeof value !== "object") return flat;
  const inner = `${indent}    `;
  if (Array.isArray(value)) return `[\n${value.map((v) => `${inner}${py(v, inner)},`).join("\n")}\n${indent}]`;
  const entries = Object.entries(value).map(([k, v]) => `${inner}${JSON.stringify(k)}: ${py(v, inner)},`);
  return `{\n${entries.join("\n")}\n${indent}}`;
}

const shellQuote = (s) => `'${s.replace(/'/g, `'\\''`)}'`;
const snake = (name) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);

export function curl(base, threadId, body) {
  return [
    `curl -N ${shellQuote(`${base}/api/threads/${threadId}/messages`)} \\`,
    `  -H "Authorization: Bearer $AGENTSVC_API_KEY" \\`,
    `  -H 'Content-Type: application/json' \\`,
    `  -H 'Accept: text/event-stream' \\`,
    `  -d ${shellQuote(JSON.stringify(body))}`,
  ].join("\n");
}

export function python(base, threadId, body) {
  const { content, tools, ...rest } = body;
  const args = [`        ${JSON.stringify(threadId)},`, `        ${py(content, "        ")},`];
  if (tools) {
    const made = tools.map(
      (t) => `ClientToolBody(name=${py(t.name)}, description=${py(t.description ?? "")}, parameters=${py(t.parameters ?? {}, "        ")})`,
    );
    args.push(`        tools=[${made.join(", ")}],`);
  }
  for (const [k, v] of Object.entries(rest)) args.push(`        ${snake(k)}=${py(v, "        ")},`);
  return [
    "import os",
    "",
    "from agentsvc_client import Client",
    tools ? "from agentsvc_client.models import ClientToolBody" : null,
    "",
    `with Client(${JSON.stringify(base)}, api_key=os.environ["AGENTSVC_API_KEY"]) as client:`,
    "    reply = client.send_message(",
    ...args,
    "    )",
    "    for text in reply.text_stream():",
    '        print(text, end="", flush=True)',
  ]
    .filter((line) => line !== null)
    .join("\n");
}

export function typescript(base, threadId, body) {
  const json = JSON.stringify(body, null, 2);
  return [
    'import { AgentsvcClient } from "agentsvc-client";',
    "",
    `const client = new AgentsvcClient({ baseUrl: ${JSON.stringify(base)}, apiKey: process.env.AGENTSVC_API_KEY });`,
    `const reply = client.threads.messages.send(${JSON.stringify(threadId)}, ${json});`,
    "for await (const text of reply.textStream()) process.stdout.write(text);",
  ].join("\n");
}

export const SNIPPETS = { curl, python, typescript };
