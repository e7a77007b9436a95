// Loom.fromEnv: a client from the process's environment (LOOM_URL, LOOM_TOKEN, LOOM_ORG,
// LOOM_NAMESPACE), as the Python SDK's Agent.from_env; a missing variable is named.

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Loom, LoomError } from '../dist/index.js';
import { NAMESPACE, scoped } from './helpers.js';

/** Run `body` with the environment's `changes` applied (undefined unsets), then put it back. */
async function withEnv(changes, body) {
  const saved = Object.fromEntries(Object.keys(changes).map((k) => [k, process.env[k]]));
  const apply = (values) => {
    for (const [k, v] of Object.entries(values)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  };
  apply(changes);
  try {
    return await body();
  } finally {
    apply(saved);
  }
}

test('fromEnv calls with the environment: its token, org, namespace and the agent label given', async () => {
  const loom = Loom.fromEnv('env-agent');
  const me = await loom.auth.whoami();
  assert.equal(me.subject, 'user:admin');
  assert.equal(me.org, process.env.LOOM_ORG);
  assert.equal(me.namespace, NAMESPACE);
  assert.equal(me.agent, 'env-agent');
});

test('an override wins over the environment', async () => {
  const { ns, token } = await scoped('writer');
  const loom = Loom.fromEnv('env-agent', { token, namespace: () => ns });
  const me = await loom.auth.whoami();
  assert.equal(me.namespace, ns);
  assert.equal(me.role, 'writer');
});

test('a token of another org than LOOM_ORG is refused', async () => {
  await withEnv({ LOOM_ORG: 'not-this-org' }, async () => {
    await assert.rejects(Loom.fromEnv('env-agent').auth.whoami(), (e) => e instanceof LoomError && e.status === 403 && e.code === 'AUTH_WRONG_ORG');
  });
});

test('a missing LOOM_ORG or LOOM_NAMESPACE is an error naming it; LOOM_URL has a default', async () => {
  await withEnv({ LOOM_ORG: undefined }, async () => {
    assert.throws(() => Loom.fromEnv('env-agent'), /^Error: LOOM_ORG is not set/);
    assert.ok(Loom.fromEnv('env-agent', { org: 'given' }) instanceof Loom);
  });
  await withEnv({ LOOM_NAMESPACE: '' }, async () => {
    assert.throws(() => Loom.fromEnv('env-agent'), /^Error: LOOM_NAMESPACE is not set/);
  });
  await withEnv({ LOOM_URL: undefined }, async () => {
    const seen = [];
    const loom = Loom.fromEnv('env-agent', {
      fetch: async (url) => {
        seen.push(url);
        throw new TypeError('no network here');
      },
    });
    await assert.rejects(loom.auth.whoami(), (e) => e instanceof LoomError && e.code === 'BACKEND_UNAVAILABLE');
    assert.deepEqual(seen, ['http://127.0.0.1:8080/v1/auth.whoami']);
  });
});
