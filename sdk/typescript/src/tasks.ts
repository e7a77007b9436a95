// Task helpers an agent needs (spec 003 "Pull, work, finish", "Follow the outcome"):
//
// - `worker`: pull (claim) the next task of an inbox, heartbeat at a third of its lease while
//   the handler works, then complete it with the handler's outcome or fail it with its error;
//   stops cleanly when the AbortSignal fires.
// - `subscribe`: the caller's task events, by `task.updates` long poll from a cursor, or from
//   NATS when the caller passes a connection (structurally typed: no NATS dependency here).

import type { CallOptions, LoomClient } from './client.js';
import { backoffMs, sleep } from './client.js';
import { isAbort, LoomError, networkError } from './errors.js';
import type { TaskPullResult, TaskUpdatesResult } from './generated/ops.js';

export type PulledTask = TaskPullResult['tasks'][number];
export type TaskEvent = TaskUpdatesResult['events'][number];

/** What a handler is given beside its task. */
export interface WorkContext {
  /** Aborts when the worker stops or the claim is lost (a heartbeat answered TASK_FENCE_STALE or TASK_TERMINAL). */
  signal: AbortSignal;
  /** Records a progress note on the task (fenced; no state change). */
  progress(note: string): Promise<void>;
}

/** Works one task; what it returns is the task's outcome. A throw fails the task with its message. */
export type TaskHandler = (task: PulledTask, ctx: WorkContext) => Promise<Record<string, unknown> | void>;

export interface WorkerOptions {
  inbox: string;
  kinds?: string[];
  namespace?: string;
  /** The lease each claim asks for; the inbox's default_lease_seconds when unset. */
  leaseSeconds?: number;
  /** How long one pull waits for a task (at most 30 s). */
  waitSeconds?: number;
  /** Stops the worker: a waiting pull is closed and a task in hand is left to its handler. */
  signal?: AbortSignal;
  /** Told of each error the worker goes on after (a retryable pull refusal, a lost claim). */
  onError?: (error: LoomError, task?: PulledTask) => void;
}

/** Claim loss: the task is no longer this worker's. */
const LOST = new Set(['TASK_FENCE_STALE', 'TASK_TERMINAL']);
const PULL_RETRY = { retries: Number.POSITIVE_INFINITY, baseDelayMs: 250, maxDelayMs: 10_000 };

/** The lease a claim got, in seconds: the one asked for, else what the task's lease_expires_time says. */
function leaseOf(task: PulledTask, asked: number | undefined): number {
  if (asked !== undefined) return asked;
  const left = (Date.parse(task.lease_expires_time) - Date.now()) / 1000;
  return Number.isFinite(left) && left > 0 ? left : 30;
}

function reasonOf(e: unknown): string {
  const text = e instanceof Error ? e.message || e.name : String(e);
  return (text || 'the handler failed').slice(0, 500);
}

/** Runs until `opts.signal` aborts; rejects on a refusal that retrying cannot fix (auth, role, bad input). */
export async function runWorker(client: LoomClient, opts: WorkerOptions, handler: TaskHandler): Promise<void> {
  const { signal } = opts;
  const ns: CallOptions = opts.namespace !== undefined ? { namespace: opts.namespace } : {};
  let failures = 0;
  while (!signal?.aborted) {
    let tasks: PulledTask[];
    try {
      const args: Record<string, unknown> = { inbox: opts.inbox, wait_seconds: opts.waitSeconds ?? 30, max_tasks: 1 };
      if (opts.kinds) args.kinds = opts.kinds;
      if (opts.leaseSeconds !== undefined) args.lease_seconds = opts.leaseSeconds;
      const call: CallOptions = { ...ns };
      if (signal) call.signal = signal;
      tasks = (await client.call('task.pull', args as { inbox: string }, call)).tasks;
      failures = 0;
    } catch (e) {
      if (isAbort(e, signal)) return;
      if (!(e instanceof LoomError) || !e.retryable) throw e;
      opts.onError?.(e);
      try {
        await sleep(backoffMs(e, failures++, PULL_RETRY), signal);
      } catch {
        return; // stopped while waiting
      }
      continue;
    }
    for (const task of tasks) await workOne(client, opts, ns, task, handler);
  }
}

