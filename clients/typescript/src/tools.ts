/**
 * Client-side tools: your functions, called when the agent asks for them.
 *
 * ```ts
 * const clock: Tool = {
 *   name: "get_time",
 *   description: "The current time in a time zone",
 *   parameters: { type: "object", properties: { zone: { type: "string" } } },
 *   handler: ({ zone }) => new Date().toLocaleTimeString("en-GB", { timeZone: String(zone) }),
 * };
 * for await (const event of runTools(client, thread.id, "What time is it?", [clock])) { ... }
 * ```
 *
 * The agent's call ends its reply with `requires_action`; `runTools` calls each
 * handler with the call's arguments, sends the results with the next message
 * (`toolResults`, content ""), and goes on until a reply ends without asking,
 * yielding every event of every step along the way.
 *
 * Server-side tools that need a person's approval end a reply the same way, their
 * calls marked `kind: "approval"`. Give `runTools` an `onApproval` function (the call
 * -> `true`, `false` or `{ approved, reason }`) to answer them in the loop; without
 * one it stops at such a `requires_action` and you answer later with `sendApprovals`.
 */

import type { AgentsvcClient, SendOptions } from "./client.js";
import type { ClientToolBody, SseToolCallOut, ToolApprovalBody, ToolResultBody } from "./models.js";
import type { ReplyEvent } from "./stream.js";

/** A call the model made: `id`, `name`, `arguments`, and `kind` ("approval" or none). */
export type ToolCall = SseToolCallOut;

export interface Tool {
  name: string;
  description: string;
  /** The arguments' JSON Schema (`{ type: "object" }` when left out). */
  parameters?: Record<string, unknown>;
  /**
   * Runs the call. Its result is sent as is when it is a string, as JSON otherwise;
   * an error it throws is sent to the model as `error: <message>` so that it can react.
   */
  handler: (args: Record<string, unknown>, call: ToolCall) => unknown;
}

/** A person's answer to a call waiting for approval; `reason` is told to the model on a no. */
export type Approval = boolean | { approved: boolean; reason?: string };

export interface RunToolsOptions extends SendOptions {
  /** Answers the calls that wait for a person's approval. */
  onApproval?: (call: ToolCall) => Approval | Promise<Approval>;
  /** Rounds of calls before `ToolLoopExceeded` (10). */
  maxRounds?: number;
}

/** The agent kept calling tools for more rounds than allowed. */
export class ToolLoopExceeded extends Error {
  override name = "ToolLoopExceeded";
}

export function definition(tool: Tool): ClientToolBody {
  return { name: tool.name, description: tool.description, parameters: tool.parameters ?? { type: "object" } };
}

export function approvalBody(toolCallId: string, answer: Approval): ToolApprovalBody {
  const given = typeof answer === "boolean" ? { approved: answer } : answer;
  const body: ToolApprovalBody = { toolCallId, approved: given.approved };
  if (given.reason !== undefined) body.reason = given.reason;
  return body;
}

async function call(tools: readonly Tool[], asked: ToolCall): Promise<ToolResultBody> {
  let output: string;
  try {
    const tool = tools.find((t) => t.name === asked.name);
    if (!tool) throw new Error(`no tool named ${asked.name}`);
    const result: unknown = await tool.handler(asked.arguments, asked);
    output = typeof result === "string" ? result : JSON.stringify(result ?? null);
  } catch (exc) {
    output = `error: ${exc instanceof Error ? exc.message : String(exc)}`;
  }
  return { toolCallId: asked.id, output };
}

/**
 * Send `content` offering `tools`; answer each `requires_action` by calling them (and
 * `onApproval` for the calls waiting for approval); yield every event until a reply
 * ends without asking (its `done` or `error` is the last event), or asks for
 * approvals without `onApproval` (then answer with `sendApprovals`). The other
 * options go to every send (`modelOverride`, ...).
 */
export async function* runTools(
  client: AgentsvcClient,
  threadId: string,
  content: string,
  tools: readonly Tool[],
  options: RunToolsOptions = {},
): AsyncGenerator<ReplyEvent> {
  const { onApproval, maxRounds = 10, idempotencyKey, ...send } = options;
  const definitions = tools.map(definition);
  let answers: Pick<SendOptions, "toolResults" | "toolApprovals"> | undefined;
  for (let round = 0; round < maxRounds; round++) {
    const stream = client.sendMessage(threadId, answers ? "" : content, {
      ...send,
      ...(answers ?? {}),
      ...(round === 0 && idempotencyKey ? { idempotencyKey } : {}),
      tools: definitions,
    });
    let asked: ToolCall[] | undefined;
    for await (const event of stream) {
      if (event.type === "requires_action") asked = event.data.toolCalls;
      yield event;
    }
    if (!asked) return;
    const waiting = asked.filter((c) => c.kind === "approval");
    if (waiting.length && !onApproval) return; // the turn waits for a person: sendApprovals
    const toolResults = [];
    for (const c of asked) if (c.kind !== "approval") toolResults.push(await call(tools, c));
    const toolApprovals = [];
    for (const c of waiting) toolApprovals.push(approvalBody(c.id, await onApproval!(c)));
    answers = {};
    if (toolResults.length) answers.toolResults = toolResults;
    if (toolApprovals.length) answers.toolApprovals = toolApprovals;
  }
  throw new ToolLoopExceeded(`the agent still calls tools after ${maxRounds} rounds`);
}

/**
 * Answer the calls a reply waits for: `answers` by call id (`true`, `false` or
 * `{ approved, reason }`), with `results` for your own tools' calls of the same
 * `requires_action`; the reply's events.
 */
export function sendApprovals(
  client: AgentsvcClient,
  threadId: string,
  answers: Record<string, Approval>,
  options: SendOptions & { results?: ToolResultBody[] } = {},
): AsyncIterable<ReplyEvent> {
  const { results, ...send } = options;
  const toolApprovals = Object.entries(answers).map(([id, answer]) => approvalBody(id, answer));
  return client.sendMessage(threadId, "", {
    ...send,
    ...(toolApprovals.length ? { toolApprovals } : {}),
    ...(results?.length ? { toolResults: results } : {}),
  });
}
