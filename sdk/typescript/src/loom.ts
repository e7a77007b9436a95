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

  /** Pull, work and finish an inbox's tasks one at a time until `opts.signal` aborts. */
  worker(opts: WorkerOptions, handler: TaskHandler): Promise<void> {
    return runWorker(this, opts, handler);
  }

  /** The caller's task events as they come (task.updates long poll, or NATS when given one). */
  subscribe(opts: SubscribeOptions = {}): AsyncGenerator<TaskEvent> {
    return subscribe(this, opts);
  }
}
