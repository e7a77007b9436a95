// One answer as the panel and the header search's preview draw it: "Answering…" with the latest
// step as the working line until text comes, the text, "Checking sources…" until loom.citations,
// then the support label and the Sources.

import { useId } from 'react';
import { AnswerText } from './AnswerText';
import { asLoomError } from './chatStore';
import { refusalReason } from './reasons';
import { Sources, SupportLabel } from './Sources';
import type { Answer } from './types';

export function AnswerView({ answer, sources = true }: { answer: Answer; sources?: boolean }) {
  const id = useId().replace(/:/g, '');
  const latest = answer.steps[answer.steps.length - 1];
  const checked = answer.state === 'done';
  return (
    <div className="answer" aria-busy={answer.state === 'answering' || answer.state === 'checking'}>
      {answer.state === 'answering' && !answer.text ? (
        <p role="status" className="working">
          Answering…{latest ? <span className="step"> {latest.text}</span> : null}
        </p>
      ) : null}
      {answer.text ? <AnswerText text={answer.text} citations={answer.citations} checked={checked} sourcesId={`src-${id}`} /> : null}
      {answer.state === 'checking' ? (
        <p role="status" className="working">
          Checking sources…
        </p>
      ) : null}
      {answer.state === 'stopped' ? <p className="muted">Stopped.</p> : null}
      {answer.state === 'failed' && answer.error ? <Refusal error={answer.error} /> : null}
      {(checked || answer.state === 'lost') && answer.text ? <SupportLabel answer={answer} /> : null}
      {sources && checked && answer.citations ? <Sources text={answer.text} citations={answer.citations} idPrefix={`src-${id}`} /> : null}
    </div>
  );
}

export function Refusal({ error }: { error: NonNullable<Answer['error']> }) {
  const r = refusalReason(asLoomError(error));
  return (
    <div role="alert" className="refusal">
      <strong>{r.title}</strong> {r.todo} {error.code !== 'CONNECTION_LOST' ? <code className="error-code">{error.code}</code> : null}
    </div>
  );
}
