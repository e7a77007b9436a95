import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query';
import { useState } from 'react';
import type { InboxListResult, InboxRegisterArgs } from '@loom/sdk';
import { useScope } from '../lib/context';
import { ErrorNote } from '../lib/errors';
import { submitTo, TextField } from '../lib/forms';
import { client } from '../lib/session';
import { readAgain } from '../lib/stale';

type Inbox = InboxListResult['inboxes'][number];

/** Inbox settings (admins): posters picked from the identities Loom knows in the org (inbox.principals). */
export function InboxSettings({ inbox, onClose }: { inbox: string; onClose: () => void }) {
  const { namespace } = useScope();
  const list = useQuery({ queryKey: ['tasks', 'inboxes', namespace], queryFn: () => client.call('inbox.list', {}) });
  const row = list.data?.inboxes.find((i) => i.inbox === inbox);
  return (
    <section className="card" aria-label={`Settings of inbox ${inbox}`}>
      <h2>Inbox settings: {inbox}</h2>
      <ErrorNote error={list.error} />
      {row ? <SettingsForm row={row} onClose={onClose} /> : list.isPending ? <p role="status">Loading…</p> : null}
    </section>
  );
}

function SettingsForm({ row, onClose }: { row: Inbox; onClose: () => void }) {
  const queryClient = useQueryClient();
  const principals = useQuery({ queryKey: ['inbox.principals'], queryFn: () => client.call('inbox.principals', {}) });
  const [posters, setPosters] = useState<Set<string>>(new Set(row.posters));
  const [description, setDescription] = useState(row.description);
  const save = useMutation({
    // Re-registering sets every field: send the row's own values for all but what was edited.
    mutationFn: () =>
      client.call('inbox.register', {
        inbox: row.inbox,
        owner_agent: row.owner_agent,
        posters: [...posters].sort(),
        // inbox.list answers the levels as strings; they are the ones register takes.
        accept_disclosure: row.accept_disclosure as InboxRegisterArgs['accept_disclosure'],
        default_lease_seconds: row.default_lease_seconds,
        max_attempts: row.max_attempts,
        max_defers: row.max_defers,
        triage_escalate_after_seconds: row.triage_escalate_after_seconds,
        webhook_url: row.webhook_url,
        webhook_secret_ref: row.webhook_secret_ref,
        description,
      }),
    onSuccess: () => {
      void readAgain(queryClient, ['tasks', 'inboxes']);
      onClose();
    },
  });
  const known = [...new Set([...(principals.data?.principals.map((p) => p.subject) ?? []), ...row.posters])].sort();
  const submit = submitTo(() => save.mutate());
  return (
    <form onSubmit={submit}>
      <fieldset>
        <legend>Posters (who may post tasks here)</legend>
        <ErrorNote error={principals.error} title="Could not list the org's identities" />
        {principals.isPending ? <p role="status">Loading identities…</p> : null}
        {known.length === 0 && principals.data ? <p className="empty">Loom knows no identity in this org yet.</p> : null}
        {known.map((subject) => (
          <label key={subject} className="check">
            <input
              type="checkbox"
              checked={posters.has(subject)}
              onChange={(e) => {
                const next = new Set(posters);
                if (e.target.checked) next.add(subject);
                else next.delete(subject);
                setPosters(next);
              }}
            />
            {subject}
          </label>
        ))}
      </fieldset>
      <TextField label="Description" value={description} onValue={setDescription} />
      <button type="submit" disabled={save.isPending}>
        Save settings
      </button>
      <button type="button" onClick={onClose}>
        Cancel
      </button>
      <ErrorNote error={save.error} title="Could not save the inbox" />
    </form>
  );
}
