// A conversation as the panel keeps it (in memory and in the browser's storage).

import type { CheckedCitation } from './citations';

export interface Step {
  op: string;
  text: string;
  ok: boolean;
}

/** A refusal or failure, as plain data (kept in storage). */
export interface AnswerError {
  code: string;
  message: string;
  status: number;
  retryable: boolean;
  detail: Record<string, unknown>;
}

export interface Answer {
  text: string;
  /**
   * answering: no text yet or text coming; checking: the text is complete, sources are checked;
   * done: loom.citations came; stopped: Stop (or an answer that never began); failed: refused
   * or failed before any text; lost: the connection ended after the text, before the check.
   */
  state: 'answering' | 'checking' | 'done' | 'stopped' | 'failed' | 'lost';
  steps: Step[];
  citations?: CheckedCitation[];
  support?: string;
  unknownNames?: string[];
  error?: AnswerError;
}

/** A starter's card: the read the dashboard made with the person's own session. */
export interface Card {
  starter: string;
  args: Record<string, unknown>;
  rows: unknown[];
  cut: boolean;
  /** When the read answered (0 while it runs). */
  readAt: number;
  /** Why the read failed (its refusal's message and code). */
  error?: string;
}

export interface Turn {
  id: string;
  /** The words as the person typed them. */
  question: string;
  /** The page's context line the question went with (the chip, unless removed). */
  context?: string;
  namespace: string;
  askedAt: number;
  /** Whether the model was asked (a starter with "Also ask the model" off is a card alone). */
  model: boolean;
  card?: Card;
  answer?: Answer;
  /** The answer kept, on screen and in storage, while the turn is asked again, until new text begins. */
  previous?: Answer;
  /** Why the last Ask again ended with no new text (its answer was put back). */
  attemptError?: AnswerError;
}

export interface Conversation {
  id: string;
  title: string;
  updatedAt: number;
  turns: Turn[];
}
