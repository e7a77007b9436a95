// An answer's text (spec 000 "Rendering"): model output that stored text can steer, so it is
// drawn as text with Markdown emphasis, lists, tables and code only. No HTML (shown as text), no
// images (their alt text), no links (their words): the only links are the citations, each drawn
// as a number by where it first appears, linking to its Sources row once the check has ended.

import { type Token, type Tokens, lexer } from 'marked';
import { Fragment, type ReactNode } from 'react';
import { MarkdownRenderer } from '../../lib/markdown';
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

/** The answer: emphasis, lists, tables and code; citation markers drawn as numbers. */
class AnswerRenderer extends MarkdownRenderer {
  constructor(
    private readonly markers: Marker[],
    private readonly props: AnswerTextProps,
  ) {
    super();
  }

  /** Code keeps the markers as written. */
  protected override code(s: string): string {
    return s.replace(PLACEHOLDER, (_, i: string) => this.markers[Number(i)]?.raw ?? '');
  }

  /** Plain text with each marker drawn as its number. */
  protected override words(s: string): ReactNode[] {
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

  protected heading(h: Tokens.Heading): ReactNode {
    // A heading is emphasis here: the answer sits inside the panel's own headings.
    return (
      <p key={this.k()}>
        <strong>{this.inline(h.tokens)}</strong>
      </p>
    );
  }

  protected otherBlock(t: Token): ReactNode {
    if (t.type === 'blockquote') {
      // Not one of the answer's forms: its words, as paragraphs.
      return this.blocks((t as Tokens.Blockquote).tokens);
    }
    // Raw HTML, rules and anything else: the text as written, never markup.
    return 'raw' in t ? <p key={this.k()}>{this.words(String(t.raw))}</p> : null;
  }

  protected otherInline(t: Token): ReactNode {
    switch (t.type) {
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
  return new AnswerRenderer(markers, props).blocks(lexer(text, { gfm: true }));
}

export function AnswerText(props: AnswerTextProps) {
  return <div className="answer-text">{renderAnswer(props)}</div>;
}
