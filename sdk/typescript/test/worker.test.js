// The worker loop and the event subscription against the live Loom.

import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { scoped, unique } from './helpers.js';

const HANGING = fileURLToPath(new URL('./fixtures/hanging-worker.js', import.meta.url));

async function inboxWithTasks(loom, titles) {
  const inbox = unique('in');
  await loom.inbox.register({ inbox, owner_agent: 'ts-worker' });
  const ids = [];
  for (const title of titles) ids.push((await loom.task.create({ inbox, kind: 'job', title, brief: { title } })).task.task_id);
  return { inbox, ids };
}

/** Polls `read` until `ok(value)`; the bound is on failure only. */
async function until(read, ok) {
  for (let i = 0; i < 600; i++) {
    const value = await read();
    if (ok(value)) return value;
    await new Promise((r) => setTimeout(r, 100));
  }
  return read();
}

test('the worker completes with the handler outcome, fails with its error, and stops on abort', async () => {
  const { loom } = await scoped('admin', { agent: 'ts-worker' });
  const { inbox, ids } = await inboxWithTasks(loom, ['good', 'bad']);
  const controller = new AbortController();
  const seen = [];
  const running = loom.worker({ inbox, signal: controller.signal, waitSeconds: 2 }, async (task) => {
    seen.push(task.task_id);
    if (task.title === 'bad') throw new Error('could not do it');
    if (seen.length === ids.length) setImmediate(() => controller.abort());
    return { handled: task.title };
  });
  const statuses = async () => Promise.all(ids.map(async (id) => (await loom.task.get({ task_id: id })).task));
  const tasks = await until(statuses, (ts) => ts.every((t) => t.status === 'done' || t.status === 'failed'));
  controller.abort();
  await running; // resolves: the loop stopped cleanly
  const [good, bad] = tasks;
  assert.equal(good.status, 'done');
  assert.deepEqual(good.outcome, { handled: 'good' });
  assert.equal(bad.status, 'failed');
  assert.equal(bad.reason, 'could not do it');
});

test('heartbeats at a third of the lease keep a long task the worker\'s', async () => {
  const { loom } = await scoped('admin', { agent: 'ts-worker' });
  const { inbox, ids } = await inboxWithTasks(loom, ['long']);
  const controller = new AbortController();
  const running = loom.worker({ inbox, signal: controller.signal, leaseSeconds: 2, waitSeconds: 2 }, async () => {
    // Three leases long: without heartbeats the sweep would hand the task back and this fence go stale.
    await new Promise((r) => setTimeout(r, 6000));
    controller.abort();
    return { ok: true };
  });
  await running;
  const task = (await loom.task.get({ task_id: ids[0] })).task;
  assert.equal(task.status, 'done');
  assert.equal(task.attempts, 0); // no lease of it ever expired
});

test('a killed worker\'s task goes back to the inbox and another worker finishes it', async () => {
  const { loom, token } = await scoped('admin', { agent: 'ts-worker' });
  const { inbox, ids } = await inboxWithTasks(loom, ['orphan']);
  const child = spawn(process.execPath, [HANGING], {
    env: { ...process.env, LOOM_TEST_WORKER_TOKEN: token, LOOM_TEST_INBOX: inbox },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const [line] = await once(child.stdout, 'data');
  const [, claimedId, firstFence] = String(line).trim().split(' ');
  assert.equal(claimedId, ids[0]);
  child.kill('SIGKILL');
  await once(child, 'exit');
  const controller = new AbortController();
  let reclaimed;
  await loom.worker({ inbox, signal: controller.signal, waitSeconds: 2 }, async (task) => {
    reclaimed = task;
    controller.abort();
    return { by: 'second worker' };
  });
  assert.equal(reclaimed.task_id, ids[0]);
  assert.equal(reclaimed.attempts, 1); // its first lease expired
  assert.ok(reclaimed.fence > Number(firstFence));
  const task = (await loom.task.get({ task_id: ids[0] })).task;
  assert.equal(task.status, 'done');
  assert.deepEqual(task.outcome, { by: 'second worker' });
});

test('subscribe yields the events of the caller\'s tasks from a cursor, by long poll, until aborted', async () => {
  const { loom } = await scoped('admin', { agent: 'ts-worker' });
  const { ids } = await inboxWithTasks(loom, ['watched']);
  const { task } = await loom.task.claim({ task_id: ids[0] });
  await loom.task.complete({ task_id: ids[0], fence: task.fence });
  const controller = new AbortController();
  const kinds = [];
  let last = 0;
  // The events of every task this subject posted, in order; this test's task's among them.
  for await (const event of loom.subscribe({ signal: controller.signal, waitSeconds: 2 })) {
    assert.ok(event.seq > last);
    last = event.seq;
    if (event.task_id !== ids[0]) continue;
    kinds.push(event.kind);
    if (event.kind === 'done') controller.abort();
  }
  assert.deepEqual(kinds, ['created', 'claimed', 'done']);
  // From the cursor of the last event read, none is read again.
  const again = new AbortController();
  setTimeout(() => again.abort(), 3000);
  for await (const event of loom.subscribe({ sinceSeq: last, signal: again.signal, waitSeconds: 1 })) assert.ok(event.seq > last);
});

test('subscribe reads task events from NATS when given a connection (nats.js, with the Loom token)', async () => {
  const { connect } = await import('nats');
  const { loom, token, ns } = await scoped('admin', { agent: 'ts-worker' });
  const inbox = unique('in');
  await loom.inbox.register({ inbox, owner_agent: 'ts-worker' });
  const nc = await connect({ servers: process.env.LOOM_TEST_NATS_URL, token });
  try {
    const controller = new AbortController();
    const events = loom.subscribe({ nats: { connection: nc, org: process.env.LOOM_ORG, namespace: ns, inbox }, signal: controller.signal });
    const it = events[Symbol.asyncIterator]();
    const first = it.next(); // subscribes
    await nc.flush(); // the server has the subscription before anything is published
    const { task } = await loom.task.create({ inbox, kind: 'job', title: 'over nats' });
    const { value } = await first;
    assert.equal(value.task_id, task.task_id);
    assert.equal(value.kind, 'created');
    controller.abort();
    assert.equal((await it.next()).done, true);
  } finally {
    await nc.close();
  }
});
