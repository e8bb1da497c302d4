// A minimal agentsvc chat client in JavaScript (Node 18+ or a browser).
// EventSource cannot POST, so read the streamed response body with fetch.
//
//   node docs/examples/chat.mjs http://127.0.0.1:8000 ask_... "Hello!"

const [base, key, ...messages] = process.argv.slice(2);
const headers = { Authorization: `Bearer ${key}`, "Content-Type": "application/json" };

async function api(path, body) {
  const r = await fetch(base + path, { method: body ? "POST" : "GET", headers, body: body && JSON.stringify(body) });
  if (!r.ok) throw new Error(`${r.status} ${await r.text()}`);
  return r;
}

// Yields {event, data} for each Server-Sent Event of a fetch response.
async function* sseEvents(response) {
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) !== -1) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      let event = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue; // keep-alive comment
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
      if (data.length) yield { event, data: JSON.parse(data.join("\n")) };
    }
  }
}

const agent = await (await api("/api/agents", { name: "Guide", stablePreamble: "Be brief." })).json();
const thread = await (await api("/api/threads", { agentId: agent.id })).json();
for (const content of messages.length ? messages : ["Hello!"]) {
  console.log(`> ${content}`);
  const response = await api(`/api/threads/${thread.id}/messages`, { content });
  for await (const { event, data } of sseEvents(response)) {
    if (event === "token") process.stdout.write(data.delta);
    else if (event === "done") console.log(`\n[done: message ${data.messageId}]`);
    else if (event === "error") console.log(`\n[error ${data.code}: ${data.detail}]`);
  }
}
const history = await (await api(`/api/threads/${thread.id}/messages`)).json();
console.log(`history: ${history.total} messages`);
