// The Tasks page's pure logic: which group (next step) a status belongs to, which one-step
// move a drop onto a group makes, and which buttons the panel offers. The server checks every
// move again (spec 003's state machine, services/tasks/loom_tasks/domain/transitions.py); this
// only decides what to offer.

export type Status =
  | 'triage'
  | 'todo'
  | 'in_progress'
  | 'deferred'
  | 'blocked'
  | 'done'
  | 'failed'
  | 'wont_do'
  | 'cancelled';

export type GroupId = 'todo' | 'in_progress' | 'waiting' | 'closed';

export interface Group {
  id: GroupId;
  label: string;
  statuses: Status[];
  /** What to do next when the group is empty. */
  empty: string;
}

export const GROUPS: readonly Group[] = [
  {
    id: 'todo',
    label: 'To do',
    statuses: ['triage', 'todo'],
    empty: 'Nothing to do. Tasks posted to an inbox of this namespace land here (review items first).',
  },
  {
    id: 'in_progress',
    label: 'In progress',
    statuses: ['in_progress'],
    empty: 'Nothing in progress. Start a task from To do, or drag it here.',
  },
  {
    id: 'waiting',
    label: 'Waiting',
    statuses: ['deferred', 'blocked'],
    empty: 'Nothing waiting. A task you block or defer waits here until it is unblocked or resumed.',
  },
  {
    id: 'closed',
    label: 'Closed',
    statuses: ['done', 'failed', 'wont_do', 'cancelled'],
    empty: 'Nothing closed yet. Finished, failed and declined tasks show here.',
  },
];

export const UNFINISHED: ReadonlySet<string> = new Set(['triage', 'todo', 'in_progress', 'deferred', 'blocked']);

export function groupOf(status: string): GroupId | undefined {
  return GROUPS.find((g) => (g.statuses as string[]).includes(status))?.id;
}

/** The least a task row must carry for these decisions. */
export interface TaskLike {
  task_id: string;
  status: string;
  /** The claim's fence: non-zero only when this caller holds the lease. */
  fence?: number;
}

export type MoveOp =
  | 'task.accept'
  | 'task.unblock'
  | 'task.resume'
  | 'task.reopen'
  | 'task.claim'
  | 'task.block'
  | 'task.defer'
  | 'task.complete'
  | 'task.fail'
  | 'task.wont_do';

export interface Move {
  op: MoveOp;
  /** The button's (and the move's) name. */
  label: string;
  /** The move needs the current lease's fence. */
  fenced: boolean;
}

const ACCEPT: Move = { op: 'task.accept', label: 'Accept', fenced: false };
const UNBLOCK: Move = { op: 'task.unblock', label: 'Unblock', fenced: false };
const RESUME: Move = { op: 'task.resume', label: 'Resume', fenced: false };
const REOPEN: Move = { op: 'task.reopen', label: 'Reopen', fenced: false };
const START: Move = { op: 'task.claim', label: 'Start', fenced: false };
const BLOCK: Move = { op: 'task.block', label: 'Block', fenced: true };
const DEFER: Move = { op: 'task.defer', label: 'Defer a day', fenced: true };
const DONE: Move = { op: 'task.complete', label: 'Mark done', fenced: true };
const FAIL: Move = { op: 'task.fail', label: 'Fail', fenced: true };
const WONT_DO: Move = { op: 'task.wont_do', label: "Won't do", fenced: false };

function holds(task: TaskLike): boolean {
  return task.status === 'in_progress' && (task.fence ?? 0) > 0;
}

/**
 * The one-step move a drop of `task` onto `group` makes, or undefined when the group cannot be
 * reached in one step (it is dimmed while the task is held). Into To do accepts, unblocks,
 * resumes or reopens; into In progress starts; into Waiting blocks; into Closed marks done (a
 * task whose lease this caller holds) or won't do.
 */
export function moveInto(task: TaskLike, group: GroupId): Move | undefined {
  const s = task.status;
  switch (group) {
    case 'todo':
      if (s === 'triage') return ACCEPT;
      if (s === 'blocked') return UNBLOCK;
      if (s === 'deferred') return RESUME;
      if (s === 'failed' || s === 'wont_do' || s === 'cancelled') return REOPEN;
      return undefined;
    case 'in_progress':
      return s === 'todo' ? START : undefined;
    case 'waiting':
      return holds(task) ? BLOCK : undefined;
    case 'closed':
      if (holds(task)) return DONE;
      return UNFINISHED.has(s) ? WONT_DO : undefined;
  }
}

