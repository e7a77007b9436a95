import { renderToStaticMarkup } from 'react-dom/server';
import { MemoryRouter } from 'react-router-dom';
import { describe, expect, it } from 'vitest';
import { LoomError } from '@loom/sdk';
import { historyFor } from './chatStore';
import { type CheckedCitation, citationNumbers, numberedSources, sourceHref } from './citations';
import { renderAnswer } from './AnswerText';
import { contextLine, pageName, withContext } from './pageContext';
import { refusalReason } from './reasons';
import { KEEP_MS, loadConversations, saveConversations, snapshotRows, STORAGE_KEY } from './storage';
import { supportLabel } from './support';
import type { Conversation, Turn } from './types';
import { MemoryStorage } from './memoryStorage';

const answerHtml = (text: string, citations?: CheckedCitation[], checked = true) =>
  renderToStaticMarkup(<MemoryRouter>{renderAnswer({ text, citations, checked, sourcesId: 's' })}</MemoryRouter>);

const cite = (kind: string, ref: string, text: string, verified = true, extra: Partial<CheckedCitation> = {}): CheckedCitation => ({
  kind,
  ref,
  text,
  verified,
  ...extra,
});

describe('citation numbering', () => {
  it('numbers each citation by where it first appears; a repeat keeps its number', () => {
    const text = 'A [task:t2] and B [help:tasks.md § Claiming] then A again [task:t2], C [memory:k@v3].';
    expect(citationNumbers(text).map((m) => m.number)).toEqual([1, 2, 1, 3]);
  });
  it('lists the Sources in that order, a sql block after the markers', () => {
    const text = 'x [help:a.md] y [task:t1]\n\n```sql\nSELECT 1\n```';
    const cs = [cite('sql', 'sha256:x', 'SELECT 1'), cite('task', 't1', '[task:t1]'), cite('help', 'a.md', '[help:a.md]')];
    expect(numberedSources(text, cs).map((r) => [r.number, r.citation.kind])).toEqual([
      [1, 'help'],
      [2, 'task'],
      [3, 'sql'],
    ]);
  });
  it('opens a confirmed source where it lives and an unconfirmed one nowhere', () => {
    expect(sourceHref(cite('task', 'ab/c', '[task:ab/c]'))).toBe('/tasks/ab%2Fc');
    expect(sourceHref(cite('memory', 'd.k', '[memory:d.k@v1]'))).toBe('/decisions/d.k');
    expect(sourceHref(cite('help', 'tasks.md', '[help:tasks.md § Claiming]', true, { anchor: 'claiming' }))).toBe(
      '/help?page=tasks.md#claiming',
    );
    expect(sourceHref(cite('doc', 'docs/tasks', '[doc:docs/tasks]'))).toBe('/help?page=tasks.md');
    expect(sourceHref(cite('task', 't', '[task:t]', false))).toBeUndefined();
  });
  it('draws each marker as its number, linked to its Sources row only once the check ended', () => {
    const cs = [cite('task', 't1', '[task:t1]')];
    expect(answerHtml('Done [task:t1].', cs)).toContain('<a href="#s-1" aria-label="Source 1">[1]</a>');
    const before = answerHtml('Done [task:t1].', undefined, false);
    expect(before).toContain('[1]');
    expect(before).not.toContain('<a');
  });
});

describe('the answer renders Markdown emphasis, lists, tables and code only', () => {
  it('keeps emphasis, lists, tables and code', () => {
    const out = answerHtml('**bold** _em_ `code`\n\n- one\n- two\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```sql\nSELECT [task:x]\n```');
    expect(out).toContain('<strong>bold</strong>');
    expect(out).toContain('<em>em</em>');
    expect(out).toContain('<code>code</code>');
    expect(out).toContain('<li>');
    expect(out).toContain('<th scope="col">a</th>');
    // A marker inside code is the code as written.
    expect(out).toContain('SELECT [task:x]');
  });
  it('shows HTML as text and fetches no image', () => {
    const out = answerHtml('Look <img src="https://evil.example/x?rows=1"> here\n\n<script>alert(1)</script>\n\n![chart](https://evil.example/c.png)');
    expect(out).not.toMatch(/<img|<script/);
    expect(out).toContain('&lt;img src=');
    expect(out).toContain('[image: chart]');
  });
  it('draws no link: a Markdown link, a bare URL or an autolink is its words', () => {
    const out = answerHtml('See [the docs](https://evil.example/a), https://evil.example/b and <https://evil.example/c>.');
    expect(out).not.toContain('<a');
    expect(out).toContain('the docs');
    expect(out).toContain('https://evil.example/b');
  });
  it('reads a heading as emphasis, not as a heading of the page', () => {
    expect(answerHtml('# Title')).toBe('<p><strong>Title</strong></p>');
  });
});

