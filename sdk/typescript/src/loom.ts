// `Loom`: the client an agent or a page holds. Every op of the catalog as a typed method by
// group (`loom.task.claim({...})`, generated: src/generated/ops.ts), the assistant
// (`loom.assistant.stream`, `.ask`), and the task helpers (`loom.worker`, `loom.subscribe`).

import { AssistantClient } from './assistant.js';
import { LoomClient, type CallOptions, type ClientOptions } from './client.js';
import { opGroups, type OpGroups } from './generated/ops.js';
import { runWorker, subscribe, type SubscribeOptions, type TaskEvent, type TaskHandler, type WorkerOptions } from './tasks.js';

// The generated groups are set on each instance by the constructor (Object.assign); this
// declaration gives them their types. `assistant` is the hand-written AssistantClient, whose
// ask() also takes op assistant.ask's own arguments.
// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export interface Loom extends Omit<OpGroups<CallOptions>, 'assistant'> {}

// eslint-disable-next-line @typescript-eslint/no-unsafe-declaration-merging
export class Loom extends LoomClient {
  /** Loom's assistant: a streamed or a whole answer. */
  readonly assistant: AssistantClient;

  constructor(opts: ClientOptions = {}) {
    super(opts);
    const { assistant: _op, ...groups } = opGroups<CallOptions>((op, args, call) => this.call(op, args, call));
    Object.assign(this, groups);
    this.assistant = new AssistantClient(this);
  }

  /**
   * A client set up from a Node process's environment, as Loom's docs and examples run (the
   * Python SDK's `Agent.from_env`): `LOOM_ORG` and `LOOM_NAMESPACE` (both required),
   * `LOOM_TOKEN` (the token `loom admin bootstrap` prints) and `LOOM_URL` (else
   * `http://127.0.0.1:8080`). `agent` is the X-Loom-Agent label; an option given in
   * `overrides` wins over the environment. Throws an Error naming the missing variable; where
   * there is no `process.env` (a browser) every variable is missing, so pass what you need.
   */
  static fromEnv(agent: string, overrides: ClientOptions = {}): Loom {
    const env = processEnv();
    const org = overrides.org ?? required(env, 'LOOM_ORG', 'org');
    const namespace = overrides.namespace ?? constant(required(env, 'LOOM_NAMESPACE', 'namespace'));
    return new Loom({
      baseUrl: env.LOOM_URL || 'http://127.0.0.1:8080',
      ...(env.LOOM_TOKEN ? { token: env.LOOM_TOKEN } : {}),
      ...overrides,
      org,
      namespace,
      agent,
    });
  }

  /** Pull, work and finish an inbox's tasks one at a time until `opts.signal` aborts. */
  worker(opts: WorkerOptions, handler: TaskHandler): Promise<void> {
    return runWorker(this, opts, handler);
  }

  /** The caller's task events as they come (task.updates long poll, or NATS when given one). */
  subscribe(opts: SubscribeOptions = {}): AsyncGenerator<TaskEvent> {
    return subscribe(this, opts);
  }
}

type Env = Record<string, string | undefined>;

/** `process.env` in Node (read through globalThis: the SDK also runs where `process` is not defined). */
function processEnv(): Env {
  const proc = (globalThis as { process?: { env?: Env } }).process;
  return proc?.env ?? {};
}

function required(env: Env, variable: string, what: string): string {
  const value = env[variable];
  if (!value) throw new Error(`${variable} is not set: Loom.fromEnv needs the ${what} to call in`);
  return value;
}

function constant(value: string): () => string {
  return () => value;
}
