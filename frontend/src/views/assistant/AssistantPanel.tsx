// The Ask AI panel (spec 000 "Dashboard", build-order item 5): a conversation streamed on the
// signed-in session in the header's namespace, the page's context chip on each question, the
// starters' cards, Stop, Copy, Ask again and an edit of the last question, and the conversations
// this browser keeps (History, Delete). With no assistant configured it shows the starters' cards
// without chat.

import { useEffect, useRef, useState } from 'react';
import { useLocation } from 'react-router-dom';
import { useScope } from '../../lib/context';
import { AnswerView, Refusal } from './AnswerView';
import { CardView, readCard } from './cards/CardView';
import { STARTERS, type Starter } from './cards/starters';
import { contextLine, pageName } from './pageContext';
import { assistantConfigured, chat, useChat } from './store';
import type { Conversation, Turn } from './types';

export function AssistantPanel() {
  const state = useChat();
  const { namespace } = useScope();
  const { pathname } = useLocation();
  const configured = assistantConfigured();
  const [text, setText] = useState('');
  const [alsoAsk, setAlsoAsk] = useState(true);
  const [editing, setEditing] = useState(false);
  const [history, setHistory] = useState(false);
  const heading = useRef<HTMLHeadingElement>(null);
  const conv = state.conversations.find((c) => c.id === state.activeId);
  const last = conv?.turns[conv.turns.length - 1];
  const running = last ? chat.isRunning(last.id) : false;

  // The chip follows the page unless "Ask about this" named an item (or the person removed it).
  const pageLine = contextLine({ page: pageName(pathname) });
  const [removed, setRemoved] = useState(false);
  const shownPath = useRef(pathname);
  useEffect(() => {
    if (shownPath.current !== pathname) {
      // Another page: the chip names it (an item asked about before is no longer on screen).
      shownPath.current = pathname;
      chat.setChip(pageLine);
    } else if (!state.chipFromItem && state.chip !== pageLine) {
      chat.setChip(pageLine);
    }
  }, [pathname, pageLine, state.chipFromItem, state.chip]);
  useEffect(() => setRemoved(false), [state.chip]);
  useEffect(() => heading.current?.focus(), []);
  const chip = removed ? undefined : state.chip;

  const ask = (e: { preventDefault(): void }) => {
    e.preventDefault();
    const question = text.trim();
    if (!question || running) return;
    if (editing && conv) {
      chat.askAgain(conv.id, question);
      setEditing(false);
    } else {
      chat.ask({ question, context: chip, namespace, model: true });
    }
    setText('');
  };

  const start = async (s: Starter) => {
    const model = configured && alsoAsk;
    const turnId = chat.ask({
      question: s.question(s.args),
      context: chip,
      namespace,
      model,
      card: { starter: s.id, args: s.args, rows: [], cut: false, readAt: 0 },
    });
    const convId = chat.snapshot().activeId;
    const card = await readCard(s, s.args, namespace);
    if (convId) chat.refreshCard(convId, turnId, card);
  };

  return (
    <aside className="assistant" aria-labelledby="assistant-title" onKeyDown={(e) => e.key === 'Escape' && chat.closePanel()}>
      <div className="panel-head">
        <h2 id="assistant-title" tabIndex={-1} ref={heading}>
          Ask AI
        </h2>
        <div className="assistant-tools">
          <button type="button" className="secondary" onClick={() => setHistory(!history)} aria-expanded={history}>
            History
          </button>
          <button type="button" className="secondary" onClick={() => chat.newConversation()} disabled={!conv}>
            New
          </button>
          <button type="button" onClick={() => chat.closePanel()} aria-label="Close Ask AI">
            ×
          </button>
        </div>
      </div>
      {history ? <HistoryList conversations={state.conversations} activeId={state.activeId} onPick={() => setHistory(false)} /> : null}
      {!configured ? (
        <p className="warn" role="note">
          No assistant is configured on this Loom, so there is no chat: an operator sets <code>LOOM_ASSISTANT_LIBRECHAT_URL</code> to
          LibreChat’s internal address. The starters below read Loom directly with your session and still answer.
        </p>
      ) : null}
      {conv ? (
        <ol className="turns" aria-label="Conversation">
          {conv.turns.map((t) => (
            <TurnView
              key={t.id}
              conv={conv}
              turn={t}
              last={t === last}
              onEdit={() => {
                setText(t.question);
                setEditing(true);
              }}
            />
          ))}
        </ol>
      ) : null}
      <section className="starters" aria-label="Starters">
        <h3>Starters</h3>
        <div className="starter-buttons">
          {STARTERS.map((s) => (
            <button key={s.id} type="button" className="secondary" onClick={() => void start(s)} disabled={running}>
              {s.label}
            </button>
          ))}
        </div>
        {configured ? (
          <label className="check">
            <input type="checkbox" checked={alsoAsk} onChange={(e) => setAlsoAsk(e.target.checked)} /> Also ask the model
          </label>
        ) : null}
      </section>
      {configured ? (
        <form className="ask" onSubmit={ask} aria-label="Ask a question">
          {chip ? (
            <p className="chip" data-testid="context-chip">
              <span>{chip}</span>
              <button type="button" className="link" aria-label="Remove context" onClick={() => setRemoved(true)}>
                ×
              </button>
            </p>
          ) : null}
          <label className="wide">
            <span>{editing ? 'Edit your last question' : 'Your question'}</span>
            <textarea
              value={text}
              rows={3}
              onChange={(e) => setText(e.target.value)}
              onKeyDown={(e) => {
                if (e.key === 'Enter' && !e.shiftKey) ask(e);
              }}
            />
          </label>
          <button type="submit" disabled={!text.trim() || running}>
            {editing ? 'Ask edited question' : 'Ask'}
          </button>
          {editing ? (
            <button
              type="button"
              className="secondary"
              onClick={() => {
                setEditing(false);
                setText('');
              }}
            >
              Cancel edit
            </button>
          ) : null}
        </form>
      ) : null}
    </aside>
  );
}