describe('the support label', () => {
  const base = { unknownNames: [], checkFinished: true };
  it('words each support as the spec does', () => {
    const ok = [cite('task', 'a', '[task:a]'), cite('task', 'b', '[task:b]')];
    const half = [cite('task', 'a', '[task:a]'), cite('task', 'b', '[task:b]', false)];
    const none = [cite('task', 'a', '[task:a]', false)];
    expect(supportLabel({ ...base, support: 'supported', citations: ok })?.text).toBe('Checked against what Loom holds');
    expect(supportLabel({ ...base, support: 'supported', citations: half })?.text).toBe('Partly confirmed: 1 of 2 sources found in Loom');
    expect(supportLabel({ ...base, support: 'unsupported', citations: none })?.text).toBe("Couldn't confirm: 0 of 1 sources found in Loom");
    expect(supportLabel({ ...base, support: 'unsupported', citations: [], unknownNames: ['`task.fly`'] })?.text).toBe(
      "Couldn't confirm: it names `task.fly`",
    );
    expect(supportLabel({ ...base, support: 'unsupported', citations: [] })?.text).toBe("Couldn't confirm: it gives no sources");
    expect(supportLabel({ ...base, support: 'unchecked', citations: none })?.text).toBe('Sources not checked');
    expect(supportLabel({ ...base, support: 'unchecked', citations: [] })?.text).toBe('Not checked: it cites nothing Loom holds');
    expect(supportLabel({ ...base, support: 'none', citations: [] })).toBeUndefined();
    expect(supportLabel({ ...base, support: 'something-new', citations: [] })?.text).toBe('Not checked: it cites nothing Loom holds');
    expect(supportLabel({ ...base, support: undefined, citations: undefined, checkFinished: false })?.text).toBe("Check didn't finish");
  });
  it('gives every label a why', () => {
    for (const support of ['supported', 'unsupported', 'unchecked']) {
      expect(supportLabel({ ...base, support, citations: [] })?.why.length).toBeGreaterThan(20);
    }
  });
});

describe('the reasons it cannot answer', () => {
  const refused = (code: string, reason?: string) => refusalReason(new LoomError(403, code, 'm', false, reason ? { reason } : {}));
  it('names the setting when no assistant is configured, and what to do for each reason', () => {
    expect(refused('ASSISTANT_UNAVAILABLE', 'not_configured').todo).toContain('LOOM_ASSISTANT_LIBRECHAT_URL');
    expect(refused('AUTH_INSUFFICIENT', 'org_wide').title).toContain('org-wide');
    expect(refused('AUTH_INSUFFICIENT', 'narrowed').title).toContain('narrower');
    expect(refused('AUTH_INSUFFICIENT', 'token_expires_soon').todo).toBe('Sign in again, then ask.');
    expect(refused('RATE_LIMITED', 'budget').todo).toContain('daily_cost_cap_usd');
    expect(refused('RATE_LIMITED', 'concurrent_answers').title).toContain('busy');
    expect(refused('AUTH_INSUFFICIENT').title).toContain('viewer');
  });
});

