import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { LoomError, type PolicyCondition, type PolicyListResult } from '@loom/sdk';
import { type FormEvent, useState } from 'react';
import { useScope } from '../lib/context';
import { ErrorNote } from '../lib/errors';
import { submitTo, TextField } from '../lib/forms';
import { atLeast, client } from '../lib/session';
import { readAgain } from '../lib/stale';
import { ColumnHeads } from '../lib/table';

type Rule = PolicyListResult['rules'][number];

const EXAMPLE_CONDITION = JSON.stringify({ op: 'count_within', within: '1h', operation: 'task.create', cmp: 'gte', value: 100 }, null, 2);

/** What the deployment's mode means for the rules, in words; `refuses` false warns. */
export function modeNote(mode: string): { refuses: boolean; text: string } {
  switch (mode) {
    case 'enforce':
      return { refuses: true, text: 'Rules refuse calls. A rule set to shadow only logs its decisions.' };
    case 'shadow':
      return {
        refuses: false,
        text: 'Rules will not refuse: each decision is logged to the ledger and nothing is blocked, except by a rule set to enforce.',
      };
    default:
      return {
        refuses: false,
        text: 'Rules will not refuse: the gate is off (LOOM_POLICY_MODE=off). Rules are stored, checked and replayed, but no call is gated or logged.',
      };
  }
}

export function PoliciesPage() {
  const { role, namespace } = useScope();
  const rules = useQuery({ queryKey: ['policy.list', namespace], queryFn: () => client.call('policy.list', {}) });
  const [editing, setEditing] = useState<Rule | 'new' | undefined>();
  if (!atLeast(role, 'admin')) {
    return (
      <section className="page">
        <h1>Policies</h1>
        <p>Policies are managed by the namespace's admins. Ask an admin of {namespace} for access.</p>
      </section>
    );
  }
  const mode = rules.data?.mode ?? '';
  const note = modeNote(mode);
  return (
    <section className="page policies">
      <h1>Policies</h1>
      {rules.data ? (
        <div className={note.refuses ? 'mode-banner' : 'mode-banner warn'} role={note.refuses ? 'status' : 'alert'}>
          <span className="mode-label">
            Mode in effect: <strong data-testid="policy-mode">{mode}</strong>
          </span>
          <span>{note.text}</span>
        </div>
      ) : null}
      <ErrorNote error={rules.error} title="Could not list rules" />
      <div className="section-head">
        <h2>Rules</h2>
        <button type="button" onClick={() => setEditing('new')}>
          New rule
        </button>
      </div>
      {editing ? <RuleForm rule={editing === 'new' ? undefined : editing} onDone={() => setEditing(undefined)} /> : null}
      {rules.data && rules.data.rules.length === 0 ? (
        <p className="empty">No rules in {namespace}. Create one with New rule, dry-run it below, then replay it over the ledger.</p>
      ) : null}
      {rules.data && rules.data.rules.length ? <RulesTable rules={rules.data.rules} mode={mode} onEdit={setEditing} /> : null}
      <DryRun />
      <Replay />
      <Ledger />
    </section>
  );
}

