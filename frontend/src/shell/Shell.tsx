import { useQuery, useQueryClient } from '@tanstack/react-query';
import { type ReactNode, useEffect, useMemo, useState } from 'react';
import { NavLink, useNavigate } from 'react-router-dom';
import { ErrorNote } from '../lib/errors';
import { ScopeContext } from '../lib/context';
import { atLeast, client, logout, roleOn, type Session, setNamespace as setClientNamespace, setSession } from '../lib/session';
import { AssistantPanel } from '../views/assistant/AssistantPanel';
import { ownerOf } from '../views/assistant/storage';
import { chat, useChat } from '../views/assistant/store';
import { SearchBox } from './SearchBox';

const NS_KEY = 'loom.namespace';

function firstNamespace(names: string[]): string {
  const saved = window.localStorage.getItem(NS_KEY);
  if (saved && names.includes(saved)) return saved;
  return names[0] ?? '';
}

export function Shell({ session, children }: { session: Session; children: ReactNode }) {
  const queryClient = useQueryClient();
  const navigate = useNavigate();
  // Every call this shell's pages make carries this session's CSRF token.
  setSession(session);
  const orgWide = session.namespaces.some((n) => n.namespace === '*');
  // An org-wide grant names no namespace: the org's namespaces come from namespace.list.
  const listed = useQuery({
    queryKey: ['namespace.list', session.session_id],
    queryFn: () => client.call('namespace.list', {}),
    enabled: orgWide,
  });
  const names = useMemo(() => {
    const own = session.namespaces.map((n) => n.namespace).filter((n) => n !== '*');
    const more = listed.data?.namespaces?.map((n) => n.name) ?? [];
    return [...new Set([...own, ...more])].sort();
  }, [session, listed.data]);
  const [namespace, setNamespace] = useState(() => firstNamespace(names));
  useEffect(() => {
    if (!namespace && names.length) setNamespace(firstNamespace(names));
  }, [names, namespace, session]);
  setClientNamespace(namespace || undefined);
  const role = roleOn(session, namespace);
  const [signOutError, setSignOutError] = useState<unknown>();
  const assistant = useChat();
  // This person's kept conversations; another person's, left in this browser, are deleted.
  useEffect(() => chat.bind(ownerOf(session)), [session]);

  const choose = (ns: string) => {
    window.localStorage.setItem(NS_KEY, ns);
    setClientNamespace(ns);
    setNamespace(ns);
  };

  const signOut = async () => {
    try {
      await logout();
      // Sign-out deletes the conversations this browser keeps (and stops any answer).
      chat.signOut();
      setSession(undefined);
      // The signed-out page empties the cache once these pages are gone: one still mounted when
      // the cache is emptied would read its queries again on its next render and meet 401s.
      queryClient.setQueryData(['session'], null);
      navigate('/', { replace: true });
    } catch (e) {
      setSignOutError(e);
    }
  };

  return (
    <ScopeContext.Provider value={{ session, namespace, role, setNamespace: choose }}>
      <a className="skip" href="#main">
        Skip to content
      </a>
      <header className="top">
        <div className="brand">Loom</div>
        <nav aria-label="Main">
          <NavLink to="/tasks">Tasks</NavLink>
          <NavLink to="/decisions">Decisions</NavLink>
          {atLeast(role, 'admin') ? <NavLink to="/policies">Policies</NavLink> : null}
          <NavLink to="/help">Help</NavLink>
        </nav>
        <SearchBox />
        <button
          type="button"
          className="ask-ai"
          aria-expanded={assistant.open}
          onClick={() => (assistant.open ? chat.closePanel() : chat.openPanel())}
        >
          Ask AI
        </button>
        <label className="ns">
          <span>Namespace</span>
          <select value={namespace} onChange={(e) => choose(e.target.value)}>
            {names.map((n) => (
              <option key={n} value={n}>
                {n}
              </option>
            ))}
          </select>
        </label>
        <div className="who">
          <span title={`${session.org} · ${role ?? 'no role'}`} data-testid="subject">
            {session.subject}
          </span>
          <span className="role">{role ?? 'no role'}</span>
          <button type="button" onClick={signOut}>
            Sign out
          </button>
        </div>
      </header>
      <ErrorNote error={signOutError} title="Sign out failed" />
      {listed.error ? <ErrorNote error={listed.error} title="Could not list namespaces" /> : null}
      <div className={assistant.open ? 'with-assistant' : undefined}>
        <main id="main" className="main" key={namespace}>
          {namespace ? children : <p>You hold no role in any namespace of {session.org}. Ask an admin for a grant.</p>}
        </main>
        {assistant.open && namespace ? <AssistantPanel /> : null}
      </div>
    </ScopeContext.Provider>
  );
}