describe("the page's context line", () => {
  it('quotes names as JSON string literals, so a quote or a line break cannot end it', () => {
    expect(contextLine({ page: 'Tasks', item: { kind: 'task', taskId: 'a"b\nc' } })).toBe('Context: Tasks page, task "a\\"b\\nc"');
    expect(contextLine({ page: 'Decisions', item: { kind: 'decision', key: 'vendor.pick' } })).toBe(
      'Context: Decisions page, decision "vendor.pick"',
    );
    expect(contextLine({ page: 'Help', item: { kind: 'help', page: 'tasks.md', anchor: 'claiming' } })).toBe(
      'Context: Help page, section "tasks.md#claiming"',
    );
  });
  it('keeps an id whole and cuts a title to one line of 200 characters', () => {
    const id = 'x'.repeat(300);
    const line = contextLine({ page: 'Tasks', item: { kind: 'task', taskId: id, title: `${'t'.repeat(250)}\nmore` } });
    expect(line).toContain(`task "${id}"`);
    expect(line).toContain(`(title "${'t'.repeat(200)}")`);
  });
  it('names the page from its path and starts the question with the line', () => {
    expect(pageName('/tasks/abc')).toBe('Tasks');
    expect(pageName('/help')).toBe('Help');
    expect(withContext('Why?', 'Context: Tasks page')).toBe('Context: Tasks page\nWhy?');
    expect(withContext('Why?', undefined)).toBe('Why?');
  });
});

const turn = (over: Partial<Turn> = {}): Turn => ({
  id: 't',
  question: 'q',
  namespace: 'ns',
  askedAt: 0,
  model: true,
  answer: { text: 'a', state: 'done', steps: [] },
  ...over,
});
const conv = (id: string, updatedAt: number, turns: Turn[] = [turn()]): Conversation => ({ id, title: id, updatedAt, turns });

describe('conversations kept in the browser', () => {
  const now = 1_000 * KEEP_MS;
  it('keeps a conversation 30 days from its last use', () => {
    const s = new MemoryStorage();
    saveConversations(s, 'acme/user:a', [conv('fresh', now - KEEP_MS + 60_000), conv('old', now - KEEP_MS - 1)]);
    expect(loadConversations(s, 'acme/user:a', now).map((c) => c.id)).toEqual(['fresh']);
    // The expired one is gone from storage too.
    expect(s.getItem(STORAGE_KEY)).not.toContain('"old"');
  });
  it("deletes another person's conversations when someone else signs in", () => {
    const s = new MemoryStorage();
    saveConversations(s, 'acme/user:a', [conv('mine', now)]);
    expect(loadConversations(s, 'acme/user:b', now)).toEqual([]);
    expect(s.getItem(STORAGE_KEY)).toBeNull();
  });
  it('reads a turn cut off while checking as a check that did not finish, one cut before text as stopped', () => {
    const s = new MemoryStorage();
    const checking = turn({ id: 'c', answer: { text: 'x', state: 'checking', steps: [] } });
    const answering = turn({ id: 'a', answer: { text: '', state: 'answering', steps: [] } });
    const again = turn({ id: 'g', answer: { text: '', state: 'answering', steps: [] }, previous: { text: 'old', state: 'done', steps: [] } });
    saveConversations(s, 'o', [conv('c1', now, [checking, answering, again])]);
    const [c] = loadConversations(s, 'o', now);
    expect(c?.turns.map((t) => t.answer?.state)).toEqual(['lost', 'stopped', 'done']);
    expect(c?.turns[2]?.answer?.text).toBe('old');
  });
  it('keeps a card as a snapshot of at most 32 KB', () => {
    const rows = Array.from({ length: 100 }, (_, i) => ({ i, text: 'y'.repeat(1000) }));
    const { rows: kept, cut } = snapshotRows(rows);
    expect(cut).toBe(true);
    expect(JSON.stringify(kept).length).toBeLessThanOrEqual(32 * 1024);
    expect(snapshotRows([{ a: 1 }])).toEqual({ rows: [{ a: 1 }], cut: false });
  });
});

describe('the history an answer is asked with', () => {
  it('sends each earlier answered turn with its context line, and skips a card-only turn', () => {
    const turns = [
      turn({ id: '1', question: 'first', context: 'Context: Tasks page', answer: { text: 'one', state: 'done', steps: [] } }),
      turn({ id: '2', question: 'card', model: false, answer: undefined }),
      turn({ id: '3', question: 'now', answer: { text: '', state: 'answering', steps: [] } }),
    ];
    expect(historyFor(turns, 2)).toEqual([
      { role: 'user', content: 'Context: Tasks page\nfirst' },
      { role: 'assistant', content: 'one' },
      { role: 'user', content: 'now' },
    ]);
  });
});
