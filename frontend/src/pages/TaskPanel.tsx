import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { LoomError } from '@loom/sdk';
import { useEffect, useRef, useState } from 'react';
import { useNavigate } from 'react-router-dom';
import { useScope } from '../lib/context';
import { ErrorNote } from '../lib/errors';
import { submitTo, TextField } from '../lib/forms';
import { atLeast, client } from '../lib/session';
import { useTaskEvents } from '../lib/live';
import { readAgain } from '../lib/stale';
import { panelMoves, UNFINISHED } from '../lib/tasks';
import { AskAboutThis } from '../views/assistant/AskAboutThis';
import { pollEvery, type Task, useMoveTask } from './TasksPage';

/**
 * The panel for one task (/tasks/<id>): its fields, edits under if_match_version, every move, its
 * history. It follows the task's events: through its inbox's stream when the page has that open
 * (`inboxesFollowed`), else on a stream of its own.
 */
export function TaskPanel({ taskId, inboxesFollowed }: { taskId: string; inboxesFollowed: readonly string[] }) {
  const { namespace, role } = useScope();
  const navigate = useNavigate();
  const heading = useRef<HTMLHeadingElement>(null);
  // Whether the task's events are followed (known once the task, and so its inbox, is read).
  const [live, setLive] = useState(false);
  const got = useQuery({
    queryKey: ['task', taskId],
    queryFn: () => client.call('task.get', { task_id: taskId }),
    refetchInterval: pollEvery(live),
  });
  const inbox = got.data?.task?.inbox;
  const viaInbox = inbox !== undefined && inboxesFollowed.includes(inbox);
  const ownStream = useTaskEvents(namespace, inbox === undefined || viaInbox ? [] : [{ task_id: taskId }]);
  const following = viaInbox || ownStream;
  useEffect(() => setLive(following), [following]);
  const history = useQuery({
    queryKey: ['task-history', taskId],
    queryFn: () => client.call('task.history', { task_id: taskId, limit: 100 }),
    refetchInterval: pollEvery(following),
  });
  const mover = useMoveTask();
  const task = got.data?.task;
  const writer = atLeast(role, 'writer');
  useEffect(() => heading.current?.focus(), [taskId]);
  const close = () => navigate('/tasks');

  return (
    <aside
      className="panel"
      aria-labelledby="task-panel-title"
      onKeyDown={(e) => {
        if (e.key === 'Escape') close();
      }}
    >
      <div className="panel-head">
        <h2 id="task-panel-title" tabIndex={-1} ref={heading}>
          {task ? task.title || task.task_id : 'Task'}
        </h2>
        <div className="panel-tools">
          <AskAboutThis page="Tasks" item={{ kind: 'task', taskId, title: task?.title }} />
          <button type="button" onClick={close} aria-label="Close task">
            ×
          </button>
        </div>
      </div>
      <ErrorNote error={got.error} title="Could not read the task" />
      {got.isPending ? <p role="status">Loading…</p> : null}
      {task ? (
        <>
          <dl className="facts">
            <dt>Status</dt>
            <dd data-testid="task-status">{task.status}</dd>
            <dt>Inbox</dt>
            <dd>{task.inbox}</dd>
            <dt>Kind</dt>
            <dd>{task.kind}</dd>
            <dt>Posted by</dt>
            <dd>
              {task.poster} {task.poster_agent ? `(${task.poster_agent})` : ''}
            </dd>
            {task.claimed_by ? (
              <>
                <dt>{task.status === 'in_progress' ? 'Held by' : 'Last held by'}</dt>
                <dd>
                  {task.claimed_by} ({task.claimed_agent})
                  {task.status === 'in_progress' && task.lease_expires_time
                    ? ` until ${new Date(task.lease_expires_time).toLocaleString()}`
                    : ''}
                </dd>
              </>
            ) : null}
            {task.reason ? (
              <>
                <dt>Reason</dt>
                <dd>{task.reason}</dd>
              </>
            ) : null}
            <dt>Version</dt>
            <dd>{task.version}</dd>
          </dl>
          {writer ? (
            <div className="moves" role="group" aria-label="Move this task">
              {panelMoves(task).map((m) => (
                <button
                  key={m.op}
                  type="button"
                  className={m.op === 'task.wont_do' || m.op === 'task.fail' ? 'secondary' : undefined}
                  onClick={() => mover.mutate({ move: m, task })}
                  disabled={mover.isPending}
                >
                  {m.label}
                </button>
              ))}
              {task.status === 'in_progress' && !task.fence ? (
                <p className="hint">Another holder works this task: only its holder can mark it done or fail it.</p>
              ) : null}
            </div>
          ) : null}
          <ErrorNote error={mover.error} title="The move was refused" />
          {writer && UNFINISHED.has(task.status) ? <EditForm task={task} /> : null}
          <h3>Brief</h3>
          <pre className="brief">{JSON.stringify(task.brief ?? {}, null, 2)}</pre>
          {task.outcome && Object.keys(task.outcome).length ? (
            <>
              <h3>Outcome</h3>
              <pre className="brief">{JSON.stringify(task.outcome, null, 2)}</pre>
            </>
          ) : null}
        </>
      ) : null}
      <h3>History</h3>
      <ErrorNote error={history.error} title="Could not read the history" />
      <ol className="history" aria-label="Task history">
        {history.data?.events.map((e) => (
          <li key={e.event_id || e.seq}>
            <span className="event-kind">{e.kind}</span> → {e.status}{' '}
            <span className="muted">
              {e.actor_agent || e.actor} · {e.at ? new Date(e.at).toLocaleString() : ''}
            </span>
            {e.reason ? <span className="muted"> · {e.reason}</span> : null}
          </li>
        ))}
      </ol>
    </aside>
  );
}

