// Live updates for the Tasks page: it follows `GET /v1/task/watch` (server-sent events, one
// inbox's or one task's events; docs/tasks.md) with the browser's EventSource, which sends the
// sign-in cookie. Each event marks the task queries stale, so TanStack Query reads them again;
// the page polls (slowly) only while a stream it needs is down.

import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useState, useSyncExternalStore } from 'react';
import { isSigningOut, whenSigningOut } from './session';
import { readAgain } from './stale';

/**
 * A browser holds at most six HTTP/1.1 connections to one origin, shared by every tab of it, and
 * each stream keeps one open: the page streams this many inboxes at most, and the task panel one
 * task more when its inbox is not among them.
 */
export const MAX_INBOX_STREAMS = 3;
/** The poll that stands in while a stream is down (or an inbox is not streamed). */
export const FALLBACK_POLL_MS = 20_000;
/** Waits before opening a stream again after it failed, then the last one over and over. */
export const REOPEN_MS: readonly number[] = [1_000, 2_000, 5_000, 10_000, 20_000];
/** Events that come together are applied together: one read of the lists for a burst. */
const COALESCE_MS = 50;

export type WatchTarget = { inbox: string } | { task_id: string };

/** The stream's address. `start=now`: what happens from here on, not the inbox's history. */
export function watchUrl(namespace: string, target: WatchTarget, sinceSeq = ''): string {
  const q = new URLSearchParams({ ...target, namespace });
  if (sinceSeq) q.set('since_seq', sinceSeq);
  else q.set('start', 'now');
  return `/v1/task/watch?${q.toString()}`;
}

/**
 * The inboxes the page streams: the selected one, else the namespace's first `cap` by name (an
 * order that holds still as counts change, so no stream is swapped for another); `complete` when
 * that is every inbox the page shows.
 */
export function streamedInboxes(
  inboxes: readonly { inbox: string }[],
  selected: string,
  cap: number = MAX_INBOX_STREAMS,
): { streamed: string[]; complete: boolean } {
  if (selected) return { streamed: [selected], complete: true };
  const names = inboxes.map((i) => i.inbox).sort();
  return { streamed: names.slice(0, cap), complete: names.length <= cap };
}

/**
 * The query keys a task's events make stale: every list and count, and those tasks' own reads;
 * or, after a stream (re)opened (`all`: what happened before is not sent), every task read.
 */
export function staleKeys(taskIds: Iterable<string>, all = false): string[][] {
  if (all) return [['tasks'], ['task'], ['task-history']];
  const keys = [['tasks']];
  for (const id of new Set(taskIds)) keys.push(['task', id], ['task-history', id]);
  return keys;
}

/** The error code of the stream's `event: error` frame (`{"error": {"code": ...}}`), else ''. */
export function streamErrorCode(data: unknown): string {
  if (typeof data !== 'string') return '';
  try {
    const body = JSON.parse(data) as { error?: { code?: unknown } };
    return typeof body.error?.code === 'string' ? body.error.code : '';
  } catch {
    return '';
  }
}

function subscribeVisibility(onChange: () => void): () => void {
  document.addEventListener('visibilitychange', onChange);
  return () => document.removeEventListener('visibilitychange', onChange);
}

/** Whether the tab is shown: a hidden tab closes its streams (and frees its connections). */
function useVisible(): boolean {
  return useSyncExternalStore(
    subscribeVisibility,
    () => document.visibilityState !== 'hidden',
    () => true,
  );
}

/** One stream, opened again (after a wait) when it fails; the server's own end is resumed by EventSource. */
class Stream {
  private source: EventSource | undefined;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private failures = 0;
  private lastSeq = '';
  private closed = false;
  private readonly unlisten: () => void;

  constructor(
    private readonly namespace: string,
    private readonly target: WatchTarget,
    private readonly onEvent: (taskId: string) => void,
    private readonly onState: (up: boolean) => void,
    /** The server refused the stream (or could not be reached): maybe the session ended. */
    private readonly onRefused: () => void,
  ) {
    this.unlisten = whenSigningOut(() => this.close());
    this.connect();
  }

  private connect(): void {
    // A page still mounted while the session ends would open a stream that meets a 401.
    if (isSigningOut()) return;
    const source = new EventSource(watchUrl(this.namespace, this.target, this.lastSeq));
    this.source = source;
    source.onopen = () => {
      this.failures = 0;
      // What happened while it was down (or before it first opened) is read again at once.
      this.onState(true);
    };
    source.onmessage = (m: MessageEvent<string>) => {
      if (m.lastEventId) this.lastSeq = m.lastEventId;
      try {
        const event = JSON.parse(m.data) as { task_id?: string };
        if (event.task_id) this.onEvent(event.task_id);
      } catch {
        // Not an event this page reads: the next one (or the fallback poll) catches up.
      }
    };
    source.onerror = (e: Event) => {
      this.onState(false);
      if (this.closed) return;
      const code = e instanceof MessageEvent ? streamErrorCode(e.data) : '';
      if (code) {
        // The server's `event: error` frame, then the stream ends. The session's access token
        // expired: open it again at once (the next one is minted). The session ended (signed out
        // here or elsewhere): no reconnect, whose 401 would be noise; the page's reads say so.
        source.close();
        if (code === 'AUTH_EXPIRED') this.connect();
        return;
      }
      if (source.readyState === EventSource.CLOSED) {
        // A connection refused or not made (EventSource gives up): try again, waiting longer.
        this.onRefused();
        const wait = REOPEN_MS[Math.min(this.failures, REOPEN_MS.length - 1)];
        this.failures += 1;
        this.timer = setTimeout(() => this.connect(), wait);
      }
      // Otherwise the connection dropped and EventSource resumes it by itself (Last-Event-ID).
    };
  }

  close(): void {
    this.closed = true;
    this.unlisten();
    clearTimeout(this.timer);
    this.source?.close();
  }
}

/**
 * Follow `targets`' events while the tab is shown, marking the task queries stale on each.
 * Answers whether every target's stream is open (false for none): the page's cue to stop polling.
 */
export function useTaskEvents(namespace: string, targets: readonly WatchTarget[]): boolean {
  const queryClient = useQueryClient();
  const visible = useVisible();
  const [up, setUp] = useState<ReadonlySet<string>>(new Set());
  const ids = targets.map((t) => JSON.stringify(t));
  const key = ids.join('|');

  useEffect(() => {
    if (!visible || !key) return undefined;
    const pending = new Set<string>();
    let all = false;
    let flush: ReturnType<typeof setTimeout> | undefined;
    const stale = (taskId: string | undefined) => {
      if (taskId) pending.add(taskId);
      else all = true;
      if (flush !== undefined) return;
      flush = setTimeout(() => {
        flush = undefined;
        const keys = staleKeys(pending, all);
        pending.clear();
        all = false;
        for (const queryKey of keys) void readAgain(queryClient, queryKey);
      }, COALESCE_MS);
    };
    const streams = key.split('|').map((id) => {
      const target = JSON.parse(id) as WatchTarget;
      return new Stream(namespace, target, stale, (isUp) => {
        setUp((prev) => {
          const next = new Set(prev);
          if (isUp) next.add(id);
          else next.delete(id);
          return next;
        });
        if (isUp) stale(undefined);
      }, () => void readAgain(queryClient, ['session']));
    });
    return () => {
      clearTimeout(flush);
      for (const s of streams) s.close();
      setUp(new Set());
    };
  }, [namespace, key, visible, queryClient]);

  return visible && ids.length > 0 && ids.every((id) => up.has(id));
}
