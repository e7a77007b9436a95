// Every op family once, through the generated typed methods, against the live Loom.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { OP_INFO } from '../dist/index.js';
import { admin, NAMESPACE, scoped, unique } from './helpers.js';

test('every op of the catalog is a method of its group', () => {
  const loom = admin();
  for (const op of Object.keys(OP_INFO)) {
    const [group, ...rest] = op.split('.');
    const leaf = rest.pop().replace(/_([a-z])/g, (_, c) => c.toUpperCase());
    let node = loom[group];
    for (const g of rest) node = node[g];
    assert.equal(typeof node?.[leaf], 'function', `${op} has no method`);
  }
});

test('auth, namespace, grants, token, sa, org, budget', async () => {
  const loom = admin();
  const me = await loom.auth.whoami();
  assert.equal(me.subject, 'user:admin');
  const { ns, token, loom: mine } = await scoped('writer');
  assert.ok((await loom.namespace.list()).namespaces.some((n) => n.name === ns));
  assert.equal((await mine.auth.whoami()).role, 'writer');
  const grants = await loom.grants.list({ namespace: ns });
  assert.ok(Array.isArray(grants.grants));
  const name = unique('bot');
  const sa = await loom.sa.create({ namespace: ns, name, role: 'viewer' });
  assert.equal(sa.created, true);
  assert.equal(sa.grant?.role, 'viewer');
  const budget = await loom.budget.get({ namespace: ns });
  assert.equal(budget.namespace, ns);
  const calls = await loom.org.modelCalls();
  assert.equal(typeof calls.enabled, 'boolean');
  const revoked = await loom.token.revoke({ token_id: (await loom.token.mint({ roles: { [ns]: 'viewer' }, ttl_seconds: 60 })).token_id });
  assert.equal(revoked.revoked, 1);
  assert.ok(token);
});

test('inbox and task: register, create, claim, complete, read back', async () => {
  const { ns, loom } = await scoped('admin', { agent: 'ts-bot' });
  const inbox = unique('in');
  await loom.inbox.register({ inbox, owner_agent: 'ts-bot' });
  assert.ok((await loom.inbox.list()).inboxes.some((i) => i.inbox === inbox));
  const { task } = await loom.task.create({ inbox, kind: 'job', title: 'one job' });
  const claimed = await loom.task.claim({ task_id: task.task_id });
  const done = await loom.task.complete({ task_id: task.task_id, fence: claimed.task.fence, outcome: { ok: true } });
  assert.equal(done.task.status, 'done');
  assert.deepEqual((await loom.task.get({ task_id: task.task_id })).task.outcome, { ok: true });
  const counts = await loom.task.counts({ inbox });
  assert.equal(counts.counts.done, 1);
  assert.ok(ns);
});

test('memory, decision, context, policy, help, insights', async () => {
  const { loom } = await scoped('admin');
  const key = `notes/${unique('k')}`;
  await loom.memory.set({ memory_key: key, value: 'The team chose NATS for the bus.' });
  assert.equal((await loom.memory.get({ memory_key: key })).value, 'The team chose NATS for the bus.');
  const rec = await loom.decision.record({ category: 'infra', scenario: 'pick a bus', outcome: 'NATS' });
  assert.equal(rec.created, true);
  const pack = await loom.context.pack({ query: 'bus' });
  assert.equal(typeof pack.block, 'string');
  assert.ok(Array.isArray((await loom.policy.list()).rules));
  const hits = await loom.help.search({ query: 'task.claim' });
  assert.ok(hits.hits.length > 0);
  const catalog = await loom.insights.catalog();
  assert.ok(catalog.tables.length > 0);
});

test('a client on the default namespace header reads that namespace', async () => {
  const loom = admin();
  const ns = (await loom.auth.whoami()).namespace;
  assert.ok(ns === NAMESPACE || ns === '');
});
