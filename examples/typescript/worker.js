import { Loom } from '@loom-coord/sdk';

const loom = new Loom({
  baseUrl: process.env.LOOM_URL ?? 'http://127.0.0.1:8080',
  token: process.env.LOOM_TOKEN,
  namespace: () => process.env.LOOM_NAMESPACE,
  agent: 'greeter',
});

// An inbox the worker owns, and a task posted to it.
await loom.inbox.register({ inbox: 'greetings', owner_agent: 'greeter' });
const posted = await loom.task.create({ inbox: 'greetings', kind: 'greet', title: 'Greet Ada', brief: { name: 'Ada' } });

// Pull, work, finish: the worker claims each task, heartbeats at a third of its lease while the
// handler runs, completes it with what the handler returns (or fails it with what it throws),
// and stops when the signal aborts.
const stop = new AbortController();
await loom.worker({ inbox: 'greetings', signal: stop.signal }, async (claimed) => {
  stop.abort(); // one task is enough here
  return { greeting: `Hello, ${claimed.brief?.name}!` };
});

const done = await loom.task.get({ task_id: posted.task.task_id });
console.log(done.task.status, done.task.outcome);
