// Loom's assistant: `POST /v1/assistant/chat/completions`, streamed or whole (spec 000
// "Surfaces", "Rendering", "Steps").
//
// A streamed answer is OpenAI-shaped server-sent events: LibreChat's `chat.completion.chunk`s
// carry the text in `choices[].delta.content`; Loom's own events are chunks with `choices: []`
// named by `loom_event`: `loom.step` (the answer's tool calls so far, the whole list each time),
// `loom.text_done` (the text is complete; the citation checks run), `loom.citations` (the
// checked citations, the support, the final steps) and `loom.error`; then `data: [DONE]`.
//
//   const stream = loom.assistant.stream({ messages: [{ role: 'user', content: 'Who is on call?' }] });
//   for await (const delta of stream) process.stdout.write(delta);
//   const { support, citations } = await stream.final();

import type { CallOptions, LoomClient, RetryOptions } from './client.js';
import { errorFromPayload, isAbort, LoomError, networkError } from './errors.js';
import type { AssistantAskArgs, AssistantAskResult } from './generated/ops.js';

export const CHAT_PATH = '/v1/assistant/chat/completions';

/** One turn of the conversation; the last must be the user's question. */
export interface ChatMessage {
  role: 'user' | 'assistant';
  content: string;
}

/** What a citation names: a memory `[memory:key@vN]`, a help section, a task, a document, a
 * code line, or a fenced sql block as it ran. */
export type CitationKind = 'memory' | 'help' | 'task' | 'doc' | 'code' | 'sql';

/** A citation as the server checked it. */
export interface Citation {
  kind: CitationKind;
  /** What it names: the memory key, the help page or document source, the task id, the code path, the sql digest. */
  ref: string;
  verified: boolean;
  /** The citation as the answer wrote it (the statement, for sql). */
  text: string;
  /** Why it is not verified (only when it is not). */
  reason?: string;
  /** Where it opens: a help or document citation's section anchor. */
  anchor?: string;
}

/** How far the answer rests on what Loom holds (spec 000 "Support"). */
export type Support = 'none' | 'supported' | 'unsupported' | 'unchecked';

/** One of the answer's tool calls, in fixed words (display only). */
export interface AssistantStep {
  op: string;
  text: string;
  ok: boolean;
}

export type AssistantEvent =
  | { type: 'text'; delta: string }
  /** loom.step: the latest of the answer's steps (`stream.steps` holds them all). */
  | { type: 'step'; step: AssistantStep }
  /** loom.text_done: the text is complete; the citation checks run (up to ten seconds). */
  | { type: 'text_done' }
  /** loom.citations: the checks ended. */
  | { type: 'citations'; citations: Citation[]; support: Support }
  /** A loom.error event, a refused request or a broken connection; the stream ends after it. */
  | { type: 'error'; error: LoomError };

/** A finished answer. */
export interface AssistantAnswer {
  text: string;
  /** The checked citations; undefined when the checks never came (the stream was cut or stopped). */
  citations: Citation[] | undefined;
  support: Support | undefined;
  /** Backticked op or setting names the build neither serves nor documents. */
  unknownNames: string[];
  /** A streamed answer's steps (the final list); a whole answer has none. */
  steps: AssistantStep[] | undefined;
  /** The run held more ledger rows than one read takes: its steps are the first ones. */
  stepsCut: boolean;
  /** The answer's run id (the chunks' id). */
  runId: string;
  /** The caller's AbortSignal stopped it. */
  aborted: boolean;
}

export interface AssistantRequest {
  messages: ChatMessage[];
  /** The namespace the answer reads; defaults to the client's (X-Loom-Namespace) or the token's. */
  namespace?: string;
  /** Aborting closes the request (LibreChat aborts the run). */
  signal?: AbortSignal;
  /** Retry a refusal the server marks retryable (busy, rate limited) before the answer begins. */
  retry?: boolean | RetryOptions;
}

export interface AssistantStream extends AsyncIterable<string> {
  /** Every event in order, for UIs. A stream is read once: iterate it or its events(), not both. */
  events(): AsyncIterable<AssistantEvent>;
  readonly citations: Citation[] | undefined;
  readonly support: Support | undefined;
  readonly steps: AssistantStep[];
  /** The text so far. */
  readonly text: string;
  /** Resolves with the answer when the stream ends (stopped by the signal included); rejects
   * with its LoomError. Reads the stream itself when nothing else does. */
  final(): Promise<AssistantAnswer>;
}

