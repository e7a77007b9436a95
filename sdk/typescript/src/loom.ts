// `Loom`: the client an agent or a page holds. Every op of the catalog as a typed method by
// group (`loom.task.claim({...})`), the assistant (`loom.assistant.stream`, `.ask`), and the
// task helpers.

import { AssistantClient } from './assistant.js';
import { LoomClient, type ClientOptions } from './client.js';

export class Loom extends LoomClient {
  /** Loom's assistant: a streamed or a whole answer. */
  readonly assistant: AssistantClient;

  constructor(opts: ClientOptions = {}) {
    super(opts);
    this.assistant = new AssistantClient(this);
  }
}
