// Starters (spec 000 "Starters and cards"): one per read that answers a question about the
// namespace exactly. A starter's card is that read, made by the dashboard with the person's own
// session: gated on the read's own role, working while the assistant cannot answer, costing no
// model call. With "Also ask the model" on, the starter's question goes to the assistant too,
// naming the arguments the card was read with.

import type { ReactNode } from 'react';
import { Link } from 'react-router-dom';
import { client } from '../../../lib/session';
import { decisionHref } from '../../../pages/DecisionsPage';
import { helpHref } from '../../../shell/SearchBox';

export interface Starter {
  id: string;
  /** The button's words. */
  label: string;
  /** The question it asks, naming the card's arguments. */
  question: (args: Record<string, unknown>) => string;
  args: Record<string, unknown>;
  read: (args: Record<string, unknown>, namespace: string) => Promise<unknown[]>;
  /** The card's rows drawn; `namespace` is the one it was read in. */
  draw: (rows: unknown[]) => ReactNode;
  empty: string;
}

interface TaskRow {
  task_id: string;
  title: string;
  status: string;
  inbox: string;
}
interface DecisionRow {
  key: string;
  value: string;
  stage: string;
  outcome: string;
}
interface PolicyRow {
  time: string;
  operation: string;
  agent: string;
  subject: string;
  decision: string;
  rules: string[];
}
interface HelpRow {
  page: string;
  anchor: string;
  breadcrumb: string[];
  snippet: string;
}

const NEEDS_A_PERSON = ['triage', 'blocked'] as const;

export const STARTERS: Starter[] = [
  {
    id: 'tasks',
    label: 'Tasks that need a person',
    question: () => 'Which tasks in this namespace need a person (in triage or blocked), and what does each need?',
    args: { status: [...NEEDS_A_PERSON] },
    empty: 'No task waits for a person.',
    read: async (_args, namespace) => {
      const out = await client.call('task.list', { status: [...NEEDS_A_PERSON], limit: 20 }, { namespace });
      return out.tasks.map((t): TaskRow => ({ task_id: t.task_id, title: t.title, status: t.status, inbox: t.inbox }));
    },
    draw: (rows) => (
      <ul>
        {(rows as TaskRow[]).map((t) => (
          <li key={t.task_id}>
            <Link to={`/tasks/${encodeURIComponent(t.task_id)}`}>{t.title || t.task_id}</Link>{' '}
            <span className={`badge ${t.status}`}>{t.status}</span> <span className="muted">{t.inbox}</span>
          </li>
        ))}
      </ul>
    ),
  },
  {
    id: 'decisions',
    label: 'Recent decisions and outcomes',
    question: (a) => `What were the ${String(a.limit)} most recent decisions in this namespace, and how did each turn out?`,
    args: { limit: 8 },
    empty: 'No decision is recorded here yet.',
    read: async (args, namespace) => {
      const listed = await client.call('memory.list', { memory_type: 'decision', limit: Number(args.limit) }, { namespace });
      return Promise.all(
        listed.rows.map(async (r): Promise<DecisionRow> => {
          const chain = await client.call('decision.chain', { memory_key: r.key, direction: 'both', max_hops: 1 }, { namespace });
          const self = chain.nodes.find((n) => n.memory_key === r.key);
          return { key: r.key, value: r.value, stage: self?.stage ?? '', outcome: self?.realized_outcome ?? '' };
        }),
      );
    },
    draw: (rows) => (
      <ul>
        {(rows as DecisionRow[]).map((d) => (
          <li key={d.key}>
            <Link to={decisionHref(d.key)}>{d.key}</Link> <span className="muted">{d.stage}</span>
            <span className="snippet">{d.value}</span>
            <span className="snippet">{d.outcome ? `Outcome: ${d.outcome}` : 'No outcome recorded yet.'}</span>
          </li>
        ))}
      </ul>
    ),
  },
  {
    id: 'policy',
    label: 'What the policies refused',
    question: (a) => `What did the history policies refuse in this namespace in the last ${String(a.since)}, and by which rules?`,
    args: { since: '7d', decision: 'deny' },
    empty: 'The policies refused nothing in that time.',
    read: async (args, namespace) => {
      const out = await client.call('policy.decisions', { since: String(args.since), decision: 'deny', limit: 20 }, { namespace });
      return out.decisions.map(
        (d): PolicyRow => ({
          time: d.time,
          operation: d.operation,
          agent: d.agent,
          subject: d.subject,
          decision: d.decision,
          rules: d.determining_rules,
        }),
      );
    },
    draw: (rows) => (
      <ul>
        {(rows as PolicyRow[]).map((d, i) => (
          <li key={`${d.time}-${i}`}>
            <code>{d.operation}</code> by {d.agent || d.subject} <span className="muted">{new Date(d.time).toLocaleString()}</span>
            <span className="snippet">rules: {d.rules.join(', ') || '—'}</span>
          </li>
        ))}
      </ul>
    ),
  },
  {
    id: 'help',
    label: 'How tasks move (Help)',
    question: () => 'How does a task move from triage to done in Loom?',
    args: { query: 'task triage accept claim done' },
    empty: 'No section of the docs matches.',
    read: async (args) => {
      const out = await client.call('help.search', { query: String(args.query), limit: 5 });
      return out.hits.map((h): HelpRow => ({ page: h.page, anchor: h.anchor, breadcrumb: h.breadcrumb, snippet: h.snippet }));
    },
    draw: (rows) => (
      <ul>
        {(rows as HelpRow[]).map((h) => (
          <li key={`${h.page}#${h.anchor}`}>
            <Link to={helpHref(h.page, h.anchor)}>{h.breadcrumb.join(' › ')}</Link>
            <span className="snippet">{h.snippet}</span>
          </li>
        ))}
      </ul>
    ),
  },
];

export function starterById(id: string): Starter | undefined {
  return STARTERS.find((s) => s.id === id);
}
