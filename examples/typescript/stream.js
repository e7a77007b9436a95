// example-needs: an assistant (LOOM_ASSISTANT_LIBRECHAT_URL set on the server)
import { Loom } from '@loom-coord/sdk';

const baseUrl = process.env.LOOM_URL ?? 'http://127.0.0.1:8080';
const namespace = process.env.LOOM_NAMESPACE;

// The assistant answers on one namespace: ask with a token that holds that namespace alone.
const admin = new Loom({ baseUrl, token: process.env.LOOM_TOKEN });
const { token } = await admin.token.mint({ roles: { [namespace]: 'viewer' }, ttl_seconds: 900 });
const loom = new Loom({ baseUrl, token });

const stop = new AbortController(); // stop.abort() closes the request
const stream = loom.assistant.stream({
  messages: [{ role: 'user', content: 'Which tasks need a person?' }],
  namespace,
  signal: stop.signal,
});
for await (const text of stream) process.stdout.write(text);

const { support, citations, steps } = await stream.final();
console.log(`\nsupport: ${support}`);
for (const c of citations ?? []) console.log(c.verified ? '✓' : '✗', c.kind, c.ref, c.reason ?? '');
for (const s of steps ?? []) console.log('read:', s.text);
