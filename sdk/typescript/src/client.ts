// Loom's core TypeScript client: one `call` for every op of the catalog, typed by the generated
// OpTypes (src/generated/ops.ts), over the platform's fetch and nothing else.
//
// Two ways to authenticate: a bearer token (agents, scripts), or a browser's sign-in session
// (the HttpOnly `loom_session` cookie, sent same-origin, with the session's CSRF token on every
// POST as `X-Loom-CSRF`).

import { errorOf, isAbort, LoomError, networkError } from './errors.js';
import type { OpName, OpTypes } from './generated/ops.js';

/** Opt-in retry of refusals the server marks retryable (and requests that got no answer). */
export interface RetryOptions {
  /** Retries after the first try (default 3). */
  retries?: number;
  /** The first backoff in ms, doubled each retry, with jitter (default 250). */
  baseDelayMs?: number;
  /** No wait is longer, a Retry-After included (default 30000). */
  maxDelayMs?: number;
}

export interface ClientOptions {
  /** Where Loom answers; '' (the default) is the page's own origin. */
  baseUrl?: string;
  /** A bearer token; leave unset to call with the browser's session cookie. */
  token?: string;
  /** The org the token belongs to, sent as X-Loom-Org (a token of another org is refused). */
  org?: string;
  /** The session's CSRF token, sent as X-Loom-CSRF on every POST made with the cookie. */
  csrfToken?: () => string | undefined;
  /** The X-Loom-Namespace header: the namespace an op runs in when its arguments name none. */
  namespace?: () => string | undefined;
  /** The X-Loom-Agent label calls are made under. */
  agent?: string;
  /** Retry retryable refusals with backoff, honouring Retry-After. Off unless set. */
  retry?: boolean | RetryOptions;
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
  namespace?: string;
  /** This call's retry, over the client's. */
  retry?: boolean | RetryOptions;
}

/** One HTTP request as the client sends it (see LoomClient.request). */
export interface RequestSpec {
  method: 'GET' | 'POST';
  body?: unknown;
  accept?: string;
}

const DEFAULT_RETRY: Required<RetryOptions> = { retries: 3, baseDelayMs: 250, maxDelayMs: 30_000 };

function retryOf(setting: boolean | RetryOptions | undefined): Required<RetryOptions> | undefined {
  if (!setting) return undefined;
  return setting === true ? DEFAULT_RETRY : { ...DEFAULT_RETRY, ...setting };
}

/** How long to wait before retry number `attempt` (0-based) of `err`. */
export function backoffMs(err: LoomError, attempt: number, retry: Required<RetryOptions>): number {
  if (err.retryAfter !== undefined) return Math.min(retry.maxDelayMs, err.retryAfter * 1000);
  const full = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** attempt);
  return full / 2 + Math.random() * (full / 2);
}

/** Resolves after `ms`, or rejects with the signal's reason as soon as it aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export class LoomClient {
  protected readonly opts: ClientOptions;

  constructor(opts: ClientOptions = {}) {
    this.opts = opts;
  }

  /** The headers every request carries: the token or the session's CSRF token, namespace, agent. */
  headers(method: 'GET' | 'POST', namespace?: string): Record<string, string> {
    const headers: Record<string, string> = {};
    const { token, csrfToken, agent, org } = this.opts;
    if (token) {
      headers.Authorization = `Bearer ${token}`;
      // Calls made with a token are the SDK's (the ledger's transport `sdk`); the dashboard's stay `rest`.
      headers['X-Loom-Client'] = 'sdk-ts';
    }
    const csrf = method === 'POST' && !token ? csrfToken?.() : undefined;
    if (csrf) headers['X-Loom-CSRF'] = csrf;
    const ns = namespace ?? this.opts.namespace?.();
    if (ns) headers['X-Loom-Namespace'] = ns;
    if (org) headers['X-Loom-Org'] = org;
    if (agent) headers['X-Loom-Agent'] = agent;
    return headers;
  }

  /** Send one request and answer the successful Response (its body unread), retrying
   * retryable refusals when retry is on. Refusals throw LoomError; an abort throws the
   * signal's reason. */
  async request(path: string, init: RequestSpec, call: CallOptions = {}): Promise<Response> {
    const retry = retryOf(call.retry ?? this.opts.retry);
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.once(path, init, call);
      } catch (e) {
        if (!(e instanceof LoomError) || !e.retryable || !retry || attempt >= retry.retries) throw e;
        await sleep(backoffMs(e, attempt, retry), call.signal);
      }
    }
  }

  private async once(path: string, init: RequestSpec, call: CallOptions): Promise<Response> {
    const headers = this.headers(init.method, call.namespace);
    if (init.method === 'POST') headers['Content-Type'] = 'application/json';
    if (init.accept) headers.Accept = init.accept;
    const doFetch = this.opts.fetch ?? fetch;
    let res: Response;
    try {
      res = await doFetch(`${this.opts.baseUrl ?? ''}${path}`, {
        method: init.method,
        headers,
        body: init.method === 'POST' ? JSON.stringify(init.body ?? {}) : null,
        credentials: this.opts.token ? 'omit' : 'same-origin',
        signal: call.signal ?? null,
      });
    } catch (e) {
      if (isAbort(e, call.signal)) throw e;
      throw networkError(e);
    }
    if (!res.ok) throw await errorOf(res);
    return res;
  }

  /** POST a JSON body to a path of this Loom and answer its JSON (or undefined for 204). */
  async post<T>(path: string, body: unknown, call: CallOptions = {}): Promise<T> {
    const res = await this.request(path, { method: 'POST', body }, call);
    if (res.status === 204) return undefined as T;
    return (await res.json()) as T;
  }

  /** GET a path of this Loom and answer its JSON. */
  async get<T>(path: string, call: CallOptions = {}): Promise<T> {
    const res = await this.request(path, { method: 'GET' }, call);
    return (await res.json()) as T;
  }

  /** Call one op: `POST /v1/{op}` with its arguments. */
  call<K extends OpName>(op: K, args: OpTypes[K]['args'], call: CallOptions = {}): Promise<OpTypes[K]['result']> {
    return this.post<OpTypes[K]['result']>(`/v1/${op}`, args, call);
  }
}
