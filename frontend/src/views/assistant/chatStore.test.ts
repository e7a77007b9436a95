import { describe, expect, it } from 'vitest';
import { type AssistantEvent, type AssistantStream, LoomError } from '@loom/sdk';
import { ChatStore, type OpenStream } from './chatStore';
import { MemoryStorage } from './memoryStorage';

/** The stream seam: each request answers the next scripted list of events (or throws). */
function scripted(...answers: (AssistantEvent[] | Error)[]): OpenStream {
  return () => {
    const next = answers.shift() ?? [];
    return {
      steps: [],
      citations: undefined,
      support: undefined,
      text: '',
      events: () => ({
        async *[Symbol.asyncIterator]() {
          if (next instanceof Error) throw next;
          yield* next;
        },
      }),
      final: async () => ({ text: '', citations: undefined, support: undefined, unknownNames: [], steps: [], stepsCut: false, runId: '', aborted: false }),
      [Symbol.asyncIterator]: async function* () {},
    } as unknown as AssistantStream;
  };
}

const settle = () => new Promise((r) => setTimeout(r, 0));

describe('asking again', () => {
  it('keeps the old answer when the new attempt is refused, and says why', async () => {
    const refused = new LoomError(429, 'RATE_LIMITED', 'busy', true, { reason: 'concurrent_answers' });
    const store = new ChatStore(
      () => new MemoryStorage(),
      scripted(
        [
          { type: 'text', delta: 'First answer.' },
          { type: 'text_done' },
          { type: 'citations', citations: [], support: 'none' },
        ],
        [{ type: 'error', error: refused }],
      ),
    );
    store.bind('acme/user:a');
    store.ask({ question: 'q', namespace: 'ns', model: true });
    await settle();
    const id = store.snapshot().activeId ?? '';
    store.askAgain(id);
    await settle();
    const turn = store.active()?.turns[0];
    expect(turn?.answer?.text).toBe('First answer.');
    expect(turn?.answer?.state).toBe('done');
    expect(turn?.attemptError?.code).toBe('RATE_LIMITED');
  });
  it("reads a connection lost after the text as a check that didn't finish", async () => {
    const store = new ChatStore(() => new MemoryStorage(), scripted([{ type: 'text', delta: 'Half' }], new TypeError('network')));
    store.bind('o');
    store.ask({ question: 'q', namespace: 'ns', model: true });
    await settle();
    expect(store.active()?.turns[0]?.answer?.state).toBe('lost');
  });
  it('deletes the kept conversations at sign-out', async () => {
    const storage = new MemoryStorage();
    const store = new ChatStore(() => storage, scripted([{ type: 'text', delta: 'x' }, { type: 'citations', citations: [], support: 'none' }]));
    store.bind('o');
    store.ask({ question: 'q', namespace: 'ns', model: true });
    await settle();
    expect(storage.length).toBe(1);
    store.signOut();
    expect(storage.length).toBe(0);
    expect(store.snapshot().conversations).toEqual([]);
  });
  it('Delete removes one conversation from storage', async () => {
    const storage = new MemoryStorage();
    const store = new ChatStore(() => storage, scripted([{ type: 'text', delta: 'x' }, { type: 'citations', citations: [], support: 'none' }]));
    store.bind('o');
    store.ask({ question: 'kept?', namespace: 'ns', model: false });
    const id = store.snapshot().activeId ?? '';
    expect(storage.getItem('loom.assistant.conversations')).toContain('kept?');
    store.deleteConversation(id);
    expect(storage.getItem('loom.assistant.conversations')).not.toContain('kept?');
    expect(store.snapshot().conversations).toEqual([]);
  });
});
