import { useQuery } from '@tanstack/react-query';
import { useMemo, useState } from 'react';
import { ErrorNote } from '../lib/errors';
import { SchemaDetails } from '../lib/schema';
import { client } from '../lib/session';

type Json = Record<string, unknown>;

interface Operation {
  path: string;
  summary: string;
  description: string;
  tag: string;
  body: unknown;
  answer: unknown;
}

function operations(doc: Json): Operation[] {
  const out: Operation[] = [];
  for (const [path, item] of Object.entries((doc.paths ?? {}) as Record<string, Json>)) {
    for (const [method, raw] of Object.entries(item)) {
      const op = raw as Json;
      if (typeof op !== 'object' || !op) continue;
      const body = ((op.requestBody as Json | undefined)?.content as Json | undefined)?.['application/json'] as Json | undefined;
      const ok = ((op.responses as Json | undefined)?.['200'] as Json | undefined)?.content as Json | undefined;
      out.push({
        path: `${method.toUpperCase()} ${path}`,
        summary: String(op.summary ?? ''),
        description: String(op.description ?? ''),
        tag: ((op.tags as string[] | undefined) ?? ['other'])[0] ?? 'other',
        body: body?.schema,
        answer: (ok?.['application/json'] as Json | undefined)?.schema,
      });
    }
  }
  return out.sort((a, b) => a.tag.localeCompare(b.tag) || a.path.localeCompare(b.path));
}

/** /api: the REST reference, drawn from this server's /openapi.json. */
export function ApiPage() {
  const doc = useQuery({ queryKey: ['openapi.json'], queryFn: () => client.get<Json>('/openapi.json'), staleTime: Infinity });
  const [filter, setFilter] = useState('');
  const ops = useMemo(() => (doc.data ? operations(doc.data) : []), [doc.data]);
  const shown = ops.filter((o) => !filter || `${o.path} ${o.summary}`.toLowerCase().includes(filter.toLowerCase()));
  const info = (doc.data?.info ?? {}) as Json;
  return (
    <main className="page reference">
      <h1>{String(info.title ?? 'Loom API')} reference</h1>
      <p className="muted">
        Version {String(info.version ?? '')}. Every op is <code>POST /v1/&lt;op&gt;</code> with its arguments as JSON. The raw
        document: <a href="/openapi.json">/openapi.json</a>.
      </p>
      <ErrorNote error={doc.error} title="Could not read /openapi.json" />
      {doc.isPending ? <p role="status">Loading…</p> : null}
      <label className="wide">
        <span>Filter</span>
        <input type="search" value={filter} onChange={(e) => setFilter(e.target.value)} placeholder="task.claim" />
      </label>
      {shown.map((o) => (
        <section key={o.path} className="card" aria-label={o.path}>
          <h2>
            <code>{o.path}</code>
          </h2>
          <p>{o.summary}</p>
          {o.description && o.description !== o.summary ? <p className="muted">{o.description}</p> : null}
          {doc.data && o.body ? <SchemaDetails summary="Arguments" doc={doc.data} schema={o.body} /> : null}
          {doc.data && o.answer ? <SchemaDetails summary="Answer" doc={doc.data} schema={o.answer} /> : null}
        </section>
      ))}
    </main>
  );
}
