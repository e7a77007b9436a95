export { LoomClient, backoffMs, sleep } from './client.js';
export type { CallOptions, ClientOptions, RequestSpec, RetryOptions } from './client.js';
export { LoomError, errorFromPayload, errorOf, networkError, statusOfCode } from './errors.js';
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
export { runWorker, subscribe } from './tasks.js';
export type {
  NatsConnectionLike,
  NatsMsgLike,
  NatsSubscriptionLike,
  PulledTask,
  SubscribeOptions,
  TaskEvent,
  TaskHandler,
  WorkContext,
  WorkerOptions,
} from './tasks.js';
export * from './generated/ops.js';
