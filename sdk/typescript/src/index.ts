export { LoomClient, backoffMs, sleep } from './client.js';
export type { CallOptions, ClientOptions, RequestSpec, RetryOptions } from './client.js';
export { LoomError, errorFromPayload, errorOf, networkError } from './errors.js';
export { AssistantClient, CHAT_PATH } from './assistant.js';
export type {
  AssistantAnswer,
  AssistantEvent,
  AssistantRequest,
  AssistantStep,
  AssistantStream,
  ChatMessage,
  Citation,
  CitationKind,
  Support,
} from './assistant.js';
export { Loom } from './loom.js';
export * from './generated/ops.js';