function citationsOf(raw: unknown): Citation[] {
  if (!Array.isArray(raw)) return [];
  return raw
    .filter((c): c is Record<string, unknown> => !!c && typeof c === 'object')
    .map((c) => {
      const out: Citation = { kind: String(c.kind ?? '') as CitationKind, ref: String(c.ref ?? ''), verified: c.verified === true, text: String(c.text ?? '') };
      if (typeof c.reason === 'string') out.reason = c.reason;
      if (typeof c.anchor === 'string') out.anchor = c.anchor;
      return out;
    });
}

function stepsOf(raw: unknown): AssistantStep[] {
  if (!Array.isArray(raw)) return [];
  return raw
    .filter((s): s is Record<string, unknown> => !!s && typeof s === 'object')
    .map((s) => ({ op: String(s.op ?? ''), text: String(s.text ?? ''), ok: s.ok === true }));
}

function supportOf(raw: unknown): Support {
  // A value this SDK does not know reads as unchecked (spec 000 "Rendering").
  return raw === 'none' || raw === 'supported' || raw === 'unsupported' ? raw : 'unchecked';
}

function namesOf(raw: unknown): string[] {
  return Array.isArray(raw) ? raw.map(String) : [];
}

/** The `data:` payloads of a server-sent event stream, one per event. */
async function* sseData(body: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = '';
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let nl: number;
      while ((nl = buffer.search(/\r\n|\r|\n/)) >= 0) {
        const line = buffer.slice(0, nl);
        buffer = buffer.slice(nl + (buffer[nl] === '\r' && buffer[nl + 1] === '\n' ? 2 : 1));
        if (line === '') {
          if (data.length) yield data.join('\n');
          data = [];
        } else if (line.startsWith('data:')) {
          data.push(line.slice(line[5] === ' ' ? 6 : 5));
        }
      }
    }
    if (data.length) yield data.join('\n');
  } finally {
    reader.releaseLock();
  }
}

class Stream implements AssistantStream {
  readonly #client: LoomClient;
  readonly #req: AssistantRequest;
  readonly #controller = new AbortController();
  #started = false;
  #parts: string[] = [];
  #citations: Citation[] | undefined;
  #support: Support | undefined;
  #steps: AssistantStep[] = [];
  #stepsCut = false;
  #unknownNames: string[] = [];
  #runId = '';
  #aborted = false;
  #settled = false;
  #resolve!: (a: AssistantAnswer) => void;
  #reject!: (e: LoomError) => void;
  readonly #finished: Promise<AssistantAnswer>;

  constructor(client: LoomClient, req: AssistantRequest) {
    this.#client = client;
    this.#req = req;
    this.#finished = new Promise<AssistantAnswer>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    // final() is optional: an error nobody asked for must not surface as an unhandled rejection.
    this.#finished.catch(() => undefined);
  }

  get citations(): Citation[] | undefined {
    return this.#citations;
  }
  get support(): Support | undefined {
    return this.#support;
  }
  get steps(): AssistantStep[] {
    return this.#steps;
  }
  get text(): string {
    return this.#parts.join('');
  }

