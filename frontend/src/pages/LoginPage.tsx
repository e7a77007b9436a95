import { useQueryClient } from '@tanstack/react-query';
import { useEffect, useRef, useState } from 'react';
import { Link, useNavigate } from 'react-router-dom';
import { ErrorNote } from '../lib/errors';
import { login } from '../lib/session';

function codeFromHash(): string {
  return new URLSearchParams(window.location.hash.replace(/^#/, '')).get('code') ?? '';
}

/** /login#code=…: the one-time link an admin made; posting the code opens the session. */
export function LoginPage() {
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  const [error, setError] = useState<unknown>();
  const started = useRef(false);
  const code = useRef(codeFromHash());

  useEffect(() => {
    if (started.current || !code.current) return;
    started.current = true;
    // The code is single use: take it out of the address bar and history at once.
    window.history.replaceState(null, '', '/login');
    login(code.current)
      .then((session) => {
        queryClient.setQueryData(['session'], session);
        navigate('/tasks', { replace: true });
      })
      .catch(setError);
  }, [navigate, queryClient]);

  return (
    <main className="page narrow">
      <h1>Sign in to Loom</h1>
      {!code.current ? (
        <SignInHelp />
      ) : error ? (
        <>
          <ErrorNote error={error} title="This sign-in link did not work" />
          <p>A link works once and for 15 minutes. Ask an admin for a new one.</p>
          <SignInHelp />
        </>
      ) : (
        <p role="status">Signing you in…</p>
      )}
    </main>
  );
}

function SignInHelp() {
  return (
    <>
      <p>People sign in with a one-time link an admin makes:</p>
      <pre>
        <code>loom admin login-link --org ORG --subject user:you</code>
      </pre>
      <p>
        Open the link it prints in this browser. See <Link to="/help?page=dashboard.md">the dashboard guide</Link> once signed
        in.
      </p>
    </>
  );
}

/** Any page while nobody is signed in (or the session ended). */
export function SignedOut() {
  const queryClient = useQueryClient();
  // Nothing the last session read stays behind (its pages are unmounted by now).
  useEffect(() => queryClient.removeQueries({ predicate: (q) => q.queryKey[0] !== 'session' }), [queryClient]);
  return (
    <main className="page narrow">
      <h1>Sign in to Loom</h1>
      <p>You are not signed in, or your session ended.</p>
      <SignInHelp />
    </main>
  );
}
