// The sign-in session (server contract: POST /v1/session/login, GET /v1/session,
// POST /v1/session/logout) and the one client every page calls ops through.

import { Loom, LoomError, type Role } from '@loom/sdk';
import { UI_AGENT } from './tasks';

export interface SessionNamespace {
  namespace: string;
  role: Role;
}

export interface Session {
  subject: string;
  org: string;
  namespaces: SessionNamespace[];
  csrf_token: string;
  session_id: string;
  expires_at: string | number;
}

let current: Session | undefined;
let namespace: string | undefined;

export function setSession(s: Session | undefined): void {
  current = s;
}

export function setNamespace(ns: string | undefined): void {
  namespace = ns;
}

// From the moment sign-out is asked for until it fails or someone signs in again, the pages' op
// calls stop here, unsent: the session ends under them, and each one sent meanwhile would come
// back 401 (a console error, and nothing a person could act on). /v1/session/* still goes.
let signingOut = false;

function sessionFetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
  const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url;
  if (signingOut && !new URL(url, window.location.origin).pathname.startsWith('/v1/session')) {
    return Promise.reject(new DOMException('signing out', 'AbortError'));
  }
  return fetch(input, init);
}

/** Every op the dashboard calls goes through here: cookie + CSRF, the header's namespace, agent loom-ui;
 * the Ask AI panel's answers too (client.assistant). */
export const client = new Loom({
  csrfToken: () => current?.csrf_token,
  namespace: () => namespace,
  agent: UI_AGENT,
  fetch: sessionFetch,
});

/** The signed-in session, or undefined when the cookie is missing, expired or revoked. */
export async function readSession(): Promise<Session | undefined> {
  try {
    return await client.get<Session>('/v1/session');
  } catch (e) {
    if (e instanceof LoomError && e.status === 401) return undefined;
    throw e;
  }
}

export function login(code: string): Promise<Session> {
  signingOut = false;
  return client.post<Session>('/v1/session/login', { code });
}

/** Whether sign-out has been asked for (and has not failed): no stream opens meanwhile. */
export function isSigningOut(): boolean {
  return signingOut;
}

const signOutStops = new Set<() => void>();

/** Calls `stop` when sign-out is asked for, so a live stream closes before the session ends under
 * it (its reconnect would meet a 401); answers the way to stop listening. */
export function whenSigningOut(stop: () => void): () => void {
  signOutStops.add(stop);
  return () => {
    signOutStops.delete(stop);
  };
}

export async function logout(): Promise<void> {
  signingOut = true;
  for (const stop of [...signOutStops]) stop();
  try {
    await client.post<void>('/v1/session/logout', {});
  } catch (e) {
    signingOut = false; // still signed in: the pages go on
    throw e;
  }
}

export function approveCli(code: string): Promise<unknown> {
  return client.post<unknown>('/v1/session/cli_approve', { code });
}

const RANK: Record<Role, number> = { viewer: 1, writer: 2, admin: 3 };

/** The session's role on a namespace: its own grant, else an org-wide (`*`) one. */
export function roleOn(s: Session | undefined, ns: string | undefined): Role | undefined {
  if (!s || !ns) return undefined;
  const own = s.namespaces.find((n) => n.namespace === ns)?.role;
  const wide = s.namespaces.find((n) => n.namespace === '*')?.role;
  if (own && wide) return RANK[own] >= RANK[wide] ? own : wide;
  return own ?? wide;
}

export function atLeast(role: Role | undefined, need: Role): boolean {
  return role !== undefined && RANK[role] >= RANK[need];
}
