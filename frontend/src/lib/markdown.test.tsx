import { renderToStaticMarkup } from 'react-dom/server';
import { MemoryRouter } from 'react-router-dom';
import { describe, expect, it } from 'vitest';
import { helpLink, renderMarkdown, slug } from './markdown';

const html = (text: string, anchors: string[] = [], page = 'tasks.md') =>
  renderToStaticMarkup(<MemoryRouter>{renderMarkdown(text, { page, anchors })}</MemoryRouter>);

describe('markdown for the Help page', () => {
  it('gives headings the server outline anchors in order', () => {
    const out = html('# Tasks\n\n## Claiming\n\ntext\n\n## Claiming\n', ['tasks', 'claiming', 'claiming-1']);
    expect(out).toContain('<h1 id="tasks"');
    expect(out).toContain('<h2 id="claiming"');
    expect(out).toContain('<h2 id="claiming-1"');
  });
  it('renders code, tables and inline code as elements, raw HTML as text', () => {
    const out = html('```sh\nloom up\n```\n\n| a | b |\n|---|---|\n| `x` | 2 |\n\n<script>alert(1)</script>\n');
    expect(out).toContain('<pre class="code"><code data-lang="sh">loom up</code></pre>');
    expect(out).toContain('<th scope="col">a</th>');
    expect(out).toContain('<td><code>x</code></td>');
    expect(out).not.toContain('<script>');
    expect(out).toContain('&lt;script&gt;');
  });
  it('fetches no image: an image shows its alt text', () => {
    const out = html('![a chart](https://example.com/x.png)');
    expect(out).not.toContain('<img');
    expect(out).toContain('[a chart]');
  });
  it('turns links between pages into Help routes, relative to the page', () => {
    expect(helpLink('tasks.md', 'policies.md#modes')).toBe('/help?page=policies.md#modes');
    expect(helpLink('reference/ops.md', 'errors.md#task_terminal')).toBe('/help?page=reference%2Ferrors.md#task_terminal');
    expect(helpLink('reference/ops.md', '../tasks.md')).toBe('/help?page=tasks.md');
    expect(helpLink('tasks.md', '#claiming')).toBe('/help?page=tasks.md#claiming');
    expect(helpLink('tasks.md', 'https://example.com/')).toBeUndefined();
    expect(helpLink('tasks.md', '../services/x.py')).toBeUndefined();
  });
  it('slugs like GitHub', () => {
    expect(slug('Claims & leases: how')).toBe('claims--leases-how');
  });
});
