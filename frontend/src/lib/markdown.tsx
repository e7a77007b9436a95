// Markdown to React elements (never HTML strings): the docs' headings, paragraphs, lists,
// tables, code and links. Raw HTML in a page is shown as text; images show their alt text, so
// nothing is fetched from anywhere. Links to other .md pages open on the Help page.

import { type Token, type Tokens, lexer } from 'marked';
import { Fragment, type ReactNode } from 'react';
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

/**
 * What every Markdown view draws alike, as React elements (never HTML strings): paragraphs,
 * code, lists, tables, and emphasis, code spans and breaks inline. What a view allows beyond
 * that (headings, links, images, raw HTML) is its own: `heading`, `otherBlock`, `otherInline`.
 * `words` draws plain text and `code` a code's text, each a view may mark up.
 */
export abstract class MarkdownRenderer {
  private key = 0;

  protected k(): number {
    return this.key++;
  }

  protected words(s: string): ReactNode {
    return s;
  }

  protected code(s: string): string {
    return s;
  }

  protected abstract heading(h: Tokens.Heading): ReactNode;
  protected abstract otherBlock(t: Token): ReactNode;
  protected abstract otherInline(t: Token): ReactNode;

  blocks(tokens: Token[]): ReactNode[] {
    return tokens.map((t) => this.block(t));
  }

  inline(tokens: Token[] | undefined): ReactNode[] {
    return (tokens ?? []).map((t) => this.inlineOne(t));
  }

  block(t: Token): ReactNode {
    switch (t.type) {
      case 'heading':
        return this.heading(t as Tokens.Heading);
      case 'paragraph':
        return <p key={this.k()}>{this.inline((t as Tokens.Paragraph).tokens)}</p>;
      case 'code': {
        const c = t as Tokens.Code;
        return (
          <pre key={this.k()} className="code">
            <code data-lang={c.lang || undefined}>{this.code(c.text)}</code>
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
      case 'space':
        return null;
      case 'text': {
        const tx = t as Tokens.Text;
        return <p key={this.k()}>{tx.tokens ? this.inline(tx.tokens) : this.words(tx.text)}</p>;
      }
      default:
        return this.otherBlock(t);
    }
  }

  inlineOne(t: Token): ReactNode {
    switch (t.type) {
      case 'text': {
        const tx = t as Tokens.Text;
        return <Fragment key={this.k()}>{tx.tokens ? this.inline(tx.tokens) : this.words(tx.text)}</Fragment>;
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
        return <code key={this.k()}>{this.code((t as Tokens.Codespan).text)}</code>;
      case 'br':
        return <br key={this.k()} />;
      default:
        return this.otherInline(t);
    }
  }
}

/** The docs: headings with their anchors, links within the docs (or out over http), images as their alt text. */
class DocsRenderer extends MarkdownRenderer {
  private headings = 0;
  constructor(private readonly opts: RenderOptions) {
    super();
  }

  protected heading(h: Tokens.Heading): ReactNode {
    const anchor = this.opts.anchors[this.headings++] ?? slug(h.text);
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

  protected otherBlock(t: Token): ReactNode {
    switch (t.type) {
      case 'blockquote':
        return <blockquote key={this.k()}>{this.blocks((t as Tokens.Blockquote).tokens)}</blockquote>;
      case 'hr':
        return <hr key={this.k()} />;
      case 'html':
        // Comments (the docs' example markers) are not content; other raw HTML shows as text.
        return (t as Tokens.HTML).text.trim().startsWith('<!--') ? null : <p key={this.k()}>{(t as Tokens.HTML).text}</p>;
      default:
        return 'raw' in t ? <p key={this.k()}>{String(t.raw)}</p> : null;
    }
  }

  protected otherInline(t: Token): ReactNode {
    switch (t.type) {
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
        // Nothing is fetched from anywhere: an image shows as its alt text.
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
  return new DocsRenderer(opts).blocks(lexer(text));
}
