import { Loom } from '@loom-coord/sdk';

const loom = new Loom({
  baseUrl: process.env.LOOM_URL ?? 'http://127.0.0.1:8080',
  token: process.env.LOOM_TOKEN,
  namespace: () => process.env.LOOM_NAMESPACE,
});

const me = await loom.auth.whoami();
console.log(`${me.subject} of ${me.org}: ${me.role}`);

const { namespaces } = await loom.namespace.list();
console.log('namespaces:', namespaces.map((n) => n.name).join(', '));
