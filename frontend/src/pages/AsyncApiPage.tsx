import { useQuery } from '@tanstack/react-query';
import { ErrorNote } from '../lib/errors';
import { resolve, SchemaDetails } from '../lib/schema';
import { client } from '../lib/session';

type Json = Record<string, unknown>;

/** /asyncapi: the NATS events Loom publishes, drawn from this server's /asyncapi.json (no CDN). */
export function AsyncApiPage() {
  const doc = useQuery({ queryKey: ['asyncapi.json'], queryFn: () => client.get<Json>('/asyncapi.json'), staleTime: Infinity });
  const d = doc.data;
  const info = (d?.info ?? {}) as Json;
  const channels = Object.entries((d?.channels ?? {}) as Record<string, Json>);
  const operations = Object.entries((d?.operations ?? {}) as Record<string, Json>);
  return (
    <main className="page reference">
      <h1>{String(info.title ?? 'Loom events')}</h1>
      <p className="muted">
        AsyncAPI {String(d?.asyncapi ?? '')} · version {String(info.version ?? '')}. The raw document:{' '}
        <a href="/asyncapi.json">/asyncapi.json</a>.
      </p>
      <ErrorNote error={doc.error} title="Could not read /asyncapi.json" />
      {doc.isPending ? <p role="status">Loading…</p> : null}
      {d && channels.length === 0 ? <p className="empty">No plane declared any subject.</p> : null}
      {d && operations.length ? (
        <section>
          <h2>Operations</h2>
          <ul>
            {operations.map(([id, op]) => (
              <li key={id}>
                <strong>{String(op.action ?? '')}</strong> <code>{String(resolve(d, op.channel).address ?? id)}</code>{' '}
                <span className="muted">{String(op.summary ?? op.description ?? '')}</span>
              </li>
            ))}
          </ul>
        </section>
      ) : null}
      {d
        ? channels.map(([id, ch]) => (
            <section key={id} className="card" aria-label={`Channel ${String(ch.address ?? id)}`}>
              <h2>
                <code>{String(ch.address ?? id)}</code>
              </h2>
              {ch.description ? <p>{String(ch.description)}</p> : null}
              {Object.entries((ch.messages ?? {}) as Record<string, unknown>).map(([name, m]) => {
                const msg = resolve(d, m);
                return (
                  <SchemaDetails
                    key={name}
                    summary={
                      <>
                        Message {String(msg.title ?? msg.name ?? name)}
                        {msg.summary ? ` — ${String(msg.summary)}` : ''}
                      </>
                    }
                    doc={d}
                    schema={msg.payload}
                  />
                );
              })}
            </section>
          ))
        : null}
    </main>
  );
}
