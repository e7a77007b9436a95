import { Loom } from '@loom-coord/sdk';

// LOOM_URL, LOOM_TOKEN, LOOM_ORG and LOOM_NAMESPACE from the environment; 'greeter' labels the calls.
const loom = Loom.fromEnv('greeter');

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