function RulesTable({ rules, mode, onEdit }: { rules: Rule[]; mode: string; onEdit: (r: Rule) => void }) {
  const queryClient = useQueryClient();
  const remove = useMutation({
    mutationFn: (name: string) => client.call('policy.delete', { name }),
    onSuccess: () => void readAgain(queryClient, ['policy.list']),
  });
  return (
    <div className="table-wrap">
      <table aria-label="Rules">
        <ColumnHeads
          names={['Name', 'Effect', 'Actions', 'Mode', 'Leaves', 'Updated by', <span className="visually-hidden">Edit or delete</span>]}
        />
        <tbody>
          {rules.map((r) => (
            <tr key={r.name}>
              <th scope="row">
                {r.name}
                {r.broken ? <span className="badge failed"> broken: {r.broken_reason}</span> : null}
                {r.description ? <div className="muted">{r.description}</div> : null}
              </th>
              <td>{r.effect}</td>
              <td>{r.actions.join(', ')}</td>
              <td>
                {r.mode}
                {r.mode === 'inherit' ? <span className="muted"> ({mode})</span> : null}
              </td>
              <td>{r.leaf_count}</td>
              <td>{r.updated_by}</td>
              <td>
                <button type="button" onClick={() => onEdit(r)}>
                  Edit
                </button>{' '}
                <button
                  type="button"
                  onClick={() => {
                    if (window.confirm(`Delete rule ${r.name}?`)) remove.mutate(r.name);
                  }}
                >
                  Delete
                </button>
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      <ErrorNote error={remove.error} title="Could not delete" />
    </div>
  );
}

/** The form field a server refusal names (its detail.field's first part), for showing it inline. */
function fieldOf(e: unknown): string | undefined {
  if (!(e instanceof LoomError)) return undefined;
  const field = e.detail.field;
  return typeof field === 'string' ? field.split(/[.[]/, 1)[0] : undefined;
}

function RuleForm({ rule, onDone }: { rule: Rule | undefined; onDone: () => void }) {
  const queryClient = useQueryClient();
  const [name, setName] = useState(rule?.name ?? '');
  const [effect, setEffect] = useState<'forbid' | 'require'>((rule?.effect as 'forbid' | 'require') ?? 'forbid');
  const [actions, setActions] = useState(rule?.actions.join(', ') ?? '');
  const [mode, setMode] = useState<'inherit' | 'shadow' | 'enforce'>((rule?.mode as 'inherit') ?? 'inherit');
  const [description, setDescription] = useState(rule?.description ?? '');
  const [condition, setCondition] = useState(rule ? JSON.stringify(rule.condition, null, 2) : EXAMPLE_CONDITION);
  const [jsonError, setJsonError] = useState('');
  const save = useMutation({
    mutationFn: (cond: PolicyCondition) =>
      client.call('policy.set', {
        name: name.trim(),
        effect,
        actions: actions
          .split(/[\s,]+/)
          .map((a) => a.trim())
          .filter(Boolean),
        condition: cond,
        description,
        mode,
      }),
    onSuccess: () => {
      void readAgain(queryClient, ['policy.list']);
      onDone();
    },
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    let cond: PolicyCondition;
    try {
      cond = JSON.parse(condition) as PolicyCondition;
      setJsonError('');
    } catch (err) {
      setJsonError(`Not JSON: ${(err as Error).message}`);
      return;
    }
    save.mutate(cond);
  };
  const bad = fieldOf(save.error);
  const inline = (field: string) =>
    bad === field && save.error ? (
      <span className="field-error" role="alert" id={`err-${field}`}>
        {(save.error as Error).message} <code>{(save.error as LoomError).code}</code>
      </span>
    ) : null;
  return (
    <form className="card rule-form" onSubmit={submit} aria-label={rule ? `Edit rule ${rule.name}` : 'New rule'}>
      <h3>{rule ? `Edit ${rule.name}` : 'New rule'}</h3>
      <TextField label="Name" value={name} onValue={setName} readOnly={!!rule} aria-invalid={bad === 'name'} aria-describedby={bad === 'name' ? 'err-name' : undefined} required />
      {inline('name')}
      <label>
        <span>Effect</span>
        <select value={effect} onChange={(e) => setEffect(e.target.value as 'forbid')}>
          <option value="forbid">forbid: deny when the condition holds</option>
          <option value="require">require: deny when it does not</option>
        </select>
      </label>
      {inline('effect')}
      <TextField label="Actions (op names or globs, comma separated)" value={actions} onValue={setActions} aria-invalid={bad === 'actions'} aria-describedby={bad === 'actions' ? 'err-actions' : undefined} placeholder="task.create" />
      {inline('actions')}
      <label>
        <span>Rule mode</span>
        <select value={mode} onChange={(e) => setMode(e.target.value as 'inherit')}>
          <option value="inherit">inherit (the deployment's)</option>
          <option value="shadow">shadow (log only)</option>
          <option value="enforce">enforce (refuse)</option>
        </select>
      </label>
      {inline('mode')}
      <label>
        <span>Condition (JSON)</span>
        <textarea rows={8} value={condition} onChange={(e) => setCondition(e.target.value)} aria-invalid={!!jsonError || bad === 'condition'}
          aria-describedby={jsonError ? 'err-condition-json' : bad === 'condition' ? 'err-condition' : undefined}
          spellCheck={false}
        />
      </label>
      {jsonError ? (
        <span className="field-error" role="alert" id="err-condition-json">
          {jsonError}
        </span>
      ) : null}
      {inline('condition')}
      <TextField label="Description" value={description} onValue={setDescription} />
      <button type="submit" disabled={save.isPending}>
        Save rule
      </button>{' '}
      <button type="button" onClick={onDone}>
        Cancel
      </button>
      {save.error && !bad ? <ErrorNote error={save.error} title="Could not save" /> : null}
      {save.data?.warnings?.length ? <p className="warn">{save.data.warnings.join(' ')}</p> : null}
    </form>
  );
}

function DryRun() {
  const [operation, setOperation] = useState('task.create');
  const [agent, setAgent] = useState('');
  const [args, setArgs] = useState('{}');
  const [argsError, setArgsError] = useState('');
  const check = useMutation({
    mutationFn: (parsed: Record<string, unknown>) => client.call('policy.check', { operation, agent: agent || undefined, args: parsed }),
  });
  const submit = (e: FormEvent) => {
    e.preventDefault();
    try {
      const parsed = JSON.parse(args || '{}') as Record<string, unknown>;
      setArgsError('');
      check.mutate(parsed);
    } catch (err) {
      setArgsError(`Not JSON: ${(err as Error).message}`);
    }
  };
  const verdict = check.data;
  return (
    <section className="card" aria-labelledby="dry-run-title">
      <h2 id="dry-run-title">Dry run</h2>
      <p className="muted">Ask what the stored rules decide for a call, as you (policy.check); nothing runs.</p>
      <form onSubmit={submit} className="inline-form">
        <TextField label="Operation" value={operation} onValue={setOperation} required />
        <TextField label="Agent label" value={agent} onValue={setAgent} placeholder="(none)" />
        <TextField label="Arguments (JSON)" value={args} onValue={setArgs} aria-invalid={!!argsError} aria-describedby="err-args" />
        {argsError ? (
          <span className="field-error" role="alert" id="err-args">
            {argsError}
          </span>
        ) : null}
        <button type="submit" disabled={check.isPending}>
          Check
        </button>
      </form>
      <ErrorNote error={check.error} title="Check failed" />
      {verdict ? (
        <div className={verdict.decision === 'deny' ? 'verdict deny' : 'verdict allow'} role="status" data-testid="dry-run-verdict">
          <strong>{verdict.decision === 'deny' ? 'Refused' : 'Allowed'}</strong> ({verdict.decision}
          {verdict.would_enforce ? ', enforced in this mode' : ', not enforced in this mode'})
          {verdict.determining_rules.length ? <> by {verdict.determining_rules.join(', ')}</> : null}
          {verdict.errors.length ? <p className="warn">{verdict.errors.map((x) => `${x.rule} ${x.path}: ${x.message}`).join('; ')}</p> : null}
        </div>
      ) : null}
    </section>
  );
}

function Replay() {
  const [since, setSince] = useState('');
  const replay = useMutation({
    mutationFn: () => client.call('policy.replay', { include_stored: true, since: since || undefined, limit: 200 }),
  });
  const totals = replay.data?.totals;
  return (
    <section className="card" aria-labelledby="replay-title">
      <h2 id="replay-title">Replay</h2>
      <p className="muted">What the stored rules would have decided over the calls the ledger recorded (policy.replay).</p>
      <form
        className="inline-form"
        onSubmit={submitTo(() => replay.mutate())}
      >
        <TextField label="Since (RFC 3339, optional)" value={since} onValue={setSince} placeholder="2026-01-01T00:00:00Z" />
        <button type="submit" disabled={replay.isPending}>
          {replay.isPending ? 'Replaying…' : 'Replay'}
        </button>
      </form>
      <ErrorNote error={replay.error} title="Replay failed" />
      {totals ? (
        <p role="status">
          {totals.calls} calls, {totals.evaluated} evaluated: {totals.allowed} allowed, {totals.denied} denied ({totals.newly_denied}{' '}
          newly), {totals.errors} errors{replay.data?.truncated ? ' (cut at the limit)' : ''}.
        </p>
      ) : null}
      {replay.data && replay.data.calls.length ? (
        <div className="table-wrap">
          <table aria-label="Replayed calls">
            <ColumnHeads names={['Time', 'Operation', 'Agent', 'Decision', 'Rules']} />
            <tbody>
              {replay.data.calls.map((c) => (
                <tr key={`${c.request_id}-${c.time}`}>
                  <td>{c.time}</td>
                  <td>{c.operation}</td>
                  <td>{c.agent}</td>
                  <td>{c.decision}</td>
                  <td>{c.determining_rules.join(', ')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </section>
  );
}

function Ledger() {
  const { namespace } = useScope();
  const [decision, setDecision] = useState<'' | 'allow' | 'deny'>('');
  const [limit, setLimit] = useState(50);
  const ledger = useQuery({
    queryKey: ['policy.decisions', namespace, decision, limit],
    queryFn: () => client.call('policy.decisions', { decision: decision || undefined, limit }),
  });
  const rows = ledger.data?.decisions ?? [];
  return (
    <section className="card" aria-labelledby="ledger-title">
      <h2 id="ledger-title">Decisions ledger</h2>
      <label>
        <span>Show</span>
        <select value={decision} onChange={(e) => setDecision(e.target.value as '' | 'allow' | 'deny')}>
          <option value="">all</option>
          <option value="deny">deny</option>
          <option value="allow">allow</option>
        </select>
      </label>
      <ErrorNote error={ledger.error} title="Could not read the ledger" />
      {ledger.data && rows.length === 0 ? (
        <p className="empty">No decisions recorded. The ledger fills when the mode is shadow or enforce and a rule applies to a call.</p>
      ) : null}
      {rows.length ? (
        <div className="table-wrap">
          <table aria-label="Policy decisions">
            <ColumnHeads names={['Time', 'Operation', 'Subject / agent', 'Decision', 'Enforced', 'Rules']} />
            <tbody>
              {rows.map((d) => (
                <tr key={`${d.request_id}-${d.time}`}>
                  <td>{d.time}</td>
                  <td>{d.operation}</td>
                  <td>
                    {d.subject} {d.agent ? `/ ${d.agent}` : ''}
                  </td>
                  <td>{d.decision}</td>
                  <td>{d.enforced ? 'yes' : 'no'}</td>
                  <td>{d.determining_rules.join(', ')}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
      {rows.length >= limit ? (
        <button type="button" onClick={() => setLimit((l) => l + 50)}>
          Show more
        </button>
      ) : null}
    </section>
  );
}
