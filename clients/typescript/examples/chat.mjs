// A chat in a terminal with the TypeScript client (Node.js 18+): each message's
// reply streams as it is written, and a dropped connection is picked up again.
//
//   node clients/typescript/examples/chat.mjs http://127.0.0.1:8000 ask_... "Hello!" "And then?"

import { AgentsvcClient, ReplyError } from "agentsvc-client";

const [baseUrl, apiKey, ...messages] = process.argv.slice(2);
if (!baseUrl || !apiKey) {
  console.error("usage: node chat.mjs BASE_URL API_KEY [MESSAGE...]");
  process.exit(2);
}
const client = new AgentsvcClient({ baseUrl, apiKey });
const agent = await client.agents.create({ name: "Guide", stablePreamble: "Be brief." });
const thread = await client.threads.create({ agentId: agent.id });
for (const content of messages.length ? messages : ["Hello!"]) {
  console.log(`> ${content}`);
  try {
    for await (const event of client.sendMessage(thread.id, content)) {
      if (event.type === "token") process.stdout.write(event.data.delta);
      else if (event.type === "done") console.log(`\n[done: message ${event.data.messageId}]`);
      else if (event.type === "error") console.log(`\n[error ${event.data.code}: ${event.data.detail ?? ""}]`);
    }
  } catch (exc) {
    if (!(exc instanceof ReplyError)) throw exc;
  }
}
const history = await client.threads.messages.list(thread.id);
console.log(`history: ${history.total} messages`);
