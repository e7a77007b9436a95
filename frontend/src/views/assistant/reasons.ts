// Why the assistant cannot answer, in words with what to do (spec 000 "The bridge", step 1, and
// "Model and cost"). Read from the refusal's code and detail.reason.

import { LoomError } from '@loom/sdk';

export interface Reason {
  title: string;
  todo: string;
  /** Whether asking the same again later may work (a Retry is offered). */
  retry: boolean;
}

export function refusalReason(error: unknown): Reason {
  if (!(error instanceof LoomError)) {
    return { title: 'The connection to Loom was lost.', todo: 'Check your network and ask again.', retry: true };
  }
  const reason = typeof error.detail.reason === 'string' ? error.detail.reason : '';
  switch (reason) {
    case 'network':
      return { title: 'The connection to Loom was lost.', todo: 'Check your network and ask again.', retry: true };
    case 'not_configured':
      return {
        title: 'No assistant is configured on this Loom.',
        todo: 'An operator sets LOOM_ASSISTANT_LIBRECHAT_URL to LibreChat’s internal address. The starters’ cards work meanwhile.',
        retry: false,
      };
    case 'starting':
      return { title: 'The assistant is starting.', todo: 'Ask again in a moment.', retry: true };
    case 'failing':
      return {
        title: 'The assistant could not answer: LibreChat is failing.',
        todo: 'Loom retries setting it up; ask again later, or tell an operator (loom doctor names the cause).',
        retry: true,
      };
    case 'auth_off':
      return {
        title: 'The assistant is off: LibreChat does not pass the answer’s token to Loom.',
        todo: 'An operator fixes the MCP Authorization header in LibreChat’s configuration.',
        retry: false,
      };
    case 'org_wide':
      return {
        title: 'An org-wide grant cannot ask the assistant: an answer reads one namespace.',
        todo: 'Ask an admin for a role on this namespace itself, or ask with a namespace token.',
        retry: false,
      };
    case 'narrowed':
      return {
        title: 'Your access here is narrower than the namespace, and an answer reads all of it.',
        todo: 'Ask an admin for a grant on the whole namespace.',
        retry: false,
      };
    case 'token_expires_soon':
      return {
        title: 'Your credential has less life left than one answer may run.',
        todo: 'Sign in again, then ask.',
        retry: false,
      };
    case 'budget':
      return {
        title: 'This namespace’s assistant budget for today is spent.',
        todo: 'Ask tomorrow, or an admin raises the namespace’s daily_cost_cap_usd. The starters’ cards cost nothing and still work.',
        retry: false,
      };
    case 'concurrent_answers':
      return { title: 'The assistant is busy: this namespace is running its most answers at once.', todo: 'Ask again in a few seconds.', retry: true };
    case 'model_calls_off':
      return { title: 'An admin switched model calls off for this org.', todo: 'An admin turns them back on (org.set_model_calls).', retry: false };
    case 'answer_ttl':
      return { title: 'The answer ran past its time limit.', todo: 'Ask a narrower question.', retry: true };
    default:
      break;
  }
  if (error.code === 'AUTH_INSUFFICIENT' || error.status === 403) {
    return { title: 'You need the viewer role on this namespace to ask.', todo: 'Ask an admin of the namespace for a grant.', retry: false };
  }
  if (error.code === 'RATE_LIMITED') {
    return { title: 'Too many requests just now.', todo: 'Ask again in a moment.', retry: true };
  }
  if (error.status === 401) return { title: 'Your session ended.', todo: 'Sign in again.', retry: false };
  return { title: error.message, todo: error.retryable ? 'Ask again in a moment.' : 'Ask again, or ask something else.', retry: error.retryable };
}
