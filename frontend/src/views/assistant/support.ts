// The support label above an answer's Sources, in the spec's words (spec 000 "Rendering",
// "Support"), and its "Why this label" note. The server decides support; this only words it.

import type { CheckedCitation } from './citations';

export interface Label {
  text: string;
  why: string;
}

const KNOWN = new Set(['none', 'supported', 'unsupported', 'unchecked']);

/**
 * The label for a finished answer. `checkFinished` is false when loom.citations never came (the
 * connection was lost after the text, or the page was left). An answer whose support is none
 * has no label; a value this dashboard does not know reads as unchecked.
 */
export function supportLabel(a: {
  support: string | undefined;
  citations: readonly CheckedCitation[] | undefined;
  unknownNames?: readonly string[];
  checkFinished: boolean;
}): Label | undefined {
  if (!a.checkFinished) {
    return {
      text: "Check didn't finish",
      why: 'The connection ended before Loom finished checking this answer, so its sources were never checked. Ask again to check them.',
    };
  }
  const support = a.support && KNOWN.has(a.support) ? a.support : 'unchecked';
  const cites = a.citations ?? [];
  const m = cites.length;
  const n = cites.filter((c) => c.verified).length;
  switch (support) {
    case 'none':
      return undefined;
    case 'supported':
      return n === m
        ? { text: 'Checked against what Loom holds', why: 'Every source this answer cites was found in Loom by this answer’s own reads.' }
        : {
            text: `Partly confirmed: ${n} of ${m} sources found in Loom`,
            why: 'Some sources were found in Loom; the others could not be confirmed (see each one’s reason below). Trust only the parts the confirmed sources back.',
          };
    case 'unsupported':
      if (a.unknownNames && a.unknownNames.length) {
        return {
          text: `Couldn't confirm: it names ${a.unknownNames.join(', ')}`,
          why: 'This Loom serves no op and documents no setting by that name: the answer may have invented it.',
        };
      }
      if (m > 0) {
        return {
          text: `Couldn't confirm: 0 of ${m} sources found in Loom`,
          why: 'None of the sources it cites was found by this answer’s reads of Loom.',
        };
      }
      return {
        text: "Couldn't confirm: it gives no sources",
        why: 'It read data from Loom but cites none of it, so nothing ties its claims to what Loom holds.',
      };
    default:
      return m > 0
        ? {
            text: 'Sources not checked',
            why: 'Loom could not check its sources (a check could not run, or they are of a kind Loom does not check).',
          }
        : {
            text: 'Not checked: it cites nothing Loom holds',
            why: 'It rests on counts or findings that have no source to cite, or a read it made failed.',
          };
  }
}
