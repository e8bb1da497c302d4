// Type-checked, never run (`tsc --noEmit -p tsconfig.check.json`, in the test suite):
// what a TypeScript user writes compiles, and what is wrong does not (each
// `@ts-expect-error` fails the check when its line stops being an error). It uses
// the package as a user does, by its name, without Node.js's types: the same code
// compiles for a browser.

import {
  AgentsvcClient,
  NotFound,
  runTools,
  type EventOf,
  type ReplyEvent,
  type Tool,
} from "agentsvc-client";

export async function typed(client: AgentsvcClient, threadId: string): Promise<string> {
  const agent = await client.agents.create({ name: "Typed", stablePreamble: "Be brief." });
  const id: string = agent.id;
  // @ts-expect-error an agent needs a name
  await client.agents.create({});
  // @ts-expect-error a query parameter of another type
  await client.threads.messages.list(threadId, { limit: "ten" });
  const page = await client.threads.messages.list(threadId, { limit: 10 });
  const roles: string[] = page.messages.map((m) => m.role);

  let text = "";
  for await (const event of client.sendMessage(threadId, "Hello", { modelOverride: "local" })) {
    switch (event.type) {
      case "meta":
        text += event.data.runId;
        break;
      case "token":
        text += event.data.delta;
        // @ts-expect-error a token has no content
        text += event.data.content;
        break;
      case "requires_action":
        text += event.data.toolCalls.map((c) => c.name).join();
        break;
      case "done":
        text += event.data.content + String(event.data.usage?.totalTokens);
        break;
      case "error":
        text += event.data.code;
        break;
    }
  }
  // @ts-expect-error not an event the reply has
  const never: ReplyEvent["type"] = "thinking";
  const done: EventOf<"done"> = await client.sendMessage(threadId, "again").final();
  const clock: Tool = { name: "get_time", description: "Now", handler: ({ zone }) => String(zone) };
  for await (const event of runTools(client, threadId, "call get_time {}", [clock])) text += event.type;
  try {
    await client.agents.get(id);
  } catch (exc) {
    if (exc instanceof NotFound) text += `${exc.status} ${exc.error} ${exc.requestId}`;
  }
  return text + roles.join() + never + done.data.content;
}