function EditForm({ task }: { task: Task }) {
  const queryClient = useQueryClient();
  const [title, setTitle] = useState(task.title);
  const [priority, setPriority] = useState(task.priority);
  const [base, setBase] = useState(task.version);
  const [stale, setStale] = useState(false);
  const dirty = title !== task.title || priority !== task.priority;
  useEffect(() => {
    // A move or another person's edit raised the version: follow it while nothing is typed.
    if (!dirty) setBase(task.version);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [task.version]);
  const save = useMutation({
    mutationFn: () => client.call('task.update', { task_id: task.task_id, if_match_version: base, title, priority }),
    onSuccess: (answer) => {
      setStale(false);
      setBase(answer.task?.version ?? base);
      queryClient.setQueryData(['task', task.task_id], answer);
      void readAgain(queryClient, ['tasks']);
    },
    onError: async (e) => {
      if (e instanceof LoomError && e.code === 'PRECONDITION_FAILED' && e.detail.reason === 'version') {
        // Someone changed the task since it was read: say so and load what it is now.
        setStale(true);
        const fresh = await queryClient.fetchQuery({
          queryKey: ['task', task.task_id],
          queryFn: () => client.call('task.get', { task_id: task.task_id }),
        });
        if (fresh.task) {
          setTitle(fresh.task.title);
          setPriority(fresh.task.priority);
          setBase(fresh.task.version);
        }
      }
    },
  });
  const submit = submitTo(() => save.mutate());
  return (
    <form className="edit" onSubmit={submit} aria-label="Edit task">
      <TextField label="Title" value={title} onValue={setTitle} maxLength={500} />
      <label>
        <span>Priority (1 most urgent … 5)</span>
        <input type="number" min={1} max={5} value={priority} onChange={(e) => setPriority(Number(e.target.value))} />
      </label>
      <button type="submit" disabled={save.isPending}>
        Save
      </button>
      {stale ? (
        <p role="alert" className="warn">
          This task changed since you opened it. It has been reloaded: check the fields and save again.
        </p>
      ) : (
        <ErrorNote error={save.error} title="Could not save" />
      )}
    </form>
  );
}
