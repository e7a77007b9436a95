// What every test file shares: the live Loom the pytest wrapper started
// (tests/sdk/test_typescript_sdk.py), read from the environment, and fresh names per test.

import { randomUUID } from 'node:crypto';
import { Loom } from '../dist/index.js';

function env(name) {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set: run these tests with ./loom test tests/sdk/test_typescript_sdk.py`);
  return value;
}

export const URL_ = env('LOOM_URL');
export const ADMIN_TOKEN = env('LOOM_TOKEN');
export const NAMESPACE = env('LOOM_NAMESPACE');
export const EMULATOR_URL = process.env.LOOM_TEST_EMULATOR_URL ?? '';

export function unique(prefix) {
  return `${prefix}-${randomUUID().slice(0, 10)}`;
}

/** A client with the org's admin token (org-wide). */
export function admin(opts = {}) {
  return new Loom({ baseUrl: URL_, token: ADMIN_TOKEN, namespace: () => NAMESPACE, ...opts });
}

/** A fresh namespace and a client whose token holds `role` on it alone. */
export async function scoped(role = 'admin', opts = {}) {
  const ns = unique('ns');
  await admin().namespace.create({ name: ns });
  const minted = await admin().token.mint({ roles: { [ns]: role }, ttl_seconds: 3600, default_namespace: ns });
  return { ns, token: minted.token, loom: new Loom({ baseUrl: URL_, token: minted.token, ...opts }) };
}
