// Conversations kept in the browser's storage (spec 000 "Stored data and erasure"): 30 days from
// last use, one person's at a time. Deleted at sign-out, when another person signs in in this
// browser, or by Delete. Pure over a Storage, so the expiry and the owner rule are tested as is.

import type { Conversation } from './types';

export const STORAGE_KEY = 'loom.assistant.conversations';
export const KEEP_MS = 30 * 24 * 60 * 60 * 1000;
/** A card is kept as a snapshot of at most this many characters of JSON. */
export const CARD_LIMIT = 32 * 1024;

interface Stored {
  owner: string;
  conversations: Conversation[];
}

/** The person whose conversations these are: their org and subject. */
export function ownerOf(session: { org: string; subject: string }): string {
  return `${session.org}/${session.subject}`;
}

/**
 * `owner`'s conversations used in the last 30 days, newest first. Another person's (or an
 * unreadable copy) are deleted; a turn cut off while it ran reads as stopped, or as a check that
 * did not finish when its text had come.
 */
export function loadConversations(storage: Storage, owner: string, now: number): Conversation[] {
  let stored: Stored | undefined;
  try {
    stored = JSON.parse(storage.getItem(STORAGE_KEY) ?? 'null') as Stored | undefined;
  } catch {
    stored = undefined;
  }
  if (!stored || stored.owner !== owner || !Array.isArray(stored.conversations)) {
    storage.removeItem(STORAGE_KEY);
    return [];
  }
  const kept = stored.conversations.filter((c) => now - c.updatedAt < KEEP_MS).map(settle);
  if (kept.length !== stored.conversations.length) saveConversations(storage, owner, kept);
  return kept.sort((a, b) => b.updatedAt - a.updatedAt);
}

function settle(c: Conversation): Conversation {
  return {
    ...c,
    turns: c.turns.map((t) => {
      const a = t.answer;
      if (!a || (a.state !== 'answering' && a.state !== 'checking')) return t;
      // An answer whose text came but whose check was cut off: "Check didn't finish".
      if (a.text) return { ...t, answer: { ...a, state: 'lost' }, previous: undefined };
      return t.previous ? { ...t, answer: t.previous, previous: undefined } : { ...t, answer: { ...a, state: 'stopped' } };
    }),
  };
}

export function saveConversations(storage: Storage, owner: string, conversations: Conversation[]): void {
  try {
    storage.setItem(STORAGE_KEY, JSON.stringify({ owner, conversations } satisfies Stored));
  } catch {
    // A full storage keeps the page working: the conversation lives on in this tab.
  }
}

export function clearConversations(storage: Storage): void {
  storage.removeItem(STORAGE_KEY);
}

/** A card's rows as kept: whole when its JSON fits the limit, else its first rows that do. */
export function snapshotRows<T>(rows: readonly T[]): { rows: T[]; cut: boolean } {
  const out = [...rows];
  let cut = false;
  while (out.length && JSON.stringify(out).length > CARD_LIMIT) {
    out.pop();
    cut = true;
  }
  return { rows: out, cut };
}
