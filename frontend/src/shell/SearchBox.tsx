import { useQuery } from '@tanstack/react-query';
import { useEffect, useId, useState } from 'react';
import { Link, useLocation, useNavigate } from 'react-router-dom';
import { useScope } from '../lib/context';
import { ErrorNote } from '../lib/errors';
import { client } from '../lib/session';
import { AnswerView } from '../views/assistant/AnswerView';
import { contextLine, pageName } from '../views/assistant/pageContext';
import { assistantConfigured, chat, useChat } from '../views/assistant/store';

/** Debounce a value: the search asks once typing pauses. */
export function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const id = window.setTimeout(() => setV(value), ms);
    return () => window.clearTimeout(id);
  }, [value, ms]);
  return v;
}

export function helpHref(page: string, anchor?: string): string {
  return `/help?page=${encodeURIComponent(page)}${anchor ? `#${anchor}` : ''}`;
}

/**
 * The header's search field: Loom's docs (help.search), results under the field; and, where an
 * assistant is configured, "Ask AI" answers the words in place, then goes on in the panel.
 */
export function SearchBox() {
  const [text, setText] = useState('');
  const [open, setOpen] = useState(false);
  const { namespace } = useScope();
  const { pathname } = useLocation();
  const chatState = useChat();
  const [asked, setAsked] = useState<{ conversationId: string; turnId: string }>();
  const askedTurn = chatState.conversations.find((c) => c.id === asked?.conversationId)?.turns.find((t) => t.id === asked?.turnId);
  const askAI = () => {
    chat.newConversation();
    const turnId = chat.ask({ question: text.trim(), context: contextLine({ page: pageName(pathname) }), namespace, model: true });
    const conversationId = chat.snapshot().activeId;
    if (conversationId) setAsked({ conversationId, turnId });
  };
  const query = useDebounced(text.trim(), 250);
  const navigate = useNavigate();
  const listId = useId();
  const found = useQuery({
    queryKey: ['help.search', query],
    queryFn: () => client.call('help.search', { query, limit: 8 }),
    enabled: query.length > 1,
  });
  const hits = found.data?.hits ?? [];
  return (
    <form
      className="search"
      role="search"
      onSubmit={(e) => {
        e.preventDefault();
        if (text.trim()) {
          setOpen(false);
          navigate(`/help?q=${encodeURIComponent(text.trim())}`);
        }
      }}
    >
      <label htmlFor={`${listId}-input`} className="visually-hidden">
        Search
      </label>
      <input
        id={`${listId}-input`}
        type="search"
        placeholder="Search the docs"
        value={text}
        aria-controls={listId}
        onChange={(e) => {
          setText(e.target.value);
          setAsked(undefined);
          setOpen(true);
        }}
        onKeyDown={(e) => {
          if (e.key === 'Escape') setOpen(false);
        }}
      />
      {open && asked && askedTurn?.answer ? (
        <div className="search-results search-answer" aria-label="Ask AI answer">
          <p className="muted">Ask AI: {askedTurn.question}</p>
          <AnswerView answer={askedTurn.answer} sources={false} />
          <button
            type="button"
            onClick={() => {
              chat.select(asked.conversationId);
              chat.openPanel();
              setAsked(undefined);
              setOpen(false);
            }}
          >
            Continue in Ask AI
          </button>
        </div>
      ) : null}
      {open && !asked && query.length > 1 ? (
        <div className="search-results" id={listId}>
          {assistantConfigured() ? (
            <button type="button" className="secondary ask-search" onClick={askAI}>
              Ask AI: “{text.trim()}”
            </button>
          ) : null}
          {found.isFetching && !hits.length ? <p role="status">Searching…</p> : null}
          <ErrorNote error={found.error} />
          {found.data && !hits.length ? <p>No section matches. Try an op name, a setting or fewer words.</p> : null}
          <ul aria-label="Search results">
            {hits.map((h) => (
              <li key={`${h.page}#${h.anchor}`}>
                <Link to={helpHref(h.page, h.anchor)} onClick={() => setOpen(false)}>
                  <strong>{h.breadcrumb.join(' › ')}</strong>
                  <span className="snippet">{h.snippet}</span>
                </Link>
              </li>
            ))}
          </ul>
        </div>
      ) : null}
    </form>
  );
}
