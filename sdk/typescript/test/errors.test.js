// Typed errors: each refusal as a LoomError with the server's code, status, retryable and
// detail; a request with no answer; and the opt-in retry, which retries retryable refusals
// only and waits what Retry-After says.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { backoffMs, Loom, LoomError } from '../dist/index.js';
import { admin, scoped, unique, URL_ } from './helpers.js';

/** A fetch that counts the requests it sends and hands each answer to `onAnswer`. */
function counting(onAnswer = () => {}) {
  const seen = [];
  const f = async (url, init) => {
    const res = await fetch(url, init);
    seen.push(res.status);
    onAnswer(res);
    return res;
  };
  return { f, seen };
}

test('a bad token is AUTH_INVALID, 401, not retryable', async () => {
  const loom = new Loom({ baseUrl: URL_, token: 'not-a-token' });
  await assert.rejects(loom.auth.whoami(), (e) => e instanceof LoomError && e.status === 401 && e.code === 'AUTH_INVALID' && !e.retryable);
});

test('bad input is VALIDATION_FAILED naming the field; a wrong role is refused and writes nothing', async () => {
  const { loom, ns } = await scoped('admin');
  const inbox = unique('in');
  await loom.inbox.register({ inbox });
  await assert.rejects(loom.task.create({ inbox, kind: 'Not A Kind!' }), (e) => e.status === 422 && e.code === 'VALIDATION_FAILED' && e.detail.field === 'kind');
  const minted = await admin().token.mint({ roles: { [ns]: 'viewer' }, ttl_seconds: 600 });
  const viewer = new Loom({ baseUrl: URL_, token: minted.token, namespace: () => ns });
  await assert.rejects(viewer.task.create({ inbox, kind: 'job' }), (e) => e.status === 403 && e.code === 'AUTH_INSUFFICIENT');
  assert.equal((await loom.task.list({ inbox })).tasks.length, 0);
});

test('an unknown task is RESOURCE_NOT_FOUND; a stale fence is TASK_FENCE_STALE', async () => {
  const { loom } = await scoped('admin');
  await assert.rejects(loom.task.get({ task_id: '0123456789abcdef' }), (e) => e.status === 404 && e.code === 'RESOURCE_NOT_FOUND');
  const inbox = unique('in');
  await loom.inbox.register({ inbox });
  const { task } = await loom.task.create({ inbox, kind: 'job' });
  const { task: held } = await loom.task.claim({ task_id: task.task_id });
  await assert.rejects(
    loom.task.complete({ task_id: task.task_id, fence: held.fence + 1 }),
    (e) => e.status === 409 && e.code === 'TASK_FENCE_STALE' && !e.retryable,
  );
});

test('no answer at all is BACKEND_UNAVAILABLE with status 0, retryable', async () => {
  const loom = new Loom({ baseUrl: 'http://127.0.0.1:9', token: 'x' });
  await assert.rejects(loom.auth.whoami(), (e) => e instanceof LoomError && e.status === 0 && e.code === 'BACKEND_UNAVAILABLE' && e.retryable);
});

test('retry is opt-in and never retries a refusal that is not retryable', async () => {
  const { token, ns } = await scoped('admin');
  const { f, seen } = counting();
  const loom = new Loom({ baseUrl: URL_, token, namespace: () => ns, fetch: f, retry: { retries: 3, baseDelayMs: 10 } });
  await assert.rejects(loom.task.get({ task_id: '0123456789abcdef' }), (e) => e.code === 'RESOURCE_NOT_FOUND');
  assert.deepEqual(seen, [404]);
});

test('backoff waits what Retry-After says, else doubles from the base', () => {
  const retry = { retries: 3, baseDelayMs: 100, maxDelayMs: 30_000 };
  assert.equal(backoffMs(new LoomError(429, 'RATE_LIMITED', 'busy', true, {}, 2), 0, retry), 2000);
  assert.equal(backoffMs(new LoomError(429, 'RATE_LIMITED', 'busy', true, { retry_after_s: 1 }), 5, retry), 1000);
  for (const attempt of [0, 1, 2]) {
    const ms = backoffMs(new LoomError(503, 'OVERLOADED', 'busy', true), attempt, retry);
    assert.ok(ms >= (100 * 2 ** attempt) / 2 && ms <= 100 * 2 ** attempt, String(ms));
  }
});

/** Two answers running in `ns` (its concurrent-answers limit), each past its first words. */
async function fillSlots(token, ns, controller) {
  const slow = new Loom({ baseUrl: URL_, token, namespace: () => ns });
  const streams = [0, 1].map(() => slow.assistant.stream({ messages: [{ role: 'user', content: '[slow] go' }], signal: controller.signal }));
  const iterators = streams.map((s) => s[Symbol.asyncIterator]());
  for (const it of iterators) await it.next();
  return { streams, drain: Promise.all(iterators.map(async (it) => { while (!(await it.next()).done); })) };
}

test('a busy namespace is RATE_LIMITED with Retry-After; retry honours it and gives up after its retries', async () => {
  const { token, ns } = await scoped('viewer');
  const controller = new AbortController();
  const { drain } = await fillSlots(token, ns, controller);
  try {
    const { f, seen } = counting();
    const loom = new Loom({ baseUrl: URL_, token, namespace: () => ns, fetch: f });
    const question = [{ role: 'user', content: 'hello' }];
    await assert.rejects(loom.assistant.ask({ messages: question }), (e) => e.status === 429 && e.code === 'RATE_LIMITED' && e.retryable && e.retryAfter === 1 && e.detail.reason === 'concurrent_answers');
    assert.deepEqual(seen, [429]);
    seen.length = 0;
    await assert.rejects(loom.assistant.ask({ messages: question, retry: { retries: 2 } }), (e) => e.code === 'RATE_LIMITED');
    assert.deepEqual(seen, [429, 429, 429]);
  } finally {
    controller.abort();
    await drain;
  }
});

test('a retried answer goes through once a slot frees', async () => {
  const { token, ns } = await scoped('viewer');
  const controller = new AbortController();
  const { drain } = await fillSlots(token, ns, controller);
  // The first refusal frees the slots: the retry after Retry-After finds one.
  const { f, seen } = counting((res) => res.status === 429 && controller.abort());
  const loom = new Loom({ baseUrl: URL_, token, namespace: () => ns, fetch: f });
  const answer = await loom.assistant.ask({ messages: [{ role: 'user', content: 'hello' }], retry: { retries: 20 } });
  await drain;
  assert.equal(answer.text, 'Hello! Ask me about this namespace.');
  assert.equal(seen[0], 429);
  assert.equal(seen[seen.length - 1], 200);
});
