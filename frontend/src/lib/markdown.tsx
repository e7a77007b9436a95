// Markdown to React elements (never HTML strings): the docs' headings, paragraphs, lists,
// tables, code and links. Raw HTML in a page is shown as text; images show their alt text, so
// nothing is fetched from anywhere. Links to other .md pages open on the Help page.

import { type Token, type Tokens, lexer } from 'marked';
import type { ReactNode } from 'react';
import { Link } from 'react-router-dom';

export interface RenderOptions {
  /** The page being rendered (its folder resolves relative links). */
  page: string;
  /** The anchor of each heading, in document order (the server's outline). */
  anchors: string[];
}

/** Resolve a link in `page` to a Help route, or answer undefined for a link that leaves the docs. */
export function helpLink(page: string, href: string): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(href)) return undefined;
  if (href.startsWith('#')) return `/help?page=${encodeURIComponent(page)}${href}`;
  const [path = '', hash] = href.split('#', 2);
  if (!path.endsWith('.md')) return undefined;
  const parts = page.split('/').slice(0, -1);
  for (const seg of path.split('/')) {
    if (seg === '..') parts.pop();
    else if (seg !== '.' && seg !== '') parts.push(seg);
  }
  return `/help?page=${encodeURIComponent(parts.join('/'))}${hash ? `#${hash}` : ''}`;
}

/** GitHub's heading slug (the server's too, before its -1, -2 suffixes). */
export function slug(text: string): string {
  return text
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

class Renderer {
  private heading = 0;
  private key = 0;
  constructor(private readonly opts: RenderOptions) {}

  private k(): number {
    return this.key++;
  }

  blocks(tokens: Token[]): ReactNode[] {
    return tokens.map((t) => this.block(t));
  }

  inline(tokens: Token[] | undefined): ReactNode[] {
    return (tokens ?? []).map((t) => this.inlineOne(t));
  }

  block(t: Token): ReactNode {
    switch (t.type) {
      case 'heading': {
        const h = t as Tokens.Heading;
        const anchor = this.opts.anchors[this.heading++] ?? slug(h.text);
        const Tag = `h${Math.min(h.depth, 6)}` as 'h2';
        return (
          <Tag key={this.k()} id={anchor} tabIndex={-1}>
            {this.inline(h.tokens)}{' '}
            <a className="anchor" href={`#${anchor}`} aria-label={`Link to ${h.text}`}>
              #
            </a>
          </Tag>
        );
      }
      case 'paragraph':
        return <p key={this.k()}>{this.inline((t as Tokens.Paragraph).tokens)}</p>;
      case 'code': {
        const c = t as Tokens.Code;
        return (
          <pre key={this.k()} className="code">
            <code data-lang={c.lang || undefined}>{c.text}</code>
          </pre>
        );
      }
      case 'list': {
        const l = t as Tokens.List;
        const items = l.items.map((item) => <li key={this.k()}>{this.blocks(item.tokens)}</li>);
        return l.ordered ? <ol key={this.k()}>{items}</ol> : <ul key={this.k()}>{items}</ul>;
      }
      case 'table': {
        const tb = t as Tokens.Table;
        return (
          <div className="table-wrap" key={this.k()}>
            <table>
              <thead>
                <tr>
                  {tb.header.map((cell) => (
                    <th key={this.k()} scope="col">
                      {this.inline(cell.tokens)}
                    </th>
                  ))}
                </tr>
              </thead>
              <tbody>
                {tb.rows.map((row) => (
                  <tr key={this.k()}>
                    {row.map((cell) => (
                      <td key={this.k()}>{this.inline(cell.tokens)}</td>
                    ))}
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        );
      }
      case 'blockquote':
        return <blockquote key={this.k()}>{this.blocks((t as Tokens.Blockquote).tokens)}</blockquote>;
      case 'hr':
        return <hr key={this.k()} />;
      case 'space':
        return null;
      case 'html':
        // Comments (the docs' example markers) are not content; other raw HTML shows as text.
        return (t as Tokens.HTML).text.trim().startsWith('<!--') ? null : <p key={this.k()}>{(t as Tokens.HTML).text}</p>;
      case 'text': {
        const tx = t as Tokens.Text;
        return <p key={this.k()}>{tx.tokens ? this.inline(tx.tokens) : tx.text}</p>;
      }
      default:
        return 'raw' in t ? <p key={this.k()}>{String(t.raw)}</p> : null;
    }
  }

  inlineOne(t: Token): ReactNode {
    switch (t.type) {
      case 'text': {
        const tx = t as Tokens.Text;
        return tx.tokens ? <span key={this.k()}>{this.inline(tx.tokens)}</span> : tx.text;
      }
      case 'escape':
        return (t as Tokens.Escape).text;
      case 'strong':
        return <strong key={this.k()}>{this.inline((t as Tokens.Strong).tokens)}</strong>;
      case 'em':
        return <em key={this.k()}>{this.inline((t as Tokens.Em).tokens)}</em>;
      case 'del':
        return <del key={this.k()}>{this.inline((t as Tokens.Del).tokens)}</del>;
      case 'codespan':
        return <code key={this.k()}>{(t as Tokens.Codespan).text}</code>;
      case 'br':
        return <br key={this.k()} />;
      case 'link': {
        const l = t as Tokens.Link;
        const to = helpLink(this.opts.page, l.href);
        const body = this.inline(l.tokens);
        if (to) {
          return (
            <Link key={this.k()} to={to}>
              {body}
            </Link>
          );
        }
        if (/^https?:/i.test(l.href)) {
          return (
            <a key={this.k()} href={l.href} rel="noopener noreferrer">
              {body}
            </a>
          );
        }
        // A link to a repository file (not a page of the docs): its name, as text.
        return <span key={this.k()}>{body}</span>;
      }
      case 'image': {
        const img = t as Tokens.Image;
        // Screenshots live beside the docs, served by Loom: shown only when the path is ours.
        return (
          <span key={this.k()} className="img-alt">
            [{img.text}]
          </span>
        );
      }
      case 'html':
        return (t as Tokens.HTML).text.startsWith('<!--') ? null : (t as Tokens.HTML).text;
      default:
        return 'raw' in t ? String(t.raw) : null;
    }
  }
}

/** Render a Markdown page as React elements. */
export function renderMarkdown(text: string, opts: RenderOptions): ReactNode[] {
  return new Renderer(opts).blocks(lexer(text));
}
