// The panel's conversations: one store for the panel and the header search (which answers in
// place and goes on in the panel), kept in the browser's storage (storage.ts). An answer streams
// on the signed-in session in the namespace it was asked in, through the SDK's assistant client.
//
// Ask again and an edit of the last question answer the last turn again under its own id
// (spec 000 "Asking again"): the turn keeps its old answer until the new text begins, and an
// attempt that fails, is refused, is stopped or ends empty first puts the turn back as it was.

import { type AssistantStream, type ChatMessage, LoomError } from '@loom/sdk';
import { withContext } from './pageContext';
import { clearConversations, loadConversations, saveConversations } from './storage';
import type { Answer, AnswerError, Card, Conversation, Turn } from './types';

export type OpenStream = (req: { messages: ChatMessage[]; namespace: string; signal: AbortSignal }) => AssistantStream;

export interface ChatState {
  conversations: Conversation[];
  activeId: string | undefined;
  open: boolean;
  /** The page's context line waiting on the chip for the next question (Ask about this). */
  chip: string | undefined;
  /** Whether the chip was set by "Ask about this" (else it is the page's own line). */
  chipFromItem: boolean;
}

export interface AskOptions {
  question: string;
  context?: string;
  namespace: string;
  model: boolean;
  card?: Card;
}

function newId(): string {
  return typeof crypto !== 'undefined' && 'randomUUID' in crypto ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
}

function errorData(e: unknown): AnswerError {
  if (e instanceof LoomError) return { code: e.code, message: e.message, status: e.status, retryable: e.retryable, detail: e.detail };
  return { code: 'CONNECTION_LOST', message: e instanceof Error ? e.message : String(e), status: 0, retryable: true, detail: {} };
}

/** The error a stored answer carries, as the LoomError the reasons read. */
export function asLoomError(e: AnswerError): LoomError | Error {
  if (e.code === 'CONNECTION_LOST') return new Error(e.message);
  return new LoomError(e.status, e.code, e.message, e.retryable, e.detail);
}

/** The history an answer is asked with: each earlier turn the model answered, then the question. */
export function historyFor(turns: readonly Turn[], upTo: number): ChatMessage[] {
  const out: ChatMessage[] = [];
  turns.slice(0, upTo).forEach((t) => {
    const text = t.answer?.text;
    if (!t.model || !text) return;
    out.push({ role: 'user', content: withContext(t.question, t.context) }, { role: 'assistant', content: text });
  });
  const current = turns[upTo];
  if (current) out.push({ role: 'user', content: withContext(current.question, current.context) });
  return out;
}

export class ChatStore {
  private state: ChatState = { conversations: [], activeId: undefined, open: false, chip: undefined, chipFromItem: false };
  private listeners = new Set<() => void>();
  private running = new Map<string, AbortController>();
  private owner: string | undefined;

  constructor(
    private readonly storage: () => Storage,
    private readonly openStream: OpenStream,
    private readonly now: () => number = Date.now,
  ) {}

  subscribe = (fn: () => void): (() => void) => {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  };

  snapshot = (): ChatState => this.state;

  private set(next: Partial<ChatState>, persist = false): void {
    this.state = { ...this.state, ...next };
    if (persist && this.owner) saveConversations(this.storage(), this.owner, this.state.conversations);
    for (const fn of this.listeners) fn();
  }

  /** The signed-in person: their kept conversations (another person's are deleted). */
  bind(owner: string): void {
    if (this.owner === owner) return;
    this.stopAll();
    this.owner = owner;
    const conversations = loadConversations(this.storage(), owner, this.now());
    this.set({ conversations, activeId: undefined });
  }

  /** Sign-out: every answer stopped, every conversation deleted from this browser. */
  signOut(): void {
    this.stopAll();
    clearConversations(this.storage());
    this.owner = undefined;
    this.set({ conversations: [], activeId: undefined, open: false, chip: undefined });
  }

  private stopAll(): void {
    for (const c of this.running.values()) c.abort();
    this.running.clear();
  }

  openPanel(chip?: string, fromItem = false): void {
    this.set(chip !== undefined ? { open: true, chip, chipFromItem: fromItem } : { open: true });
  }

  closePanel(): void {
    this.set({ open: false });
  }

  setChip(chip: string | undefined, fromItem = false): void {
    this.set({ chip, chipFromItem: fromItem });
  }

  active(): Conversation | undefined {
    return this.state.conversations.find((c) => c.id === this.state.activeId);
  }

  select(id: string | undefined): void {
    this.set({ activeId: id });
  }

  newConversation(): void {
    this.set({ activeId: undefined });
  }

  deleteConversation(id: string): void {
    const c = this.state.conversations.find((x) => x.id === id);
    c?.turns.forEach((t) => this.running.get(t.id)?.abort());
    this.set(
      {
        conversations: this.state.conversations.filter((x) => x.id !== id),
        activeId: this.state.activeId === id ? undefined : this.state.activeId,
      },
      true,
    );
  }

  isRunning(turnId: string): boolean {
    return this.running.has(turnId);
  }

  /** A new turn in the open conversation (a new conversation when none is open); its id. */
  ask(opts: AskOptions): string {
    const turn: Turn = {
      id: newId(),
      question: opts.question,
      context: opts.context,
      namespace: opts.namespace,
      askedAt: this.now(),
      model: opts.model,
      card: opts.card,
      answer: opts.model ? { text: '', state: 'answering', steps: [] } : undefined,
    };
    let conv = this.active();
    if (!conv) conv = { id: newId(), title: opts.question.slice(0, 80), updatedAt: this.now(), turns: [] };
    const next = { ...conv, updatedAt: this.now(), turns: [...conv.turns, turn] };
    this.set({ conversations: [next, ...this.state.conversations.filter((c) => c.id !== next.id)], activeId: next.id }, true);
    if (opts.model) void this.run(next.id, turn.id);
    return turn.id;
  }

