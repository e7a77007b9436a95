import { LoomError } from '@loom/sdk';

/** An error as a person reads it: the message and the code, never a blank page. */
export function ErrorNote({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null;
  const code = error instanceof LoomError ? error.code : 'CLIENT_ERROR';
  const message = error instanceof Error ? error.message : String(error);
  return (
    <div role="alert" className="error">
      {title ? <strong>{title}: </strong> : null}
      {message} <code className="error-code">{code}</code>
    </div>
  );
}
