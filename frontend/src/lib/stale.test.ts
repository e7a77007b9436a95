import { QueryClient, QueryObserver } from '@tanstack/react-query';
import { describe, expect, it } from 'vitest';
import { readAgain } from './stale';

/** A query function whose answers the test releases by hand, in order of the calls. */
function heldReads() {
  const pending: ((value: string) => void)[] = [];
  const calls: number[] = [];
  const read = () =>
    new Promise<string>((resolve) => {
      calls.push(calls.length + 1);
      pending.push(resolve);
    });
  const release = (n: number, value: string) => {
    const resolve = pending[n];
    if (!resolve) throw new Error(`read ${n + 1} was not asked`);
    resolve(value);
  };
  return { read, calls, release };
}

describe('reading again after a change', () => {
  it('a change during the first read is not lost: the first read is dropped, a new one answers', async () => {
    const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
    const reads = heldReads();
    const observer = new QueryObserver(client, { queryKey: ['task-history', 't-1'], queryFn: reads.read });
    const shown: (string | undefined)[] = [];
    const unsubscribe = observer.subscribe((r) => shown.push(r.data));
    expect(reads.calls).toEqual([1]); // the first read, asked before the change

    const again = readAgain(client, ['task-history']);
    await Promise.resolve();
    await new Promise((r) => setTimeout(r, 0));
    expect(reads.calls).toEqual([1, 2]); // read again, not joined to the first
    reads.release(0, 'before the claim');
    reads.release(1, 'with the claim');
    await again;
    await new Promise((r) => setTimeout(r, 0));
    expect(observer.getCurrentResult().data).toBe('with the claim');
    expect(shown).not.toContain('before the claim');
    unsubscribe();
  });

  it('a read with data in flight is replaced too, and an idle one is read again', async () => {
    const client = new QueryClient({ defaultOptions: { queries: { retry: false } } });
    const reads = heldReads();
    const observer = new QueryObserver(client, { queryKey: ['tasks', 'list'], queryFn: reads.read });
    const unsubscribe = observer.subscribe(() => undefined);
    reads.release(0, 'first');
    await new Promise((r) => setTimeout(r, 0));
    expect(observer.getCurrentResult().data).toBe('first');

    const again = readAgain(client, ['tasks']);
    await new Promise((r) => setTimeout(r, 0));
    expect(reads.calls).toEqual([1, 2]);
    reads.release(1, 'second');
    await again;
    expect(observer.getCurrentResult().data).toBe('second');
    unsubscribe();
  });
});
