// An answer's citations as the dashboard numbers and opens them (spec 000 "Rendering").
//
// The bridge checks the citations the agent writes ([task:<id>], [memory:<key>@v<n>],
// [help:<page> § <section>], [doc:<source> § <section>], [code:<path>:<line>] and ```sql blocks)
// and sends each back, in the order it first appears, on loom.citations. The text is drawn with
// each marker as a number by where it first appears, before and after the check alike.

/** One citation as loom.citations carries it. */
export interface CheckedCitation {
  kind: string;
  ref: string;
  verified: boolean;
  text: string;
  reason?: string;
  anchor?: string;
}

// The bridge's own pattern (services/assistant-bridge/loom_assistant/domain/citations.py).
const MARKER = /\[(memory|help|task|doc|code):([^[\]\n]+)\]/g;
const SPACES = /\s+/g;

/** A marker's identity: the same citation written twice gets one number. */
export function markerKey(raw: string): string {
  return raw.replace(SPACES, ' ').trim().toLowerCase();
}

/** Each marker in `text` with the number of its first appearance, in order. */
export function citationNumbers(text: string): { raw: string; index: number; number: number }[] {
  const seen = new Map<string, number>();
  const out: { raw: string; index: number; number: number }[] = [];
  for (const m of text.matchAll(MARKER)) {
    const key = markerKey(m[0]);
    let n = seen.get(key);
    if (n === undefined) {
      n = seen.size + 1;
      seen.set(key, n);
    }
    out.push({ raw: m[0], index: m.index ?? 0, number: n });
  }
  return out;
}

/** The checked citation a marker names (by its text, else its kind and ref). */
export function citationFor(raw: string, citations: readonly CheckedCitation[] | undefined): CheckedCitation | undefined {
  if (!citations) return undefined;
  const key = markerKey(raw);
  const exact = citations.find((c) => c.kind !== 'sql' && markerKey(c.text) === key);
  if (exact) return exact;
  const m = /^\[(\w+):([^\]]+)\]$/.exec(raw.trim());
  if (!m) return undefined;
  const [, kind = '', body = ''] = m;
  const ref = body.split('§')[0]?.trim().replace(/@v\d+$/, '') ?? '';
  return citations.find((c) => c.kind === kind && c.ref === ref);
}

/**
 * The Sources list's order: each checked citation numbered as the text numbers its marker; a
 * citation the text does not show as a marker (a ```sql block) follows the markers' numbers.
 */
export function numberedSources(text: string, citations: readonly CheckedCitation[]): { number: number; citation: CheckedCitation }[] {
  const byNumber = new Map<number, CheckedCitation>();
  let highest = 0;
  for (const { raw, number } of citationNumbers(text)) {
    highest = Math.max(highest, number);
    const c = citationFor(raw, citations);
    if (c && !byNumber.has(number) && ![...byNumber.values()].includes(c)) byNumber.set(number, c);
  }
  const used = new Set(byNumber.values());
  for (const c of citations) {
    if (!used.has(c)) byNumber.set(++highest, c);
  }
  return [...byNumber.entries()].sort((a, b) => a[0] - b[0]).map(([number, citation]) => ({ number, citation }));
}

/** Where a confirmed citation opens in the dashboard, or undefined when it opens nowhere. */
export function sourceHref(c: CheckedCitation): string | undefined {
  if (!c.verified) return undefined;
  switch (c.kind) {
    case 'task':
      return `/tasks/${encodeURIComponent(c.ref)}`;
    case 'memory':
      // Loom's memory rows are its decisions' rows: the Decisions page reads any key.
      return `/decisions/${encodeURIComponent(c.ref)}`;
    case 'help':
    case 'doc': {
      const page = c.kind === 'doc' ? docPage(c.ref) : c.ref;
      return `/help?page=${encodeURIComponent(page)}${c.anchor ? `#${c.anchor}` : ''}`;
    }
    default:
      return undefined;
  }
}

/** The docs page a document citation's source names (the bridge's doc_page). */
export function docPage(ref: string): string {
  let page = ref.trim();
  for (const prefix of ['loom://docs/', 'file://', './', '/']) if (page.startsWith(prefix)) page = page.slice(prefix.length);
  if (page.startsWith('docs/')) page = page.slice(5);
  if (page && !page.endsWith('.md')) page += '.md';
  return page;
}

/** A citation named as the reader knows it. */
export function sourceName(c: CheckedCitation): string {
  switch (c.kind) {
    case 'task':
      return `Task ${c.ref}`;
    case 'memory':
      return `Decision ${c.ref}`;
    case 'help':
    case 'doc': {
      const section = /§\s*([^\]]+)\]?$/.exec(c.text)?.[1]?.trim();
      return `Help: ${c.kind === 'doc' ? docPage(c.ref) : c.ref}${section ? ` › ${section}` : ''}`;
    }
    case 'sql':
      return 'SQL statement';
    case 'code':
      return `Code ${c.ref}`;
    default:
      return c.text || c.ref;
  }
}
