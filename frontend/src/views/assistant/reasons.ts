// Why the assistant cannot answer, in words with what to do (spec 000 "The bridge", step 1, and
// "Model and cost"). Read from the refusal's code and detail.reason.

import { LoomError } from '@loom/sdk';

export interface Reason {
  title: string;
  todo: string;
  /** Whether asking the same again later may work (a Retry is offered). */
  retry: boolean;
}

const NETWORK: Reason = { title: 'The connection to Loom was lost.', todo: 'Check your network and ask again.', retry: true };

/** The refusal's detail.reason -> what it means to the asker: one entry per reason the bridge gives. */
const BY_REASON: ReadonlyMap<string, Reason> = new Map<string, Reason>([
  ['network', NETWORK],
  [
    'not_configured',
    {
      title: 'No assistant is configured on this Loom.',
      todo: 'An operator sets LOOM_ASSISTANT_LIBRECHAT_URL to LibreChat’s internal address. The starters’ cards work meanwhile.',
      retry: false,
    },
  ],
  ['starting', { title: 'The assistant is starting.', todo: 'Ask again in a moment.', retry: true }],
  [
    'failing',
    {
      title: 'The assistant could not answer: LibreChat is failing.',
      todo: 'Loom retries setting it up; ask again later, or tell an operator (loom doctor names the cause).',
      retry: true,
    },
  ],
  [
    'auth_off',
    {
      title: 'The assistant is off: LibreChat does not pass the answer’s token to Loom.',
      todo: 'An operator fixes the MCP Authorization header in LibreChat’s configuration.',
      retry: false,
    },
  ],
  [
    'org_wide',
    {
      title: 'An org-wide grant cannot ask the assistant: an answer reads one namespace.',
      todo: 'Ask an admin for a role on this namespace itself, or ask with a namespace token.',
      retry: false,
    },
  ],
  [
    'narrowed',
    {
      title: 'Your access here is narrower than the namespace, and an answer reads all of it.',
      todo: 'Ask an admin for a grant on the whole namespace.',
      retry: false,
    },
  ],
  ['token_expires_soon', { title: 'Your credential has less life left than one answer may run.', todo: 'Sign in again, then ask.', retry: false }],
  [
    'budget',
    {
      title: 'This namespace’s assistant budget for today is spent.',
      todo: 'Ask tomorrow, or an admin raises the namespace’s daily_cost_cap_usd. The starters’ cards cost nothing and still work.',
      retry: false,
    },
  ],
  [
    'concurrent_answers',
    { title: 'The assistant is busy: this namespace is running its most answers at once.', todo: 'Ask again in a few seconds.', retry: true },
  ],
  ['model_calls_off', { title: 'An admin switched model calls off for this org.', todo: 'An admin turns them back on (org.set_model_calls).', retry: false }],
  ['answer_ttl', { title: 'The answer ran past its time limit.', todo: 'Ask a narrower question.', retry: true }],
]);

export function refusalReason(error: unknown): Reason {
  if (!(error instanceof LoomError)) return NETWORK;
  const known = typeof error.detail.reason === 'string' ? BY_REASON.get(error.detail.reason) : undefined;
  if (known) return known;
  if (error.code === 'AUTH_INSUFFICIENT' || error.status === 403) {
    return { title: 'You need the viewer role on this namespace to ask.', todo: 'Ask an admin of the namespace for a grant.', retry: false };
  }
  if (error.code === 'RATE_LIMITED') {
    return { title: 'Too many requests just now.', todo: 'Ask again in a moment.', retry: true };
  }
  if (error.status === 401) return { title: 'Your session ended.', todo: 'Sign in again.', retry: false };
  return { title: error.message, todo: error.retryable ? 'Ask again in a moment.' : 'Ask again, or ask something else.', retry: error.retryable };
}
