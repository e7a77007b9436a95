import { type InfiniteData, useInfiniteQuery, useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useParams } from 'react-router-dom';
import type { TaskGetResult, TaskListResult } from '@loom/sdk';
import { useScope } from '../lib/context';
import { ErrorNote } from '../lib/errors';
import { FALLBACK_POLL_MS, streamedInboxes, useTaskEvents } from '../lib/live';
import { atLeast, client } from '../lib/session';
import { readAgain } from '../lib/stale';
import {
  GROUPS,
  type Group,
  type GroupId,
  groupOf,
  inlineMoves,
  type Move,
  moveArgs,
  moveInto,
  placeTask,
  reachableGroups,
  tiles,
} from '../lib/tasks';
import { InboxSettings } from './InboxSettings';
import { TaskPanel } from './TaskPanel';

export type Task = TaskGetResult['task'] & object;

const PAGE = 50;

/** The fallback poll's interval: none while the page's streams are open. */
export function pollEvery(live: boolean): number | false {
  return live ? false : FALLBACK_POLL_MS;
}

export function useMoveTask() {
  const queryClient = useQueryClient();
  return useMutation({
    mutationFn: async ({ move, task }: { move: Move; task: Task }) => {
      // moveArgs builds exactly the op's arguments; the op name picks its argument type.
      return (await client.call(move.op, moveArgs(move, task) as never)) as { task?: Task };
    },
    onSuccess: (answer, { task }) => {
      const moved = answer?.task;
      if (moved) {
        queryClient.setQueryData(['task', task.task_id], { task: moved });
        // Show the move at once: the lists read a projection that follows within a moment.
        // A list's key is ['tasks', 'list', namespace, inbox filter, group].
        for (const [key, data] of queryClient.getQueriesData<InfiniteData<TaskListResult>>({ queryKey: ['tasks', 'list'] })) {
          if (!data) continue;
          const holds = key[4] === groupOf(moved.status) && (key[3] === '' || key[3] === moved.inbox);
          queryClient.setQueryData(key, placeTask(data, moved, holds));
        }
      }
      void readAgain(queryClient, ['tasks']);
      void readAgain(queryClient, ['task-history', task.task_id]);
    },
  });
}

export function TasksPage() {
  const { taskId } = useParams();
  const { namespace, role } = useScope();
  const [inbox, setInbox] = useState('');
  const [settingsOpen, setSettingsOpen] = useState(false);
  const [dragged, setDragged] = useState<Task | undefined>();
  const mover = useMoveTask();
  const inboxes = useQuery({ queryKey: ['tasks', 'inboxes', namespace], queryFn: () => client.call('inbox.list', {}) });
  // Live: the shown inboxes' event streams; the slow poll only while one is down or not streamed.
  const { streamed, complete } = streamedInboxes(inboxes.data?.inboxes ?? [], inbox);
  const streaming = useTaskEvents(namespace, streamed.map((i) => ({ inbox: i })));
  const live = streaming && complete;
  const counts = useQuery({
    queryKey: ['tasks', 'counts', namespace, inbox],
    queryFn: () => client.call('task.counts', inbox ? { inbox } : {}),
    refetchInterval: pollEvery(live),
  });
  const writer = atLeast(role, 'writer');
  const reachable = dragged ? reachableGroups(dragged) : undefined;
  const noInboxes = inboxes.data && inboxes.data.inboxes.length === 0;

  return (
    <section className="page tasks">
      <div className="page-head">
        <h1>Tasks</h1>
        <label>
          <span>Inbox</span>
          <select value={inbox} onChange={(e) => setInbox(e.target.value)}>
            <option value="">All inboxes of {namespace}</option>
            {inboxes.data?.inboxes.map((i) => (
              <option key={i.inbox} value={i.inbox}>
                {i.inbox}
              </option>
            ))}
          </select>
        </label>
        {atLeast(role, 'admin') && inbox ? (
          <button type="button" onClick={() => setSettingsOpen((v) => !v)} aria-expanded={settingsOpen}>
            Inbox settings
          </button>
        ) : null}
      </div>
      <ErrorNote error={inboxes.error} title="Could not list inboxes" />
      {noInboxes ? (
        <p className="empty">
          This namespace has no inbox yet. An admin registers one with <code>inbox.register</code> (see{' '}
          <Link to="/help?page=tasks.md">Help: tasks</Link>); agents then post tasks to it.
        </p>
      ) : null}
      {settingsOpen && inbox ? <InboxSettings inbox={inbox} onClose={() => setSettingsOpen(false)} /> : null}
      <ul className="tiles" aria-label="Needs a person">
        {tiles(counts.data?.counts ?? {}).map((t) => (
          <li key={t.id} className={t.count ? 'tile hot' : 'tile'}>
            <span className="tile-count">{counts.isPending ? '…' : t.count}</span>
            <span className="tile-label">{t.label}</span>
            <span className="tile-hint">{t.hint}</span>
          </li>
        ))}
      </ul>
      <ErrorNote error={counts.error} title="Could not count tasks" />
      <ErrorNote error={mover.error} title="The move was refused" />
      <div className={dragged ? 'groups dragging' : 'groups'}>
        {GROUPS.map((g) => (
          <GroupSection
            key={g.id}
            group={g}
            inbox={inbox}
            live={live}
            writer={writer}
            dimmed={reachable !== undefined && groupOf(dragged?.status ?? '') !== g.id && !reachable.has(g.id)}
            dragged={dragged}
            onDrag={setDragged}
            onDrop={(task, target) => {
              setDragged(undefined);
              const move = moveInto(task, target);
              if (move) mover.mutate({ move, task });
            }}
          />
        ))}
      </div>
      {taskId ? <TaskPanel taskId={taskId} inboxesFollowed={streaming ? streamed : []} /> : null}
    </section>
  );
}

