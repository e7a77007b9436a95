import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import { Link, useParams } from 'react-router-dom';
import { useScope } from '../lib/context';
import { ErrorNote } from '../lib/errors';
import { submitTo, TextField } from '../lib/forms';
import { atLeast, client } from '../lib/session';
import { readAgain } from '../lib/stale';
import { useDebounced } from '../shell/SearchBox';
import { AskAboutThis } from '../views/assistant/AskAboutThis';

export function decisionHref(key: string): string {
  return `/decisions/${encodeURIComponent(key)}`;
}

export function DecisionsPage() {
  const { key } = useParams();
  return key ? <DecisionDetail memoryKey={decodeURIComponent(key)} /> : <DecisionList />;
}

function DecisionList() {
  const { namespace } = useScope();
  const [text, setText] = useState('');
  const [limit, setLimit] = useState(50);
  const query = useDebounced(text.trim(), 300);
  const found = useQuery({
    queryKey: ['decision.precedents', namespace, query],
    queryFn: () => client.call('decision.precedents', { query, limit: 25 }),
    enabled: query.length > 0,
  });
  const recent = useQuery({
    queryKey: ['memory.list', namespace, 'decision', limit],
    queryFn: () => client.call('memory.list', { memory_type: 'decision', limit }),
    enabled: query.length === 0,
  });
  return (
    <section className="page">
      <h1>Decisions</h1>
      <label className="wide">
        <span>Find decisions like…</span>
        <input type="search" value={text} onChange={(e) => setText(e.target.value)} placeholder="a scenario, a vendor, a choice" />
      </label>
      {query ? (
        <>
          {found.isPending ? <p role="status">Searching…</p> : null}
          <ErrorNote error={found.error} title="Search failed" />
          {found.data && found.data.precedents.length === 0 ? <p className="empty">No decision like that. Try other words.</p> : null}
          <ul className="cards" aria-label="Matching decisions">
            {found.data?.precedents.map((p) => (
              <li key={p.memory_key} className="card">
                <Link to={decisionHref(p.memory_key)}>{p.scenario || p.memory_key}</Link>
                <p>{p.statement}</p>
                <p className="muted">
                  {p.stage} · {p.category} · score {p.score.toFixed(2)}
                  {p.realized_outcome ? ` · realized: ${p.realized_outcome}` : ''}
                </p>
              </li>
            ))}
          </ul>
        </>
      ) : (
        <>
          <ErrorNote error={recent.error} title="Could not list decisions" />
          {recent.isPending ? <p role="status">Loading…</p> : null}
          {recent.data && recent.data.rows.length === 0 ? (
            <p className="empty">
              No decisions in {namespace} yet. Agents record them with <code>decision.record</code> (see{' '}
              <Link to="/help?page=decisions.md">Help: decisions</Link>).
            </p>
          ) : null}
          <ul className="cards" aria-label="Decisions">
            {recent.data?.rows.map((r) => (
              <li key={r.key} className="card">
                <Link to={decisionHref(r.key)}>{r.key}</Link>
                <p>{r.value}</p>
              </li>
            ))}
          </ul>
          {recent.data && recent.data.rows.length >= limit ? (
            <button type="button" onClick={() => setLimit((l) => l + 50)}>
              Show more
            </button>
          ) : null}
        </>
      )}
    </section>
  );
}