  /** Ask the last turn again; with `question`, an edit of its words. */
  askAgain(conversationId: string, question?: string): void {
    const conv = this.state.conversations.find((c) => c.id === conversationId);
    const last = conv?.turns[conv.turns.length - 1];
    if (!conv || !last || this.running.has(last.id)) return;
    const keep = last.answer && last.answer.state !== 'failed' && last.answer.text ? last.answer : last.previous;
    this.updateTurn(conversationId, last.id, () => ({
      ...last,
      question: question ?? last.question,
      model: true,
      askedAt: this.now(),
      previous: keep,
      attemptError: undefined,
      answer: { text: '', state: 'answering', steps: [] },
    }));
    void this.run(conversationId, last.id);
  }

  stop(turnId: string): void {
    this.running.get(turnId)?.abort();
  }

  /** A card read again (a card restored from storage is read again before any action). */
  refreshCard(conversationId: string, turnId: string, card: Card): void {
    this.updateTurn(conversationId, turnId, (t) => ({ ...t, card }));
  }

  private updateTurn(conversationId: string, turnId: string, fn: (t: Turn) => Turn, persist = true): void {
    const conversations = this.state.conversations.map((c) =>
      c.id !== conversationId ? c : { ...c, updatedAt: this.now(), turns: c.turns.map((t) => (t.id === turnId ? fn(t) : t)) },
    );
    this.set({ conversations }, persist);
  }

  private patchAnswer(conversationId: string, turnId: string, fn: (a: Answer) => Partial<Answer>, persist = false): void {
    this.updateTurn(
      conversationId,
      turnId,
      (t) => {
        const a = t.answer ?? { text: '', state: 'answering', steps: [] };
        const next = { ...a, ...fn(a) };
        // The new text has begun: the old answer is gone.
        return { ...t, answer: next, previous: next.text ? undefined : t.previous };
      },
      persist,
    );
  }

  /** Ended with no new text (refused, failed, stopped, empty): the turn as it was before. */
  private endEmpty(conversationId: string, turnId: string, end: Partial<Answer>): void {
    this.updateTurn(conversationId, turnId, (t) => {
      // The refusal of an Ask again stays beside the answer put back, so its reason shows.
      if (t.previous) return { ...t, answer: t.previous, previous: undefined, attemptError: end.error };
      return { ...t, answer: { ...(t.answer ?? { text: '', steps: [] }), ...end } as Answer };
    });
  }

  private async run(conversationId: string, turnId: string): Promise<void> {
    const conv = this.state.conversations.find((c) => c.id === conversationId);
    const index = conv?.turns.findIndex((t) => t.id === turnId) ?? -1;
    const turn = conv?.turns[index];
    if (!conv || !turn) return;
    const controller = new AbortController();
    this.running.set(turnId, controller);
    let text = '';
    let checked = false;
    try {
      const stream = this.openStream({ messages: historyFor(conv.turns, index), namespace: turn.namespace, signal: controller.signal });
      for await (const ev of stream.events()) {
        switch (ev.type) {
          case 'text':
            text += ev.delta;
            this.patchAnswer(conversationId, turnId, (a) => ({ text: a.text + ev.delta, state: 'answering' }));
            break;
          case 'step':
            this.patchAnswer(conversationId, turnId, () => ({ steps: [...stream.steps] }));
            break;
          case 'text_done':
            this.patchAnswer(conversationId, turnId, () => ({ state: 'checking' }), true);
            break;
          case 'citations':
            checked = true;
            this.patchAnswer(
              conversationId,
              turnId,
              () => ({
                state: 'done',
                citations: [...ev.citations],
                support: ev.support,
                steps: [...stream.steps],
              }),
              true,
            );
            break;
          case 'error':
            if (!text) this.endEmpty(conversationId, turnId, { state: 'failed', error: errorData(ev.error) });
            else this.patchAnswer(conversationId, turnId, () => ({ state: 'lost', error: errorData(ev.error) }), true);
            return;
        }
      }
      if (controller.signal.aborted) {
        // Stop: the SDK ends the stream without an error.
        if (!text) this.endEmpty(conversationId, turnId, { state: 'stopped' });
        else if (!checked) this.patchAnswer(conversationId, turnId, () => ({ state: 'stopped' }), true);
      } else if (!text) {
        this.endEmpty(conversationId, turnId, { state: 'done', citations: [], support: 'none' });
      } else if (!checked) {
        this.patchAnswer(conversationId, turnId, () => ({ state: 'lost' }), true);
      } else {
        // The names the check found nowhere in this Loom (the finished answer carries them).
        const names = (await stream.final().catch(() => undefined))?.unknownNames;
        if (names?.length) this.patchAnswer(conversationId, turnId, () => ({ unknownNames: names }), true);
      }
    } catch (e) {
      if (controller.signal.aborted) {
        if (!text) this.endEmpty(conversationId, turnId, { state: 'stopped' });
        else this.patchAnswer(conversationId, turnId, () => ({ state: checked ? 'done' : 'stopped' }), true);
      } else if (!text) {
        this.endEmpty(conversationId, turnId, { state: 'failed', error: errorData(e) });
      } else {
        // The connection ended after the text: the check did not finish.
        this.patchAnswer(conversationId, turnId, () => ({ state: 'lost' }), true);
      }
    } finally {
      this.running.delete(turnId);
      this.set({});
    }
  }
}
