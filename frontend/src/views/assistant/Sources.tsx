// Under a finished answer: its support label with "Why this label", and its Sources, each as the
// server checked it (spec 000 "Rendering"). A confirmed source opens where it lives: a task, a
// decision, a Help section at its anchor; any other reads "not confirmed" with its reason.

import { useId, useState } from 'react';
import { Link } from 'react-router-dom';
import { type CheckedCitation, numberedSources, sourceHref, sourceName } from './citations';
import { supportLabel } from './support';
import type { Answer } from './types';

export function SupportLabel({ answer }: { answer: Answer }) {
  const [why, setWhy] = useState(false);
  const noteId = useId();
  const label = supportLabel({
    support: answer.support,
    citations: answer.citations,
    unknownNames: answer.unknownNames,
    checkFinished: answer.state !== 'lost',
  });
  if (!label) return null;
  return (
    <div className={`support support-${answer.state === 'lost' ? 'lost' : (answer.support ?? 'unchecked')}`}>
      <span className="support-text" data-testid="support-label">
        {label.text}
      </span>{' '}
      <button type="button" className="link" aria-expanded={why} aria-controls={noteId} onClick={() => setWhy(!why)}>
        Why this label
      </button>
      {why ? (
        <p id={noteId} className="hint">
          {label.why}
        </p>
      ) : null}
    </div>
  );
}

export function Sources({ text, citations, idPrefix }: { text: string; citations: readonly CheckedCitation[]; idPrefix: string }) {
  const rows = numberedSources(text, citations);
  if (!rows.length) return null;
  return (
    <section className="sources" aria-label="Sources">
      <h4>Sources</h4>
      <ol>
        {rows.map(({ number, citation }) => (
          <SourceRow key={number} id={`${idPrefix}-${number}`} number={number} c={citation} />
        ))}
      </ol>
    </section>
  );
}

function SourceRow({ id, number, c }: { id: string; number: number; c: CheckedCitation }) {
  const href = sourceHref(c);
  const name = sourceName(c);
  return (
    <li id={id} value={number} title={c.text}>
      {href ? (
        <Link to={href}>{name}</Link>
      ) : c.verified ? (
        <span>
          {name} <span className="muted">(ran in this answer)</span>
        </span>
      ) : (
        <span>
          {name} <span className="not-confirmed">not confirmed</span>
          {c.reason ? <span className="muted">: {c.reason}</span> : null}
        </span>
      )}
      {c.kind === 'sql' ? (
        <pre className="code">
          <code>{c.text}</code>
        </pre>
      ) : null}
    </li>
  );
}
