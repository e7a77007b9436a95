import { useQuery } from '@tanstack/react-query';
import { useEffect, useMemo } from 'react';
import { Link, useLocation, useSearchParams } from 'react-router-dom';
import type { HelpGetResult } from '@loom/sdk';
import { ErrorNote } from '../lib/errors';
import { renderMarkdown } from '../lib/markdown';
import { client } from '../lib/session';
import { helpHref } from '../shell/SearchBox';
import { AskAboutThis } from '../views/assistant/AskAboutThis';

const HOME = 'index.md';

/** A whole page: help.get answers at most 16,000 characters a read, so read on from next_offset. */
async function readPage(page: string): Promise<HelpGetResult> {
  const first = await client.call('help.get', { page });
  let text = first.text;
  let next = first.next_offset;
  while (next) {
    const more = await client.call('help.get', { page, offset: next });
    text += more.text;
    next = more.next_offset;
  }
  return { ...first, text, next_offset: 0 };
}

export function HelpPage() {
  const [params] = useSearchParams();
  const q = params.get('q') ?? '';
  return q ? <HelpSearch query={q} /> : <HelpDoc page={params.get('page') || HOME} />;
}

function HelpDoc({ page }: { page: string }) {
  const { hash } = useLocation();
  const doc = useQuery({ queryKey: ['help.get', page], queryFn: () => readPage(page), staleTime: Infinity });
  const body = useMemo(() => {
    if (!doc.data) return null;
    const anchors = doc.data.outline.filter((o) => o.level > 0).map((o) => o.anchor);
    return renderMarkdown(doc.data.text, { page, anchors });
  }, [doc.data, page]);
  useEffect(() => {
    // A deep link lands at its section once the page is drawn.
    if (!body || !hash) return;
    const target = document.getElementById(decodeURIComponent(hash.slice(1)));
    if (target) {
      target.scrollIntoView();
      target.focus({ preventScroll: true });
    }
  }, [body, hash]);
  return (
    <div className="help">
      <nav className="outline" aria-label="On this page">
        <p className="outline-title">
          <Link to={helpHref(HOME)}>Docs home</Link>
        </p>
        {doc.data ? (
          <ul>
            {doc.data.outline
              .filter((o) => o.level > 1)
              .map((o) => (
                <li key={o.anchor} className={`lvl-${o.level}`}>
                  <Link to={helpHref(page, o.anchor)} aria-current={hash === `#${o.anchor}` ? 'location' : undefined}>
                    {o.breadcrumb[o.breadcrumb.length - 1]}
                  </Link>
                </li>
              ))}
          </ul>
        ) : null}
      </nav>
      <article className="doc" aria-busy={doc.isPending}>
        {doc.data ? <AskAboutHelp page={page} anchor={hash.slice(1)} outline={doc.data.outline} /> : null}
        {doc.isPending ? <p role="status">Loading {page}…</p> : null}
        <ErrorNote error={doc.error} title={`Could not open ${page}`} />
        {doc.error ? (
          <p>
            Try <Link to={helpHref(HOME)}>the docs home</Link> or the search field above.
          </p>
        ) : null}
        {body}
      </article>
    </div>
  );
}

function HelpSearch({ query }: { query: string }) {
  const found = useQuery({ queryKey: ['help.search', query, 25], queryFn: () => client.call('help.search', { query, limit: 25 }) });
  return (
    <section className="page">
      <h1>Search the docs: “{query}”</h1>
      {found.isPending ? <p role="status">Searching…</p> : null}
      <ErrorNote error={found.error} title="Search failed" />
      {found.data && !found.data.available ? <p>The docs index is not available on this server right now.</p> : null}
      {found.data && found.data.available && found.data.hits.length === 0 ? (
        <p className="empty">No section matches. Try an op name (task.claim), a setting (LOOM_POLICY_MODE) or fewer words.</p>
      ) : null}
      <ol className="hits">
        {found.data?.hits.map((h) => (
          <li key={`${h.page}#${h.anchor}`}>
            <Link to={helpHref(h.page, h.anchor)}>{h.breadcrumb.join(' › ')}</Link>
            <p className="snippet">{h.snippet}</p>
            <p className="muted">{h.page}</p>
          </li>
        ))}
      </ol>
    </section>
  );
}

/** "Ask about this" for the section the address names (or the page when it names none). */
function AskAboutHelp({ page, anchor, outline }: { page: string; anchor: string; outline: HelpGetResult['outline'] }) {
  const at = decodeURIComponent(anchor);
  const section = outline.find((o) => o.anchor === at);
  const title = (section ?? outline[0])?.breadcrumb.join(' › ');
  return (
    <p className="doc-tools">
      <AskAboutThis page="Help" item={{ kind: 'help', page, anchor: section ? at : undefined, title }} />
    </p>
  );
}
