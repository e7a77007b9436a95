import { describe, expect, it } from 'vitest';
import { MAX_INBOX_STREAMS, staleKeys, streamErrorCode, streamedInboxes, watchUrl } from './live';

describe('the streams the Tasks page opens', () => {
  const inboxes = ['ops', 'billing', 'triage', 'support', 'alpha'].map((inbox) => ({ inbox }));

  it('streams the selected inbox alone', () => {
    expect(streamedInboxes(inboxes, 'support')).toEqual({ streamed: ['support'], complete: true });
  });
  it('streams at most a few inboxes of the namespace, by name, and says when some are left to the poll', () => {
    expect(MAX_INBOX_STREAMS).toBe(3);
    expect(streamedInboxes(inboxes, '')).toEqual({ streamed: ['alpha', 'billing', 'ops'], complete: false });
    expect(streamedInboxes(inboxes.slice(0, 2), '')).toEqual({ streamed: ['billing', 'ops'], complete: true });
    expect(streamedInboxes([], '')).toEqual({ streamed: [], complete: true });
  });
});

describe('the stream address', () => {
  it('starts from now in the namespace, or resumes after a cursor', () => {
    expect(watchUrl('team a', { inbox: 'ops' })).toBe('/v1/task/watch?inbox=ops&namespace=team+a&start=now');
    expect(watchUrl('ns', { task_id: 't-1' }, '42')).toBe('/v1/task/watch?task_id=t-1&namespace=ns&since_seq=42');
  });
});

describe('what an event makes stale', () => {
  it('every task list and count, and each named task once', () => {
    expect(staleKeys([])).toEqual([['tasks']]);
    expect(staleKeys(['a', 'b', 'a'])).toEqual([['tasks'], ['task', 'a'], ['task-history', 'a'], ['task', 'b'], ['task-history', 'b']]);
  });
  it('every task read after a stream opened, since what came before it is not sent', () => {
    expect(staleKeys(['a'], true)).toEqual([['tasks'], ['task'], ['task-history']]);
  });
});

describe("the stream's error frame", () => {
  it('names the code that decides whether to reconnect', () => {
    expect(streamErrorCode('{"error":{"code":"AUTH_REVOKED","message":"revoked"}}')).toBe('AUTH_REVOKED');
    expect(streamErrorCode('{"error":{"code":"AUTH_EXPIRED"}}')).toBe('AUTH_EXPIRED');
    expect(streamErrorCode('not json')).toBe('');
    expect(streamErrorCode(undefined)).toBe('');
    expect(streamErrorCode('{"seq":1}')).toBe('');
  });
});