function DecisionDetail({ memoryKey }: { memoryKey: string }) {
  const { namespace, role } = useScope();
  const row = useQuery({ queryKey: ['memory.get', namespace, memoryKey], queryFn: () => client.call('memory.get', { memory_key: memoryKey }) });
  const chain = useQuery({
    queryKey: ['decision.chain', namespace, memoryKey],
    queryFn: () => client.call('decision.chain', { memory_key: memoryKey, direction: 'both', max_hops: 4 }),
  });
  const versions = useQuery({
    queryKey: ['memory.history', namespace, memoryKey],
    queryFn: () => client.call('memory.history', { memory_key: memoryKey }),
  });
  const superseded = (versions.data?.versions ?? []).filter((v) => v.version !== row.data?.version);
  const self = chain.data?.nodes.find((n) => n.memory_key === memoryKey);
  const scenario = self?.scenario ?? '';
  // Decisions like this one: searched by its scenario, else by its statement's opening.
  const like = (scenario || row.data?.value || '').slice(0, 500);
  const precedents = useQuery({
    queryKey: ['decision.precedents', namespace, 'like', memoryKey],
    queryFn: () => client.call('decision.precedents', { query: like, limit: 10 }),
    enabled: like.length > 0,
  });
  const others = (precedents.data?.precedents ?? []).filter((p) => p.memory_key !== memoryKey);
  return (
    <section className="page">
      <p>
        <Link to="/decisions">← All decisions</Link>
      </p>
      <h1>{scenario || (row.data ? memoryKey : 'Decision')}</h1>
      <p className="muted">
        <code>{memoryKey}</code>
        {self ? ` · ${self.stage} · ${self.category}` : ''}
      </p>
      <AskAboutThis page="Decisions" item={{ kind: 'decision', key: memoryKey }} />
      <ErrorNote error={row.error} title="Could not read the decision" />
      {row.data ? (
        <section aria-labelledby="statement-title">
          <h2 id="statement-title">Statement</h2>
          <p className="statement">{row.data.value}</p>
          <p className="muted">
            version {row.data.version} · {row.data.agent_id} · {row.data.updated_time}
          </p>
        </section>
      ) : null}
      <section aria-labelledby="outcome-title">
        <h2 id="outcome-title">Outcome</h2>
        {self?.realized_outcome ? <p>Realized: {self.realized_outcome}</p> : <p className="muted">No outcome recorded yet.</p>}
        {atLeast(role, 'writer') ? <OutcomeForm memoryKey={memoryKey} /> : null}
      </section>
      <section aria-labelledby="chain-title">
        <h2 id="chain-title">Chain</h2>
        <ErrorNote error={chain.error} title="Could not walk the chain" />
        {chain.isPending ? <p role="status">Walking the chain…</p> : null}
        {chain.data && chain.data.edges.length === 0 ? <p className="empty">No causes, effects or superseded decisions linked.</p> : null}
        <ul aria-label="Chain">
          {chain.data?.edges.map((e) => (
            <li key={`${e.from_key}-${e.kind}-${e.to_key}`}>
              {/* An edge runs from the cause to the decision it caused or influenced. */}
              <NodeLink k={e.to_key} current={memoryKey} /> <span className="muted">{e.kind.replace('_', ' ')}</span>{' '}
              <NodeLink k={e.from_key} current={memoryKey} />
            </li>
          ))}
        </ul>
      </section>
      <section aria-labelledby="superseded-title">
        <h2 id="superseded-title">Superseded versions</h2>
        <ErrorNote error={versions.error} title="Could not read the versions" />
        {versions.data && superseded.length === 0 ? <p className="empty">This is the first version of the decision.</p> : null}
        <ol aria-label="Superseded versions">
          {superseded.map((v) => (
            <li key={v.version}>
              <span className="muted">
                version {v.version} · {v.status} ·{' '}
              </span>
              {v.value}
            </li>
          ))}
        </ol>
      </section>
      <section aria-labelledby="precedents-title">
        <h2 id="precedents-title">Precedents</h2>
        <ErrorNote error={precedents.error} title="Could not search precedents" />
        {precedents.isFetching && !precedents.data ? <p role="status">Searching…</p> : null}
        {precedents.data && others.length === 0 ? <p className="empty">No similar decision.</p> : null}
        <ul aria-label="Precedents">
          {others.map((p) => (
            <li key={p.memory_key}>
              <Link to={decisionHref(p.memory_key)}>{p.scenario || p.memory_key}</Link>{' '}
              <span className="muted">
                {p.outcome} · {p.stage}
              </span>
            </li>
          ))}
        </ul>
      </section>
    </section>
  );
}

function NodeLink({ k, current }: { k: string; current: string }) {
  return k === current ? <strong>{k}</strong> : <Link to={decisionHref(k)}>{k}</Link>;
}

function OutcomeForm({ memoryKey }: { memoryKey: string }) {
  const queryClient = useQueryClient();
  const [text, setText] = useState('');
  const [success, setSuccess] = useState(true);
  const record = useMutation({
    mutationFn: () => client.call('decision.outcome', { memory_key: memoryKey, realized_outcome: text, success }),
    onSuccess: () => {
      setText('');
      void readAgain(queryClient, ['decision.chain']);
      void readAgain(queryClient, ['memory.get']);
    },
  });
  const submit = submitTo(() => record.mutate());
  return (
    <form className="inline-form" onSubmit={submit} aria-label="Record the outcome">
      <TextField label="What happened" value={text} onValue={setText} required maxLength={2000} />
      <label className="check">
        <input type="checkbox" checked={success} onChange={(e) => setSuccess(e.target.checked)} /> It worked
      </label>
      <button type="submit" disabled={record.isPending}>
        Record outcome
      </button>
      <ErrorNote error={record.error} title="Could not record" />
    </form>
  );
}
