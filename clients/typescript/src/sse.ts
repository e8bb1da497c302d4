/** A Server-Sent Events decoder (the WHATWG rules the service's streams need). */

export interface RawEvent {
  name: string;
  id: string;
  data: string;
}

/**
 * Feed it lines (without their end of line); it returns an event at each blank line
 * that ends one. Comments (`: keep-alive`) are skipped. An event cut before its blank
 * line is never returned: a dropped connection loses no half-event.
 */
export class SSEDecoder {
  private name = "";
  private id = "";
  private data: string[] = [];

  feed(line: string): RawEvent | undefined {
    if (line === "") {
      if (this.data.length === 0) {
        this.name = ""; // WHATWG: an event without data is not dispatched
        return undefined;
      }
      const event = { name: this.name || "message", id: this.id, data: this.data.join("\n") };
      this.name = "";
      this.data = [];
      return event;
    }
    if (line.startsWith(":")) return undefined;
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "event") this.name = value;
    else if (field === "data") this.data.push(value);
    else if (field === "id" && !value.includes("\0")) this.id = value;
    return undefined;
  }
}

/**
 * The lines of a response body, as they come (`\n`, `\r\n` or `\r` ends one). Uses
 * the body's reader rather than `for await` on the stream, which not every browser has.
 */
export async function* lines(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let start = 0;
      for (let i = 0; i < buffer.length; i++) {
        const ch = buffer[i];
        if (ch !== "\n" && ch !== "\r") continue;
        if (ch === "\r" && i + 1 === buffer.length) break; // a "\r\n" may be split
        yield buffer.slice(start, i);
        if (ch === "\r" && buffer[i + 1] === "\n") i++;
        start = i + 1;
      }
      buffer = buffer.slice(start);
    }
    buffer += decoder.decode();
    if (buffer) yield buffer;
  } finally {
    reader.releaseLock();
  }
}

/** Every event of an SSE body, to its end (a command's output, a visitor's reply). */
export async function readEvents(
  body: ReadableStream<Uint8Array>,
): Promise<Array<{ type: string; id: number; data: unknown }>> {
  const decoder = new SSEDecoder();
  const out = [];
  for await (const line of lines(body)) {
    const raw = decoder.feed(line);
    if (raw) out.push({ type: raw.name, id: toId(raw.id), data: JSON.parse(raw.data) as unknown });
  }
  return out;
}

export function toId(raw: string): number {
  return /^[0-9]{1,15}$/.test(raw) ? Number(raw) : 0;
}
