import { Loom } from '@loom-coord/sdk';

// LOOM_URL, LOOM_TOKEN, LOOM_ORG and LOOM_NAMESPACE from the environment; 'first-call' labels the calls.
const loom = Loom.fromEnv('first-call');

const me = await loom.auth.whoami();
console.log(`${me.subject} of ${me.org}: ${me.role}`);

const { namespaces } = await loom.namespace.list();
console.log('namespaces:', namespaces.map((n) => n.name).join(', '));
