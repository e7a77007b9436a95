// The one chat store of this page: the panel and the header search share it.

import { useSyncExternalStore } from 'react';
import { client } from '../../lib/session';
import { type ChatState, ChatStore } from './chatStore';

declare global {
  interface Window {
    /** The boot snippet's word on the assistant (the gateway's web.py): configured or not. */
    __LOOM_ASSISTANT?: { configured?: boolean };
  }
}

/** Whether this Loom has an assistant configured (LOOM_ASSISTANT_LIBRECHAT_URL set). */
export function assistantConfigured(): boolean {
  return typeof window !== 'undefined' && window.__LOOM_ASSISTANT?.configured === true;
}

export const chat = new ChatStore(
  () => window.localStorage,
  (req) => client.assistant.stream(req),
);

export function useChat(): ChatState {
  return useSyncExternalStore(chat.subscribe, chat.snapshot);
}
