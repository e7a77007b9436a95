import { ERROR_CODES, type ErrorCode } from './generated/ops.js';

// Loom's errors as one typed class: every refusal the server answers
// (`{"error": {code, message, retryable, detail}}` with the HTTP status its code maps to), an
// error event inside a streamed answer, and a request that got no answer at all.

/** A call Loom refused or could not answer. */
export class LoomError extends Error {
  /** The server's stable code, e.g. `AUTH_INVALID`, `TASK_FENCE_STALE`, `RATE_LIMITED` (ERROR_CODES
   * lists them; a newer server may answer one this SDK does not know). */
  readonly code: ErrorCode | (string & {});
  /** The server's hint that the same call may succeed later. */
  readonly retryable: boolean;
  /** Structured facts about the refusal (`field`, `reason`, `retry_after_s`, ...). */
  readonly detail: Record<string, unknown>;
  /** The HTTP status; 0 when no answer arrived (the network failed). */
  readonly status: number;
  /** Seconds the server asked to wait before a retry (its Retry-After header, or `detail.retry_after_s`). */
  readonly retryAfter: number | undefined;

  constructor(
    status: number,
    code: string,
    message: string,
    retryable = false,
    detail: Record<string, unknown> = {},
    retryAfter?: number,
  ) {
    super(message);
    this.name = 'LoomError';
    this.status = status;
    this.code = code;
    this.retryable = retryable;
    this.detail = detail;
    const fromDetail = Number(detail.retry_after_s);
    this.retryAfter = retryAfter ?? (Number.isFinite(fromDetail) && fromDetail >= 0 ? fromDetail : undefined);
  }
}

// Codes a bare status implies when an answer carries no Loom error body (a proxy's page).
const CODE_BY_STATUS: Record<number, string> = {
  401: 'AUTH_REQUIRED',
  403: 'AUTH_INSUFFICIENT',
  404: 'RESOURCE_NOT_FOUND',
  409: 'PRECONDITION_FAILED',
  413: 'REQUEST_TOO_LARGE',
  422: 'VALIDATION_FAILED',
  423: 'LOCKED',
  429: 'RATE_LIMITED',
  502: 'BACKEND_UNAVAILABLE',
  503: 'BACKEND_UNAVAILABLE',
  504: 'BACKEND_UNAVAILABLE',
};

function retryAfterHeader(value: string | null): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds);
  const when = Date.parse(value); // the HTTP-date form
  return Number.isNaN(when) ? undefined : Math.max(0, (when - Date.now()) / 1000);
}

/** The HTTP status a code is answered with (an error inside a streamed answer came on a 200). */
export function statusOfCode(code: string): number {
  return (ERROR_CODES as Record<string, { status: number }>)[code]?.status ?? 500;
}

/** The error of Loom's `{code, message, retryable, detail}` payload, answered with `status`
 * (undefined: the code's own, for an error event inside a streamed answer). */
export function errorFromPayload(status: number | undefined, payload: Record<string, unknown>, retryAfter?: number): LoomError {
  const detail = payload.detail;
  const code = String(payload.code ?? (status !== undefined ? CODE_BY_STATUS[status] : undefined) ?? 'INTERNAL');
  return new LoomError(
    status ?? statusOfCode(code),
    code,
    String(payload.message ?? ''),
    Boolean(payload.retryable),
    detail && typeof detail === 'object' && !Array.isArray(detail) ? (detail as Record<string, unknown>) : {},
    retryAfter,
  );
}

/** The typed error for a non-2xx answer, whatever its body holds. */
export async function errorOf(res: Response): Promise<LoomError> {
  const after = retryAfterHeader(res.headers.get('Retry-After'));
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  const err = (body as { error?: unknown } | undefined)?.error;
  if (err && typeof err === 'object') return errorFromPayload(res.status, err as Record<string, unknown>, after);
  const code = CODE_BY_STATUS[res.status] ?? (res.status >= 500 ? 'INTERNAL' : `HTTP_${res.status}`);
  const retryable = res.status === 429 || res.status >= 500;
  return new LoomError(res.status, code, res.statusText || `HTTP ${res.status}`, retryable, {}, after);
}

/** A request that got no answer: the connection failed or broke. Worth a retry. */
export function networkError(cause: unknown): LoomError {
  const err = new LoomError(0, 'BACKEND_UNAVAILABLE', 'the connection to Loom failed', true, {
    reason: 'network',
    error: cause instanceof Error ? cause.message : String(cause),
  });
  (err as { cause?: unknown }).cause = cause;
  return err;
}

/** Whether `e` is the AbortSignal's abort (which is never turned into a LoomError). */
export function isAbort(e: unknown, signal?: AbortSignal): boolean {
  return (signal?.aborted ?? false) || (e instanceof Error && (e.name === 'AbortError' || e.name === 'TimeoutError'));
}
