// "Ask about this" on a task, a decision and a Help section: opens the panel with the item named
// on the context chip (the person can still remove it before asking).

import { type AskedItem, contextLine } from './pageContext';
import { assistantConfigured, chat } from './store';

export function AskAboutThis({ page, item }: { page: string; item: AskedItem }) {
  if (!assistantConfigured()) return null;
  return (
    <button type="button" className="secondary ask-about" onClick={() => chat.openPanel(contextLine({ page, item }), true)}>
      Ask about this
    </button>
  );
}