function GroupSection(props: {
  group: Group;
  inbox: string;
  live: boolean;
  writer: boolean;
  dimmed: boolean;
  dragged: Task | undefined;
  onDrag: (t: Task | undefined) => void;
  onDrop: (t: Task, g: GroupId) => void;
}) {
  const { group, inbox, live, writer, dimmed, dragged, onDrag, onDrop } = props;
  const { namespace } = useScope();
  const [over, setOver] = useState(false);
  const list = useInfiniteQuery({
    queryKey: ['tasks', 'list', namespace, inbox, group.id],
    queryFn: ({ pageParam }) =>
      client.call('task.list', { inbox: inbox || undefined, status: group.statuses, limit: PAGE, page_token: pageParam || undefined }),
    initialPageParam: '',
    getNextPageParam: (last) => last.next_page_token || undefined,
    refetchInterval: pollEvery(live),
  });
  const tasks = list.data?.pages.flatMap((p) => p.tasks) ?? [];
  const headingId = `group-${group.id}`;
  const droppable = dragged !== undefined && !dimmed && groupOf(dragged.status) !== group.id;
  return (
    <section
      className={['group', dimmed ? 'dimmed' : '', over && droppable ? 'over' : ''].join(' ').trim()}
      aria-labelledby={headingId}
      data-group={group.id}
      aria-disabled={dimmed || undefined}
      onDragOver={(e) => {
        if (droppable) {
          e.preventDefault();
          e.dataTransfer.dropEffect = 'move';
          setOver(true);
        }
      }}
      onDragLeave={() => setOver(false)}
      onDrop={(e) => {
        e.preventDefault();
        setOver(false);
        if (dragged && droppable) onDrop(dragged, group.id);
      }}
    >
      <h2 id={headingId}>
        {group.label} <span className="count">{tasks.length}{list.hasNextPage ? '+' : ''}</span>
      </h2>
      <ErrorNote error={list.error} title={`Could not list ${group.label}`} />
      {list.isPending ? <p role="status">Loading…</p> : null}
      {list.data && tasks.length === 0 ? <p className="empty">{group.empty}</p> : null}
      <ul className="rows" aria-label={group.label}>
        {tasks.map((t) => (
          <TaskRow key={t.task_id} task={t} writer={writer} onDrag={onDrag} />
        ))}
      </ul>
      {list.hasNextPage ? (
        <button type="button" className="more" onClick={() => void list.fetchNextPage()} disabled={list.isFetchingNextPage}>
          {list.isFetchingNextPage ? 'Loading…' : 'Load more'}
        </button>
      ) : null}
    </section>
  );
}

function TaskRow({ task, writer, onDrag }: { task: Task; writer: boolean; onDrag: (t: Task | undefined) => void }) {
  const mover = useMoveTask();
  return (
    <li
      className={`row status-${task.status}`}
      draggable={writer}
      data-task-id={task.task_id}
      onDragStart={(e) => {
        e.dataTransfer.setData('text/plain', task.task_id);
        e.dataTransfer.effectAllowed = 'move';
        onDrag(task);
      }}
      onDragEnd={() => onDrag(undefined)}
    >
      <Link to={`/tasks/${task.task_id}`} className="row-title">
        {task.title || task.task_id}
      </Link>
      <span className="row-meta">
        <span className={`badge ${task.status}`}>{task.status.replace('_', ' ')}</span> {task.kind} · {task.inbox} · P
        {task.priority}
        {task.claimed_by && task.status === 'in_progress' ? ` · ${task.claimed_agent || task.claimed_by}` : ''}
      </span>
      {writer ? (
        <span className="row-actions">
          {inlineMoves(task).map((m) => (
            <button
              key={m.op}
              type="button"
              className={m.op === 'task.wont_do' ? 'secondary' : undefined}
              onClick={() => mover.mutate({ move: m, task })}
              disabled={mover.isPending}
            >
              {m.label}
            </button>
          ))}
        </span>
      ) : null}
      {mover.error ? <ErrorNote error={mover.error} /> : null}
    </li>
  );
}
