// A starter's card in a conversation: the snapshot of its read, with "Read again".

import { useScope } from '../../../lib/context';
import { chat } from '../store';
import { snapshotRows } from '../storage';
import type { Card } from '../types';
import { type Starter, starterById } from './starters';

/** Read a starter's card with the person's own session. */
export async function readCard(starter: Starter, args: Record<string, unknown>, namespace: string): Promise<Card> {
  try {
    const { rows, cut } = snapshotRows(await starter.read(args, namespace));
    return { starter: starter.id, args, rows, cut, readAt: Date.now() };
  } catch (e) {
    const code = e && typeof e === 'object' && 'code' in e ? ` (${String(e.code)})` : '';
    return { starter: starter.id, args, rows: [], cut: false, readAt: Date.now(), error: `${e instanceof Error ? e.message : String(e)}${code}` };
  }
}

export function CardView({ card, conversationId, turnId, namespace }: { card: Card; conversationId: string; turnId: string; namespace: string }) {
  const { namespace: current } = useScope();
  const starter = starterById(card.starter);
  if (!starter) return null;
  const again = async () => {
    chat.refreshCard(conversationId, turnId, { ...card, readAt: 0 });
    chat.refreshCard(conversationId, turnId, await readCard(starter, card.args, namespace || current));
  };
  return (
    <section className="card starter-card" aria-label={starter.label}>
      <p className="card-source">
        <strong>Loom's own read</strong> <span className="muted">— exact, read with your session; no model call</span>
      </p>
      {card.readAt === 0 ? <p role="status">Reading…</p> : null}
      {card.error ? (
        <p role="alert" className="error">
          Could not read: {card.error}
        </p>
      ) : null}
      {card.readAt && !card.error ? (card.rows.length ? starter.draw(card.rows) : <p className="empty">{starter.empty}</p>) : null}
      {card.cut ? <p className="hint">Only the first rows are kept here.</p> : null}
      {card.readAt ? (
        <p className="hint">
          Read {new Date(card.readAt).toLocaleString()}{' '}
          <button type="button" className="link" onClick={again}>
            Read again
          </button>
        </p>
      ) : null}
    </section>
  );
}
