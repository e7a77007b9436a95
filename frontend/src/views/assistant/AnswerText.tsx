// An answer's text (spec 000 "Rendering"): model output that stored text can steer, so it is
// drawn as text with Markdown emphasis, lists, tables and code only. No HTML (shown as text), no
// images (their alt text), no links (their words): the only links are the citations, each drawn
// as a number by where it first appears, linking to its Sources row once the check has ended.

import { type Token, type Tokens, lexer } from 'marked';
import { Fragment, type ReactNode } from 'react';
import { type CheckedCitation, citationFor, citationNumbers } from './citations';

// Private-use characters stand in for each marker while Markdown is parsed, so a marker's
// brackets and underscores are never read as Markdown; the answer's own are dropped first.
const OPEN = '\uE000';
const CLOSE = '\uE001';
const PLACEHOLDER = /\uE000(\d+)\uE001/g;

export interface AnswerTextProps {
  text: string;
  citations?: readonly CheckedCitation[];
  /** Whether the check ended (loom.citations came): only then does a number link to its Sources row. */
  checked: boolean;
  /** The id prefix of this answer's Sources rows (`<prefix>-<n>`). */
  sourcesId: string;
}

interface Marker {
  raw: string;
  number: number;
}

/** The text with each citation marker replaced by a placeholder, and the markers in order. */
function withPlaceholders(text: string): { text: string; markers: Marker[] } {
  const clean = text.replaceAll(OPEN, '').replaceAll(CLOSE, '');
  const markers: Marker[] = [];
  let out = '';
  let at = 0;
  for (const m of citationNumbers(clean)) {
    out += clean.slice(at, m.index) + OPEN + markers.length + CLOSE;
    markers.push({ raw: m.raw, number: m.number });
    at = m.index + m.raw.length;
  }
  return { text: out + clean.slice(at), markers };
}

class Renderer {
  private key = 0;
  constructor(
    private readonly markers: Marker[],
    private readonly props: AnswerTextProps,
  ) {}

  private k(): number {
    return this.key++;
  }

  /** Code keeps the markers as written. */
  private raw(s: string): string {
    return s.replace(PLACEHOLDER, (_, i: string) => this.markers[Number(i)]?.raw ?? '');
  }

  /** Plain text with each marker drawn as its number. */
  private words(s: string): ReactNode[] {
    const out: ReactNode[] = [];
    let at = 0;
    for (const m of s.matchAll(PLACEHOLDER)) {
      if (m.index > at) out.push(s.slice(at, m.index));
      const marker = this.markers[Number(m[1])];
      if (marker) out.push(this.cite(marker));
      at = m.index + m[0].length;
    }
    if (at < s.length) out.push(s.slice(at));
    return out;
  }

  private cite(m: Marker): ReactNode {
    const c = citationFor(m.raw, this.props.citations);
    const label = `[${m.number}]`;
    if (this.props.checked && c) {
      return (
        <sup key={this.k()} className="cite">
          <a href={`#${this.props.sourcesId}-${m.number}`} aria-label={`Source ${m.number}`}>
            {label}
          </a>
        </sup>
      );
    }
    return (
      <sup key={this.k()} className="cite" title={m.raw}>
        {label}
      </sup>
    );
  }

  blocks(tokens: Token[]): ReactNode[] {
    return tokens.map((t) => this.block(t));
  }

  inline(tokens: Token[] | undefined): ReactNode[] {
    return (tokens ?? []).map((t) => this.inlineOne(t));
  }

  block(t: Token): ReactNode {
    switch (t.type) {
      case 'heading':
        // A heading is emphasis here: the answer sits inside the panel's own headings.
        return (
          <p key={this.k()}>
            <strong>{this.inline((t as Tokens.Heading).tokens)}</strong>
          </p>
        );
      case 'paragraph':
        return <p key={this.k()}>{this.inline((t as Tokens.Paragraph).tokens)}</p>;
      case 'code': {
        const c = t as Tokens.Code;
        return (
          <pre key={this.k()} className="code">
            <code data-lang={c.lang || undefined}>{this.raw(c.text)}</code>
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
      case 'blockquote':
        // Not one of the answer's forms: its words, as paragraphs.
        return this.blocks((t as Tokens.Blockquote).tokens);
      default:
        // Raw HTML, rules and anything else: the text as written, never markup.
        return 'raw' in t ? <p key={this.k()}>{this.words(String(t.raw))}</p> : null;
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
        return <code key={this.k()}>{this.raw((t as Tokens.Codespan).text)}</code>;
      case 'br':
        return <br key={this.k()} />;
      case 'link': {
        // No links in the answer's text but its citations: a link's words, as text (a bare
        // URL is its own words).
        const l = t as Tokens.Link;
        return <Fragment key={this.k()}>{l.tokens?.length ? this.inline(l.tokens) : this.words(l.text)}</Fragment>;
      }
      case 'image':
        // No image is fetched: one would carry what the answer read away in its URL.
        return (
          <span key={this.k()} className="img-alt">
            [image: {this.words((t as Tokens.Image).text)}]
          </span>
        );
      default:
        // Raw HTML included: as text.
        return 'raw' in t ? <Fragment key={this.k()}>{this.words(String(t.raw))}</Fragment> : null;
    }
  }
}

/** The answer's text as React elements (never an HTML string). */
export function renderAnswer(props: AnswerTextProps): ReactNode[] {
  const { text, markers } = withPlaceholders(props.text);
  return new Renderer(markers, props).blocks(lexer(text, { gfm: true }));
}

export function AnswerText(props: AnswerTextProps) {
  return <div className="answer-text">{renderAnswer(props)}</div>;
}