async function workOne(client: LoomClient, opts: WorkerOptions, ns: CallOptions, task: PulledTask, handler: TaskHandler): Promise<void> {
  const { task_id, fence } = task;
  const lease = leaseOf(task, opts.leaseSeconds);
  const work = new AbortController();
  const stop = (): void => work.abort(opts.signal?.reason);
  if (opts.signal?.aborted) stop();
  opts.signal?.addEventListener('abort', stop, { once: true });
  let lost = false;
  const beat = async (): Promise<void> => {
    try {
      const args: { task_id: string; fence: number; lease_seconds?: number } = { task_id, fence };
      if (opts.leaseSeconds !== undefined) args.lease_seconds = opts.leaseSeconds;
      await client.call('task.heartbeat', args, ns);
    } catch (e) {
      const err = e instanceof LoomError ? e : networkError(e);
      if (LOST.has(err.code)) {
        lost = true;
        work.abort(err);
      }
      opts.onError?.(err, task);
    }
  };
  const timer = setInterval(() => void beat(), Math.max(100, (lease * 1000) / 3));
  const ctx: WorkContext = {
    signal: work.signal,
    progress: async (note) => {
      await client.call('task.progress', { task_id, fence, note }, ns);
    },
  };
  try {
    let outcome: Record<string, unknown> | void;
    try {
      outcome = await handler(task, ctx);
    } catch (e) {
      clearInterval(timer);
      // Stopped or lost: the task is not this worker's to fail; its lease returns it to the inbox.
      if (lost || opts.signal?.aborted) return;
      await finish(opts, task, () => client.call('task.fail', { task_id, fence, reason: reasonOf(e) }, ns));
      return;
    }
    clearInterval(timer);
    if (lost) return;
    const args: { task_id: string; fence: number; outcome?: Record<string, unknown> } = { task_id, fence };
    if (outcome) args.outcome = outcome;
    await finish(opts, task, () => client.call('task.complete', args, ns));
  } finally {
    clearInterval(timer);
    opts.signal?.removeEventListener('abort', stop);
  }
}

/** Complete or fail, retried while retryable (never cut by the worker's signal: the work is done). */
async function finish(opts: WorkerOptions, task: PulledTask, write: () => Promise<unknown>): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await write();
      return;
    } catch (e) {
      const err = e instanceof LoomError ? e : networkError(e);
      if (!err.retryable || attempt >= 5) {
        opts.onError?.(err, task);
        return;
      }
      await sleep(backoffMs(err, attempt, PULL_RETRY));
    }
  }
}

/** A NATS message as nats.js gives one (only what is read here). */
export interface NatsMsgLike {
  subject: string;
  data: Uint8Array;
}

/** A NATS subscription: iterable messages, and a way to end it. */
export interface NatsSubscriptionLike extends AsyncIterable<NatsMsgLike> {
  unsubscribe(): void;
}

/** A NATS connection (nats.js's NatsConnection fits): only `subscribe` is used. */
export interface NatsConnectionLike {
  subscribe(subject: string): NatsSubscriptionLike;
}

export interface SubscribeOptions {
  namespace?: string;
  /** Events after this cursor (task.updates' next_seq); 0, the default, is from the start. */
  sinceSeq?: number;
  /** How long one long poll waits (at most 30 s). */
  waitSeconds?: number;
  signal?: AbortSignal;
  /** Read the events from NATS instead: `loom.tasks.<org>.<namespace>.>`, every event of the
   * namespace's inboxes that the connection may read (its credentials decide). */
  nats?: { connection: NatsConnectionLike; org: string; namespace: string; inbox?: string };
}

/** The caller's task events as they come, until the signal aborts. By long poll: the events of
 * the tasks the caller posted, in order, each once; the cursor of the last one read is
 * `event.seq` (pass it back as `sinceSeq` to go on after a restart). */
export async function* subscribe(client: LoomClient, opts: SubscribeOptions = {}): AsyncGenerator<TaskEvent> {
  if (opts.nats) {
    yield* fromNats(opts.nats, opts.signal);
    return;
  }
  let cursor = opts.sinceSeq ?? 0;
  let failures = 0;
  const { signal } = opts;
  while (!signal?.aborted) {
    let page: TaskUpdatesResult;
    try {
      const call: CallOptions = {};
      if (signal) call.signal = signal;
      if (opts.namespace !== undefined) call.namespace = opts.namespace;
      page = await client.call('task.updates', { since_seq: cursor, wait_seconds: opts.waitSeconds ?? 30 }, call);
      failures = 0;
    } catch (e) {
      if (isAbort(e, signal)) return;
      if (!(e instanceof LoomError) || !e.retryable) throw e;
      try {
        await sleep(backoffMs(e, failures++, PULL_RETRY), signal);
      } catch {
        return;
      }
      continue;
    }
    for (const event of page.events) yield event;
    cursor = Math.max(cursor, page.next_seq);
  }
}

async function* fromNats(nats: NonNullable<SubscribeOptions['nats']>, signal?: AbortSignal): AsyncGenerator<TaskEvent> {
  const subject = `loom.tasks.${nats.org}.${nats.namespace}.${nats.inbox ? `${nats.inbox}.*` : '>'}`;
  const sub = nats.connection.subscribe(subject);
  const end = (): void => sub.unsubscribe();
  if (signal?.aborted) end();
  signal?.addEventListener('abort', end, { once: true });
  const decoder = new TextDecoder();
  try {
    for await (const msg of sub) {
      let event: TaskEvent;
      try {
        event = JSON.parse(decoder.decode(msg.data)) as TaskEvent;
      } catch {
        continue; // not an event
      }
      yield event;
    }
  } finally {
    signal?.removeEventListener('abort', end);
    sub.unsubscribe();
  }
}
