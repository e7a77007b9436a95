// A JSON Schema as a readable table (the API reference and the AsyncAPI page), resolving
// local $refs (#/components/...) in the document it came from.

import type { ReactNode } from 'react';
import { ColumnHeads } from './table';

type Json = Record<string, unknown>;

export function resolve(doc: Json, schema: unknown): Json {
  let s = (schema ?? {}) as Json;
  for (let i = 0; i < 16 && typeof s.$ref === 'string' && s.$ref.startsWith('#/'); i++) {
    let node: unknown = doc;
    for (const part of (s.$ref as string).slice(2).split('/')) {
      node = (node as Json | undefined)?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    }
    s = (node ?? {}) as Json;
  }
  return s;
}

export function refName(schema: unknown): string | undefined {
  const ref = (schema as Json | undefined)?.$ref;
  return typeof ref === 'string' ? ref.split('/').pop() : undefined;
}

export function typeLabel(doc: Json, schema: unknown): string {
  const name = refName(schema);
  const s = resolve(doc, schema);
  if ('const' in s) return JSON.stringify(s.const);
  if (Array.isArray(s.enum)) return s.enum.map((v) => JSON.stringify(v)).join(' | ');
  if (s.type === 'array') return `[${typeLabel(doc, s.items)}]`;
  if (typeof s.type === 'string') return s.type === 'object' && name ? name : String(s.type);
  if (Array.isArray(s.anyOf)) return (s.anyOf as unknown[]).map((x) => typeLabel(doc, x)).join(' | ');
  return name ?? 'any';
}

export function SchemaTable({ doc, schema, depth = 0 }: { doc: Json; schema: unknown; depth?: number }) {
  const s = resolve(doc, schema);
  const props = (s.properties ?? {}) as Record<string, unknown>;
  const required = new Set((s.required as string[] | undefined) ?? []);
  const names = Object.keys(props);
  if (!names.length) return <p className="muted">{typeLabel(doc, schema)}</p>;
  return (
    <table className="schema">
      <ColumnHeads names={['Field', 'Type', 'Meaning']} />
      <tbody>
        {names.map((n) => {
          const p = resolve(doc, props[n]);
          const nested = p.type === 'object' && p.properties && depth < 2;
          const items = p.type === 'array' ? resolve(doc, p.items) : undefined;
          const nestedItems = items?.type === 'object' && items.properties && depth < 2;
          return (
            <tr key={n}>
              <td>
                <code>{n}</code>
                {required.has(n) ? <span className="muted"> required</span> : null}
              </td>
              <td>{typeLabel(doc, props[n])}</td>
              <td>
                {String(p.description ?? '')}
                {nested || nestedItems ? (
                  <SchemaDetails summary="fields" doc={doc} schema={nested ? props[n] : p.items} depth={depth + 1} />
                ) : null}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** A schema's table folded under a summary line (an op's arguments or answer, a channel's message, a nested object's fields). */
export function SchemaDetails({ summary, doc, schema, depth = 0 }: { summary: ReactNode; doc: Json; schema: unknown; depth?: number }) {
  return (
    <details>
      <summary>{summary}</summary>
      <SchemaTable doc={doc} schema={schema} depth={depth} />
    </details>
  );
}
