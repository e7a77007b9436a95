import type { QueryClient, QueryKey } from '@tanstack/react-query';

/**
 * Mark the queries under `queryKey` stale after a change, so what is shown is read again.
 *
 * `invalidateQueries` alone can lose the change: a query's FIRST read still in flight (no data
 * yet) is not cancelled but joined, so the answer shown is the one asked before the change (a
 * task panel opened, Start clicked before its history's first read returned: the history never
 * showed the claim). Such reads are cancelled first (reverted, silently), then read again.
 */
export async function readAgain(queryClient: QueryClient, queryKey: QueryKey): Promise<void> {
  await queryClient.cancelQueries({
    queryKey,
    predicate: (q) => q.state.data === undefined && q.state.fetchStatus === 'fetching',
  });
  await queryClient.invalidateQueries({ queryKey });
}