/** The groups a drop of `task` can reach in one step (its own group excluded). */
export function reachableGroups(task: TaskLike): Set<GroupId> {
  const own = groupOf(task.status);
  return new Set(GROUPS.map((g) => g.id).filter((id) => id !== own && moveInto(task, id) !== undefined));
}

/** The panel's buttons for `task`, in the order a person works: every move the state allows. */
export function panelMoves(task: TaskLike): Move[] {
  switch (task.status) {
    case 'triage':
      return [ACCEPT, WONT_DO];
    case 'todo':
      return [START, WONT_DO];
    case 'in_progress':
      return holds(task) ? [DONE, FAIL, BLOCK, DEFER, WONT_DO] : [WONT_DO];
    case 'blocked':
      return [UNBLOCK, WONT_DO];
    case 'deferred':
      return [RESUME, WONT_DO];
    case 'failed':
    case 'wont_do':
    case 'cancelled':
      return [REOPEN];
    default:
      return [];
  }
}

/** The row's inline buttons: Accept for a review item, Won't do for any unfinished task. */
export function inlineMoves(task: TaskLike): Move[] {
  const out: Move[] = [];
  if (task.status === 'triage') out.push(ACCEPT);
  if (UNFINISHED.has(task.status)) out.push(WONT_DO);
  return out;
}

/** Start's lease: one day, held by the dashboard's agent label. */
export const UI_LEASE_SECONDS = 86_400;
export const UI_AGENT = 'loom-ui';

/** The arguments a move sends, besides the task id (and the fence when it is fenced). */
export function moveArgs(move: Move, task: TaskLike, now: Date = new Date()): Record<string, unknown> {
  const base: Record<string, unknown> = { task_id: task.task_id };
  if (move.fenced) base.fence = task.fence ?? 0;
  switch (move.op) {
    case 'task.claim':
      return { ...base, lease_seconds: UI_LEASE_SECONDS };
    case 'task.block':
      return { ...base, blocked_on: 'human', reason: 'moved to Waiting on the dashboard' };
    case 'task.defer':
      return { ...base, resume_at: new Date(now.getTime() + 86_400_000).toISOString(), reason: 'deferred a day on the dashboard' };
    case 'task.fail':
      return { ...base, reason: 'failed on the dashboard' };
    case 'task.wont_do':
      return { ...base, reason: "won't do (dashboard)" };
    case 'task.complete':
      return { ...base, outcome: {} };
    default:
      return base;
  }
}

/** Tiles for what needs a person, from the namespace's counts by status. */
export interface Tile {
  id: string;
  label: string;
  count: number;
  hint: string;
}

export function tiles(counts: Record<string, number>): Tile[] {
  const n = (s: string) => counts[s] ?? 0;
  return [
    { id: 'triage', label: 'Needs review', count: n('triage'), hint: 'Accept or decline tasks posted for review.' },
    { id: 'blocked', label: 'Blocked', count: n('blocked'), hint: 'Tasks waiting on someone: unblock them when it is answered.' },
    { id: 'failed', label: 'Failed', count: n('failed'), hint: 'Look at why, then reopen or leave closed.' },
    { id: 'todo', label: 'Ready to start', count: n('todo'), hint: 'Start one to work it under a one-day lease.' },
  ];
}

/** A cached list's pages (TanStack Query's infinite data, in the shape task.list answers). */
export interface PagedTasks<T extends TaskLike> {
  pages: Array<{ tasks: T[]; next_page_token?: string }>;
  pageParams: unknown[];
}

/**
 * A group's cached pages after a move answered `task`: taken out wherever it was, and put first
 * when this group now holds it (`holds`), so the move shows before the next read.
 */
export function placeTask<T extends TaskLike, D extends PagedTasks<T>>(data: D, task: T, holds: boolean): D {
  const pages = data.pages.map((p) => ({ ...p, tasks: p.tasks.filter((t) => t.task_id !== task.task_id) }));
  const [first, ...rest] = pages;
  if (!first || !holds) return { ...data, pages };
  return { ...data, pages: [{ ...first, tasks: [task, ...first.tasks] }, ...rest] };
}
