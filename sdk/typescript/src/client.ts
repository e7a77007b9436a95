// Loom's core TypeScript client: one `call` for every op of the catalog, typed by the generated
// OpTypes (src/generated/ops.ts), over the platform's fetch and nothing else.
//
// Two ways to authenticate: a bearer token (agents, scripts), or a browser's sign-in session
// (the HttpOnly `loom_session` cookie, sent same-origin, with the session's CSRF token on every
// POST as `X-Loom-CSRF`).

import type { OpName, OpTypes } from './generated/ops';

export type { OpName, OpTypes } from './generated/ops';

/** An error answer: Loom's `{"error": {code, message, retryable, detail}}` and the HTTP status. */
export class LoomError extends Error {
  readonly code: string;
  readonly retryable: boolean;
  readonly detail: Record<string, unknown>;
  readonly status: number;

  constructor(status: number, code: string, message: string, retryable = false, detail: Record<string, unknown> = {}) {
    super(message);
    this.name = 'LoomError';
    this.status = status;
    this.code = code;
    this.retryable = retryable;
    this.detail = detail;
  }
}

export interface ClientOptions {
  /** Where Loom answers; '' (the default) is the page's own origin. */
  baseUrl?: string;
  /** A bearer token; leave unset to call with the browser's session cookie. */
  token?: string;
  /** The session's CSRF token, sent as X-Loom-CSRF on every POST made with the cookie. */
  csrfToken?: () => string | undefined;
  /** The X-Loom-Namespace header: the namespace an op runs in when its arguments name none. */
  namespace?: () => string | undefined;
  /** The X-Loom-Agent label calls are made under. */
  agent?: string;
  fetch?: typeof fetch;
}

export interface CallOptions {
  signal?: AbortSignal;
  namespace?: string;
}

async function errorOf(res: Response): Promise<LoomError> {
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  const err = (body as { error?: Record<string, unknown> } | undefined)?.error;
  if (err && typeof err === 'object') {
    return new LoomError(
      res.status,
      String(err.code ?? 'UNKNOWN'),
      String(err.message ?? res.statusText),
      Boolean(err.retryable),
      (err.detail as Record<string, unknown> | undefined) ?? {},
    );
  }
  return new LoomError(res.status, `HTTP_${res.status}`, res.statusText || 'request failed', res.status >= 500);
}

export class LoomClient {
  private readonly opts: ClientOptions;

  constructor(opts: ClientOptions = {}) {
    this.opts = opts;
  }

  /** POST a JSON body to a path of this Loom and answer its JSON (or undefined for 204). */
  async post<T>(path: string, body: unknown, call: CallOptions = {}): Promise<T> {
    const headers: Record<string, string> = { 'Content-Type': 'application/json' };
    const { token, csrfToken, namespace, agent } = this.opts;
    if (token) headers.Authorization = `Bearer ${token}`;
    const csrf = csrfToken?.();
    if (!token && csrf) headers['X-Loom-CSRF'] = csrf;
    const ns = call.namespace ?? namespace?.();
    if (ns) headers['X-Loom-Namespace'] = ns;
    if (agent) headers['X-Loom-Agent'] = agent;
    const doFetch = this.opts.fetch ?? fetch;
    const res = await doFetch(`${this.opts.baseUrl ?? ''}${path}`, {
      method: 'POST',
      headers,
      body: JSON.stringify(body ?? {}),
      credentials: token ? 'omit' : 'same-origin',
      signal: call.signal,
    });
    if (!res.ok) throw await errorOf(res);
    if (res.status === 204) return undefined as T;
    return (await res.json()) as T;
  }

  /** GET a path of this Loom and answer its JSON. */
  async get<T>(path: string, call: CallOptions = {}): Promise<T> {
    const headers: Record<string, string> = {};
    if (this.opts.token) headers.Authorization = `Bearer ${this.opts.token}`;
    const doFetch = this.opts.fetch ?? fetch;
    const res = await doFetch(`${this.opts.baseUrl ?? ''}${path}`, {
      headers,
      credentials: this.opts.token ? 'omit' : 'same-origin',
      signal: call.signal,
    });
    if (!res.ok) throw await errorOf(res);
    return (await res.json()) as T;
  }

  /** Call one op: `POST /v1/{op}` with its arguments. */
  call<K extends OpName>(op: K, args: OpTypes[K]['args'], call: CallOptions = {}): Promise<OpTypes[K]['result']> {
    return this.post<OpTypes[K]['result']>(`/v1/${op}`, args, call);
  }
}