function TurnView({ conv, turn, last, onEdit }: { conv: Conversation; turn: Turn; last: boolean; onEdit: () => void }) {
  const running = chat.isRunning(turn.id);
  const [copied, setCopied] = useState<string>();
  const a = turn.answer;
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(a?.text ?? '');
      setCopied('Copied');
    } catch {
      setCopied('Copy failed: select the text and copy it');
    }
  };
  return (
    <li className="turn">
      <div className="question">
        {turn.context ? <p className="chip sent">{turn.context}</p> : null}
        <p>{turn.question}</p>
      </div>
      {turn.card ? <CardView card={turn.card} conversationId={conv.id} turnId={turn.id} namespace={turn.namespace} /> : null}
      {a ? <AnswerView answer={a} /> : null}
      {turn.attemptError ? <Refusal error={turn.attemptError} /> : null}
      {turn.model || last ? (
        <div className="turn-actions">
          {running ? (
            <button type="button" onClick={() => chat.stop(turn.id)}>
              Stop
            </button>
          ) : null}
          {!running && a?.text ? (
            <button type="button" className="secondary" onClick={() => void copy()}>
              Copy
            </button>
          ) : null}
          {!running && last && turn.model ? (
            <button type="button" className="secondary" onClick={() => chat.askAgain(conv.id)}>
              {a?.state === 'failed' ? 'Retry' : 'Ask again'}
            </button>
          ) : null}
          {!running && last && turn.model ? (
            <button type="button" className="secondary" onClick={onEdit}>
              Edit question
            </button>
          ) : null}
          {copied ? (
            <span role="status" className="muted">
              {copied}
            </span>
          ) : null}
        </div>
      ) : null}
    </li>
  );
}

function HistoryList({ conversations, activeId, onPick }: { conversations: Conversation[]; activeId: string | undefined; onPick: () => void }) {
  if (!conversations.length) return <p className="empty">No conversation is kept in this browser.</p>;
  return (
    <ul className="history-list" aria-label="Kept conversations">
      {conversations.map((c) => (
        <li key={c.id}>
          <button
            type="button"
            className="link"
            aria-current={c.id === activeId ? 'true' : undefined}
            onClick={() => {
              chat.select(c.id);
              onPick();
            }}
          >
            {c.title}
          </button>{' '}
          <span className="muted">{new Date(c.updatedAt).toLocaleDateString()}</span>{' '}
          <button type="button" className="link" onClick={() => chat.deleteConversation(c.id)} aria-label={`Delete “${c.title}”`}>
            Delete
          </button>
        </li>
      ))}
      <li className="hint">Kept in this browser for 30 days from last use; deleted when you sign out.</li>
    </ul>
  );
}
