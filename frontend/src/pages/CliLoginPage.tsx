import { useMutation } from '@tanstack/react-query';
import { useState } from 'react';
import { ErrorNote } from '../lib/errors';
import { useScope } from '../lib/context';
import { approveCli } from '../lib/session';

/** /cli-login#code=…: `loom login` waits until the signed-in person approves its request here. */
export function CliLoginPage() {
  const { session } = useScope();
  const [code] = useState(() => new URLSearchParams(window.location.hash.replace(/^#/, '')).get('code') ?? '');
  const approve = useMutation({ mutationFn: () => approveCli(code) });
  return (
    <section className="page narrow">
      <h1>Approve a command-line sign-in</h1>
      {!code ? (
        <p>This page needs the link `loom login` printed (it ends in #code=…). Run `loom login` again and open its link.</p>
      ) : approve.isSuccess ? (
        <p role="status">Approved. Return to your terminal: `loom login` has its credential.</p>
      ) : (
        <>
          <p>
            A `loom login` on a command line asks to act as <strong>{session.subject}</strong> in {session.org}, with your
            grants. Approve it only if you just ran it.
          </p>
          <p>
            Request code: <code>{code.slice(0, 8)}…</code>
          </p>
          <button type="button" onClick={() => approve.mutate()} disabled={approve.isPending}>
            Approve
          </button>
          <ErrorNote error={approve.error} title="Could not approve" />
        </>
      )}
    </section>
  );
}