  #answer(): AssistantAnswer {
    return {
      text: this.text,
      citations: this.#citations,
      support: this.#support,
      unknownNames: this.#unknownNames,
      steps: this.#steps,
      stepsCut: this.#stepsCut,
      runId: this.#runId,
      aborted: this.#aborted,
    };
  }

  #settle(error?: LoomError): void {
    if (this.#settled) return;
    this.#settled = true;
    if (error) this.#reject(error);
    else this.#resolve(this.#answer());
  }

  /** The events one parsed chunk stands for. */
  #apply(chunk: Record<string, unknown>): AssistantEvent[] {
    const kind = chunk.loom_event;
    if (kind === undefined) {
      this.#runId ||= String(chunk.id ?? '');
      const out: AssistantEvent[] = [];
      for (const choice of Array.isArray(chunk.choices) ? chunk.choices : []) {
        const delta = (choice as { delta?: { content?: unknown } } | null)?.delta?.content;
        if (typeof delta === 'string' && delta) {
          this.#parts.push(delta);
          out.push({ type: 'text', delta });
        }
      }
      return out;
    }
    if (kind === 'loom.step') {
      this.#steps = stepsOf(chunk.steps);
      const latest = this.#steps[this.#steps.length - 1];
      return latest ? [{ type: 'step', step: latest }] : [];
    }
    if (kind === 'loom.text_done') return [{ type: 'text_done' }];
    if (kind === 'loom.citations') {
      this.#citations = citationsOf(chunk.citations);
      this.#support = supportOf(chunk.support);
      this.#unknownNames = namesOf(chunk.unknown_names);
      // No steps: the final read failed, and the live list stands.
      if ('steps' in chunk) this.#steps = stepsOf(chunk.steps);
      this.#stepsCut = chunk.steps_cut === true;
      return [{ type: 'citations', citations: this.#citations, support: this.#support }];
    }
    if (kind === 'loom.error') {
      const payload = chunk.error && typeof chunk.error === 'object' ? (chunk.error as Record<string, unknown>) : {};
      throw errorFromPayload(undefined, payload);
    }
    return []; // an event this SDK does not know
  }

  async *#run(): AsyncGenerator<AssistantEvent> {
    if (this.#started) throw new Error('an AssistantStream is read once: iterate it or its events(), not both');
    this.#started = true;
    const { signal: outer } = this.#req;
    const stop = (): void => this.#controller.abort(outer?.reason);
    if (outer?.aborted) stop();
    outer?.addEventListener('abort', stop, { once: true });
    const signal = this.#controller.signal;
    try {
      const call: CallOptions = { signal };
      if (this.#req.namespace !== undefined) call.namespace = this.#req.namespace;
      if (this.#req.retry !== undefined) call.retry = this.#req.retry;
      const res = await this.#client.request(
        CHAT_PATH,
        { method: 'POST', body: { model: 'loom', messages: this.#req.messages, stream: true }, accept: 'text/event-stream' },
        call,
      );
      if (!res.body) throw networkError(new Error('the answer has no body'));
      for await (const data of sseData(res.body)) {
        if (data.trim() === '[DONE]') break;
        let chunk: unknown;
        try {
          chunk = JSON.parse(data);
        } catch {
          continue; // not a chunk a client could parse
        }
        if (!chunk || typeof chunk !== 'object') continue;
        yield* this.#apply(chunk as Record<string, unknown>);
      }
      this.#settle();
    } catch (e) {
      if (isAbort(e, signal)) {
        this.#aborted = true;
        this.#settle();
        return;
      }
      const error = e instanceof LoomError ? e : networkError(e);
      this.#settle(error);
      yield { type: 'error', error };
    } finally {
      outer?.removeEventListener('abort', stop);
      // A reader that stopped early (break, return) stops the request too.
      if (!this.#settled) this.#aborted = true;
      this.#controller.abort();
      this.#settle();
    }
  }

  events(): AsyncIterable<AssistantEvent> {
    return { [Symbol.asyncIterator]: () => this.#run() };
  }

  async *[Symbol.asyncIterator](): AsyncIterator<string> {
    for await (const event of this.#run()) {
      if (event.type === 'text') yield event.delta;
      else if (event.type === 'error') throw event.error;
    }
  }

  async final(): Promise<AssistantAnswer> {
    if (!this.#started) {
      for await (const event of this.#run()) void event;
    }
    return this.#finished;
  }
}

/** Reached as `loom.assistant`; or `new AssistantClient(client)` over any LoomClient (the
 * dashboard's, on the sign-in session). */
export class AssistantClient {
  readonly #client: LoomClient;

  constructor(client: LoomClient) {
    this.#client = client;
  }

  /** A streamed answer: iterate it for the text, read its events() for everything. */
  stream(req: AssistantRequest): AssistantStream {
    return new Stream(this.#client, req);
  }

  /** The whole answer with its checked citations and support (no steps). Given op
   * assistant.ask's own arguments (`{question, history}`), calls that op and answers its result. */
  ask(req: AssistantRequest): Promise<AssistantAnswer>;
  ask(args: AssistantAskArgs, call?: CallOptions): Promise<AssistantAskResult>;
  ask(req: AssistantRequest | AssistantAskArgs, opCall?: CallOptions): Promise<AssistantAnswer | AssistantAskResult> {
    if (!('messages' in req)) return this.#client.call('assistant.ask', req, opCall);
    return this.#chat(req);
  }

  async #chat(req: AssistantRequest): Promise<AssistantAnswer> {
    const call: CallOptions = {};
    if (req.signal) call.signal = req.signal;
    if (req.namespace !== undefined) call.namespace = req.namespace;
    if (req.retry !== undefined) call.retry = req.retry;
    const out = await this.#client.post<Record<string, unknown>>(CHAT_PATH, { model: 'loom', messages: req.messages, stream: false }, call);
    const choice = (Array.isArray(out.choices) ? out.choices[0] : undefined) as { message?: { content?: unknown } } | undefined;
    const content = choice?.message?.content;
    return {
      text: typeof content === 'string' ? content : '',
      citations: citationsOf(out.citations),
      support: supportOf(out.support),
      unknownNames: namesOf(out.unknown_names),
      steps: undefined,
      stepsCut: false,
      runId: String(out.id ?? ''),
      aborted: false,
    };
  }
}
