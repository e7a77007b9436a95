// The page's context (spec 000 "The page's context"): one line that starts a question about
// the page it is asked from, and the item "Ask about this" names. Names others wrote are quoted
// as JSON string literals, so a quote or a line break in one cannot end the line: an id, a key
// or a page exactly as stored, never cut; a title on one line, cut at 200 characters. The person
// sees it as a chip and can remove it; it grants nothing and no wire field carries it.

export type AskedItem =
  | { kind: 'task'; taskId: string; title?: string }
  | { kind: 'decision'; key: string }
  | { kind: 'help'; page: string; anchor?: string; title?: string };

export interface PageContext {
  page: string;
  item?: AskedItem;
}

const PAGES: [string, string][] = [
  ['/tasks', 'Tasks'],
  ['/decisions', 'Decisions'],
  ['/policies', 'Policies'],
  ['/help', 'Help'],
];

const TITLE_LIMIT = 200;

/** The page a path shows, as the line names it. */
export function pageName(pathname: string): string {
  for (const [prefix, name] of PAGES) if (pathname === prefix || pathname.startsWith(`${prefix}/`)) return name;
  return 'Dashboard';
}

/** A stored name, exactly, as a JSON string literal. */
function exact(s: string): string {
  return JSON.stringify(s);
}

/** A title or a query: on one line, cut at 200 characters, as a JSON string literal. */
function oneLine(s: string): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  return JSON.stringify([...flat].slice(0, TITLE_LIMIT).join(''));
}

export function contextLine(c: PageContext): string {
  const base = `Context: ${c.page} page`;
  const it = c.item;
  if (!it) return base;
  switch (it.kind) {
    case 'task':
      return `${base}, task ${exact(it.taskId)}${it.title ? ` (title ${oneLine(it.title)})` : ''}`;
    case 'decision':
      return `${base}, decision ${exact(it.key)}`;
    case 'help':
      return `${base}, section ${exact(`${it.page}${it.anchor ? `#${it.anchor}` : ''}`)}${it.title ? ` (title ${oneLine(it.title)})` : ''}`;
  }
}

/** The question as sent: the context line (when kept) on its own first line, then the words. */
export function withContext(question: string, line: string | undefined): string {
  return line ? `${line}\n${question}` : question;
}
