// What the tests share: the service they run against (its address and an API key,
// from the environment: tests/client/test_client_typescript.py starts it), and a
// loopback TCP proxy that cuts connections.

import net from "node:net";

import { AgentsvcClient } from "../dist/index.js";

export const URL_ = process.env.AGENTSVC_URL;
export const KEY = process.env.AGENTSVC_KEY;
if (!URL_ || !KEY) {
  throw new Error("set AGENTSVC_URL and AGENTSVC_KEY (tests/client/test_client_typescript.py does)");
}

export function client(options = {}) {
  return new AgentsvcClient({ baseUrl: URL_, apiKey: KEY, ...options });
}

/** A fresh thread of a fresh agent. */
export async function newThread(c, name = "TS") {
  const agent = await c.agents.create({ name });
  return (await c.threads.create({ agentId: agent.id })).id;
}

/**
 * A loopback TCP proxy in front of the service. Each entry of `cuts` cuts the next
 * connection whose request starts with `prefix` (and contains `containing`) once
 * `afterBytes` of its answer went through: the dropped connection of a flaky network.
 * `requests` keeps each connection's first chunk, to see what the client sent.
 */
export async function cuttingProxy(targetPort) {
  const proxy = { cuts: [], requests: [], port: 0, sockets: new Set() };
  const server = net.createServer((down) => {
    proxy.sockets.add(down);
    const up = net.connect(targetPort, "127.0.0.1");
    proxy.sockets.add(up);
    let armed = null;
    let sent = 0;
    const kill = () => {
      down.resetAndDestroy();
      up.destroy();
    };
    down.on("data", (chunk) => {
      proxy.requests.push(chunk.toString("latin1"));
      const text = chunk.toString("latin1");
      for (const cut of proxy.cuts) {
        if (!cut.done && !armed && text.startsWith(cut.prefix) && text.includes(cut.containing ?? "")) {
          cut.done = true;
          armed = cut;
        }
      }
      up.write(chunk);
    });
    up.on("data", (chunk) => {
      if (armed) {
        const room = armed.afterBytes - sent;
        if (room <= chunk.length) {
          if (room > 0) down.write(chunk.subarray(0, room));
          kill(); // the connection drops, mid-answer
          return;
        }
        sent += chunk.length;
      }
      down.write(chunk);
    });
    for (const s of [up, down]) {
      s.on("error", kill);
      s.on("close", () => {
        proxy.sockets.delete(s);
        kill();
      });
    }
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  proxy.port = server.address().port;
  proxy.url = `http://127.0.0.1:${proxy.port}`;
  proxy.close = () =>
    new Promise((resolve) => {
      for (const s of proxy.sockets) s.destroy();
      server.close(resolve);
    });
  return proxy;
}

export async function collect(iterable) {
  const out = [];
  for await (const item of iterable) out.push(item);
  return out;
}
