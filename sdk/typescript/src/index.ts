export { LoomClient, LoomError } from './client';
export type { CallOptions, ClientOptions } from './client';
export * from './generated/ops';
