import { describe, expect, it } from 'vitest';
import { GROUPS, groupOf, inlineMoves, moveArgs, moveInto, panelMoves, placeTask, reachableGroups, tiles } from './tasks';

const t = (status: string, fence = 0) => ({ task_id: 'abcdefgh', status, fence });

describe('grouping by next step', () => {
  it('puts every status of the state machine in exactly one group', () => {
    const statuses = ['triage', 'todo', 'in_progress', 'deferred', 'blocked', 'done', 'failed', 'wont_do', 'cancelled'];
    for (const s of statuses) {
      expect(GROUPS.filter((g) => (g.statuses as string[]).includes(s))).toHaveLength(1);
    }
    expect(GROUPS.map((g) => g.label)).toEqual(['To do', 'In progress', 'Waiting', 'Closed']);
  });
  it('maps statuses to their group', () => {
    expect(groupOf('triage')).toBe('todo');
    expect(groupOf('in_progress')).toBe('in_progress');
    expect(groupOf('blocked')).toBe('waiting');
    expect(groupOf('deferred')).toBe('waiting');
    expect(groupOf('wont_do')).toBe('closed');
    expect(groupOf('nonsense')).toBeUndefined();
  });
});

describe('one-step moves onto a group', () => {
  it('into To do accepts, unblocks, resumes or reopens', () => {
    expect(moveInto(t('triage'), 'todo')?.op).toBe('task.accept');
    expect(moveInto(t('blocked'), 'todo')?.op).toBe('task.unblock');
    expect(moveInto(t('deferred'), 'todo')?.op).toBe('task.resume');
    expect(moveInto(t('failed'), 'todo')?.op).toBe('task.reopen');
    expect(moveInto(t('cancelled'), 'todo')?.op).toBe('task.reopen');
    expect(moveInto(t('done'), 'todo')).toBeUndefined();
    expect(moveInto(t('in_progress', 3), 'todo')).toBeUndefined();
  });
  it('into In progress starts a todo task only', () => {
    expect(moveInto(t('todo'), 'in_progress')?.op).toBe('task.claim');
    expect(moveInto(t('triage'), 'in_progress')).toBeUndefined();
    expect(moveInto(t('blocked'), 'in_progress')).toBeUndefined();
  });
  it('into Waiting blocks only a task whose lease the caller holds', () => {
    expect(moveInto(t('in_progress', 7), 'waiting')?.op).toBe('task.block');
    expect(moveInto(t('in_progress', 0), 'waiting')).toBeUndefined();
    expect(moveInto(t('todo'), 'waiting')).toBeUndefined();
  });
  it("into Closed marks done when held, else won't do; a finished task stays", () => {
    expect(moveInto(t('in_progress', 7), 'closed')?.op).toBe('task.complete');
    expect(moveInto(t('in_progress', 0), 'closed')?.op).toBe('task.wont_do');
    expect(moveInto(t('todo'), 'closed')?.op).toBe('task.wont_do');
    expect(moveInto(t('done'), 'closed')).toBeUndefined();
  });
  it('reachable groups exclude the own group and dim the rest', () => {
    expect([...reachableGroups(t('todo'))].sort()).toEqual(['closed', 'in_progress']);
    expect([...reachableGroups(t('triage'))].sort()).toEqual(['closed']);
    expect([...reachableGroups(t('in_progress', 2))].sort()).toEqual(['closed', 'waiting']);
    expect([...reachableGroups(t('done'))]).toEqual([]);
    expect([...reachableGroups(t('failed'))]).toEqual(['todo']);
  });
});

describe('panel and inline buttons', () => {
  it('offers Start for todo and Mark done / Fail only with the fence', () => {
    expect(panelMoves(t('todo')).map((m) => m.label)).toEqual(['Start', "Won't do"]);
    expect(panelMoves(t('in_progress', 5)).map((m) => m.label)).toContain('Mark done');
    expect(panelMoves(t('in_progress', 5)).map((m) => m.label)).toContain('Fail');
    expect(panelMoves(t('in_progress', 0)).map((m) => m.label)).toEqual(["Won't do"]);
    expect(panelMoves(t('done'))).toEqual([]);
  });
  it('inline: Accept on review items, Won\'t do on unfinished tasks', () => {
    expect(inlineMoves(t('triage')).map((m) => m.label)).toEqual(['Accept', "Won't do"]);
    expect(inlineMoves(t('todo')).map((m) => m.label)).toEqual(["Won't do"]);
    expect(inlineMoves(t('done'))).toEqual([]);
  });
  it('Start claims under a one-day lease; fenced moves carry the fence', () => {
    expect(moveArgs(moveInto(t('todo'), 'in_progress')!, t('todo'))).toEqual({ task_id: 'abcdefgh', lease_seconds: 86400 });
    expect(moveArgs(moveInto(t('in_progress', 9), 'closed')!, t('in_progress', 9))).toEqual({ task_id: 'abcdefgh', fence: 9, outcome: {} });
    const deferred = moveArgs({ op: 'task.defer', label: 'Defer a day', fenced: true }, t('in_progress', 2), new Date('2026-01-01T00:00:00Z'));
    expect(deferred.resume_at).toBe('2026-01-02T00:00:00.000Z');
  });
  it('tiles count what needs a person', () => {
    const out = tiles({ triage: 2, blocked: 1 });
    expect(out.find((x) => x.id === 'triage')?.count).toBe(2);
    expect(out.find((x) => x.id === 'failed')?.count).toBe(0);
  });
});

describe('a move shows at once in the cached lists', () => {
  const data = {
    pages: [{ tasks: [t('todo'), t('todo')].map((x, i) => (i ? { ...x, task_id: 'other001' } : x)), next_page_token: 'x' }, { tasks: [] }],
    pageParams: ['', 'x'],
  };
  it('takes the task out of the group it left', () => {
    const out = placeTask(data, { task_id: 'abcdefgh', status: 'in_progress', fence: 3 }, false);
    expect(out.pages[0]!.tasks.map((x) => x.task_id)).toEqual(['other001']);
    expect(out.pages[0]!.next_page_token).toBe('x');
  });
  it('puts it first in the group it entered, once', () => {
    const moved = { task_id: 'abcdefgh', status: 'in_progress', fence: 3 };
    const out = placeTask(data, moved, true);
    expect(out.pages[0]!.tasks[0]).toBe(moved);
    expect(out.pages[0]!.tasks.filter((x) => x.task_id === 'abcdefgh')).toHaveLength(1);
  });
});
