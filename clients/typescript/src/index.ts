/**
 * agentsvc-client: the TypeScript client of the agentsvc Agent Conversation Service.
 * ESM, typed, with nothing but `fetch` at run time (Node.js 18+, browsers). Webhook
 * verification, which needs Node's crypto, is `agentsvc-client/webhooks`.
 */

export { AgentsvcClient, type ClientOptions, type SendOptions } from "./client.js";
export type { RequestOptions, StreamEvent } from "./core.js";
export * from "./errors.js";
export type * from "./models.js";
export { OPERATIONS } from "./resources.js";
export { REPLY_EVENT_TYPES, ReplyStream, type EventOf, type ReplyEvent, type ReplyEventType } from "./stream.js";
export { ThreadEventStream, type ThreadEvent } from "./thread-events.js";
export {
  ToolLoopExceeded,
  approvalBody,
  definition,
  runTools,
  sendApprovals,
  type Approval,
  type RunToolsOptions,
  type Tool,
  type ToolCall,
} from "./tools.js";
