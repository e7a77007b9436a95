"""`loom decisions extract`, the pure part (spec 003, Extract decisions from a document): the
document's sections and windows, the prompts, the model's replies read, quotes grounded in the
text, candidates checked and shaped into decision.record bodies. No I/O.

Sections are the Markdown headings' (code fences aside), each with its breadcrumb
(`Design > Storage`); the text above the first heading is `(untitled)`. A section whose own text
has no words once images are removed, or holds an image and at most a caption (80 characters
without markup), is image-only and is not sent. Windows group whole sections up to
`window_chars`; a section longer than a window is cut into window-size pieces.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any, TypedDict

from loom_api.decisions.v1 import decisions_pb2 as dpb

from .files import detect_files
from .keys import MissingIdentity, decision_key
from .statement import ALTERNATIVES_MAX, OUTCOME_MAX, REASONING_MAX, SCENARIO_MAX

EXTRACTOR_AGENT = "loom-decisions"
EXTRACTOR_USER = "-"
EXTRACTOR_SESSION = "-"
EXTRACTOR_ACTOR = "process:cli:decisions"
DESIGN_DOC_TAG = "source-kind:design_doc"
CONSTRAINT_TAG = "constraint"
SOURCE_CHANGED_TAG = "source-changed"
CONFIDENCE = 0.5
CAPTION_CHARS = 80
QUOTE_MIN_CHARS = 12
EXTRACT_TOKENS = 12000
SUPPORT_TOKENS = 8000
RECAP_WORDS = ("recap", "summary", "background")

SYSTEM = """You read one part of a design document and list the decisions it states.
A decision is a choice made or proposed: an outcome, the reasons the document gives for it, and
the options it rejects (with the reason given, or none). Write each in your own concise words.
Every claim cites one to three short quotes copied exactly from the text. A decision the text
states with no reason has no reasons. The current or former approach a new design replaces is a
rejected option of the new design. A measurement, a recap, an agenda or a benchmark result is no
decision. Mark each decision's stage: "decided" when the text says it was chosen or built,
"proposed" for a proposal, an RFC, a plan, future work or a follow-up. Mark "constraint": true
for a ban or an invariant. When a known decision (listed) is what the text records, reuse its
category and scenario exactly.
Answer one JSON object:
{"decisions": [{"category": str, "scenario": str, "outcome": str, "outcome_quotes": [str],
  "reasons": [{"text": str, "quotes": [str]}],
  "rejected": [{"option": str, "reason": str, "quotes": [str]}],
  "stage": "decided" | "proposed", "constraint": bool}]}"""

SUPPORT_SYSTEM = """You check claims against one part of a design document. A claim is supported
only when its quotes, read in the context of the document, state or directly imply it:
summarising and combining quotes is fine; adding a reason, a cause, a number, a name or a
rejected option is not. Also say, for each stored decision listed, whether the text still states
it (true or false) and which candidate, if any, restates it.
Answer one JSON object:
{"claims": [{"id": str, "supported": bool}],
 "stored": [{"key": str, "stated": bool, "restated_by": str | null}]}"""

_HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_MD_IMAGE = re.compile(r"!\[[^\]\n]*\](?:\([^)\n]*\)|\[[^\]\n]*\])")
_HTML_IMAGE = re.compile(r"<img\b[^>\n]*>", re.IGNORECASE)
_PLACEHOLDER = re.compile(r"\[(?:image(?::[^\]\n]*)?|image \d+)\]", re.IGNORECASE)
_LINK = re.compile(r"\[([^\]\n]*)\]\([^)\n]*\)")
_REF_DEF = re.compile(r"^\s*\[[^\]\n]+\]:\s*\S+.*$", re.MULTILINE)
_TAG = re.compile(r"</?[a-z][a-z0-9-]*(?:\s[^<>\n]*)?/?>")
_URL = re.compile(r"\bhttps?://\S+")
_WORD = re.compile(r"\w", re.UNICODE)
_WS = re.compile(r"\s+")
_BACKTICKED = re.compile(r"`([^`\n]{2,80})`")
_PULL_REQUEST = re.compile(r"(?<![\w/#])#(\d{2,7})\b|\b(?:PR|pull request)\s*#?(\d{2,7})\b", re.IGNORECASE)
# A qualified name (`a.b.C`, `A::b`) or a bare class name (MergeTreeData: two capitals or more).
_QUALIFIED = re.compile(r"\b[A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)+(?:\(\))?")
_CLASS_NAME = re.compile(r"\b[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+\b")
# Dotted words that are prose, not names: abbreviations, versions, domains and files handled as paths.
_NOT_A_NAME = re.compile(r"^(?:e\.g|i\.e|etc|vs|[\d.]+)$|\.(?:com|org|io|net|md|txt|json|ya?ml|toml|html?)$", re.IGNORECASE)
_TEST_PATH = re.compile(
    r"(^|/)(tests?|testing|__tests__|spec|specs|e2e|end[-_]to[-_]end|mocks?|__mocks__|fixtures?)(/|$)"
    r"|(^|/)(test_[^/]*|[^/]*_test\.[a-z]+|[^/]*\.(test|spec)\.[a-z]+|conftest\.py|[^/]*_mock\.[a-z]+)$",
    re.IGNORECASE,
)


def is_test_path(path: str) -> bool:
    """Common test, mock and end-to-end layouts: a name only these define links nothing."""
    return _TEST_PATH.search(path) is not None


@dataclass(frozen=True, slots=True)
class Section:
    breadcrumb: str
    text: str
    has_subsections: bool = False


@dataclass(frozen=True, slots=True)
class Window:
    sections: tuple[Section, ...]

    def text(self, title: str = "") -> str:
        head = f"[document: {title[:200]}]\n" if title else ""
        return head + "\n\n".join(f"## {s.breadcrumb}\n{s.text}" for s in self.sections)


def title_of(markdown: str) -> str:
    for line in _lines_outside_code(markdown):
        m = _HEADING.match(line)
        if m and len(m.group(1)) == 1:
            return m.group(2).strip()
    return ""


def _lines_outside_code(markdown: str) -> list[str]:
    out, fenced = [], False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return out


def sections(markdown: str) -> list[Section]:
    """The document's sections in order, each with its breadcrumb and own text."""
    stack: list[tuple[int, str]] = []
    found: list[tuple[str, list[str], int]] = [("(untitled)", [], 0)]
    fenced = False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            found[-1][1].append(line)
            continue
        m = None if fenced else _HEADING.match(line)
        if m is None:
            found[-1][1].append(line)
            continue
        level = len(m.group(1))
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, m.group(2).strip()))
        found.append((" > ".join(t for _, t in stack), [], level))
    out: list[Section] = []
    for i, (crumb, lines, level) in enumerate(found):
        text = "\n".join(lines).strip()
        nxt = found[i + 1][2] if i + 1 < len(found) else 0
        has_sub = level > 0 and nxt > level
        if i == 0 and not text:
            continue
        out.append(Section(crumb, text, has_sub))
    return out


def caption_chars(text: str) -> int:
    """The characters of a section's text besides images and markup."""
    t = _INLINE_CODE.sub(" code ", text)
    t = _MD_IMAGE.sub(" ", t)
    t = _HTML_IMAGE.sub(" ", t)
    t = _PLACEHOLDER.sub(" ", t)
    t = _LINK.sub(r"\1", t)
    t = _REF_DEF.sub(" ", t)
    t = _TAG.sub(" ", t)
    t = _URL.sub(" ", t)
    t = t.replace("[]", " ")
    return len(_WS.sub(" ", t).strip())


def has_image(text: str) -> bool:
    plain = _INLINE_CODE.sub(" ", "\n".join(_lines_outside_code(text)))
    return bool(_MD_IMAGE.search(plain) or _HTML_IMAGE.search(plain) or _PLACEHOLDER.search(plain))


def skip_reason(s: Section) -> str:
    """Why a section is not sent to the model ('' when it is)."""
    if has_image(s.text) and caption_chars(s.text) <= CAPTION_CHARS:
        return "image-only, rationale not extracted"
    if not _WORD.search(_MD_IMAGE.sub(" ", s.text)):
        return "" if s.has_subsections else "no words"
    return ""


def windows(secs: list[Section], window_chars: int) -> list[Window]:
    out: list[Window] = []
    cur: list[Section] = []
    size = 0
    for s in secs:
        pieces = [s] if len(s.text) <= window_chars else _cut(s, window_chars)
        for p in pieces:
            cost = len(p.breadcrumb) + len(p.text) + 8
            if cur and size + cost > window_chars:
                out.append(Window(tuple(cur)))
                cur, size = [], 0
            cur.append(p)
            size += cost
    if cur:
        out.append(Window(tuple(cur)))
    return out


def _cut(s: Section, n: int) -> list[Section]:
    text, out = s.text, []
    while text:
        cut = text.rfind("\n", n // 2, n) if len(text) > n else len(text)
        cut = cut if cut > 0 else min(n, len(text))
        out.append(Section(s.breadcrumb, text[:cut].strip(), s.has_subsections))
        text = text[cut:].strip()
    return out


def _norm(text: str) -> str:
    return _WS.sub(" ", text).strip().casefold()


def find_span(quote: str, window: Window) -> Section | None:
    """The section whose text holds the quote (whitespace runs as one space, letter case
    ignored); None when no section does or the quote is too short to rest on."""
    q = _norm(quote.strip().strip('"“”'))
    if len(q) < QUOTE_MIN_CHARS:
        return None
    for s in window.sections:
        if q in _norm(s.text):
            return s
    return None


def in_recap(section: Section) -> bool:
    words = {w.casefold() for part in section.breadcrumb.split(" > ") for w in re.findall(r"\w+", part)}
    return any(w in words for w in RECAP_WORDS)


@dataclass
class Candidate:
    category: str
    scenario: str
    outcome: str
    outcome_quotes: list[str]
    reasons: list[tuple[str, list[str]]]
    rejected: list[tuple[str, str, list[str]]]
    stage: str
    constraint: bool
    section: str = ""
    notes: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return decision_key(self.category, self.scenario)

    def reasoning(self) -> str:
        return "; ".join(r for r, _ in self.reasons) or self.outcome

    def alternatives(self) -> list[str]:
        return [f"{o} — rejected: {r}" if r else o for o, r, _ in self.rejected][:ALTERNATIVES_MAX]

    def quotes(self) -> list[str]:
        return [*self.outcome_quotes, *(q for _, qs in self.reasons for q in qs), *(q for _, _, qs in self.rejected for q in qs)]


class Unreadable(ValueError):
    """A reply that is no JSON object of the asked shape."""


def _json_object(reply: str) -> dict[str, Any]:
    text = reply.strip()
    if text.startswith("```"):
        text = text.strip("`")
        text = text[text.find("{") :]
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise Unreadable("no JSON object in the reply")
    try:
        obj = json.loads(text[start : end + 1])
    except json.JSONDecodeError as exc:
        raise Unreadable(f"the reply is not JSON: {exc.msg}") from None
    if not isinstance(obj, dict):
        raise Unreadable("the reply is not a JSON object")
    return obj


def _strs(v: Any) -> list[str]:
    return [str(x) for x in v if isinstance(x, str) and x.strip()] if isinstance(v, list) else []


def parse_read(reply: str) -> list[Candidate]:
    obj = _json_object(reply)
    items = obj.get("decisions")
    if not isinstance(items, list):
        raise Unreadable("the reply has no decisions list")
    out: list[Candidate] = []
    for d in items:
        if not isinstance(d, dict):
            continue
        reasons = [(str(r.get("text", "")).strip(), _strs(r.get("quotes"))) for r in d.get("reasons") or [] if isinstance(r, dict)]
        rejected = [
            (str(r.get("option", "")).strip(), str(r.get("reason") or "").strip(), _strs(r.get("quotes")))
            for r in d.get("rejected") or []
            if isinstance(r, dict)
        ]
        out.append(
            Candidate(
                category=str(d.get("category", "")).strip(),
                scenario=str(d.get("scenario", "")).strip(),
                outcome=str(d.get("outcome", "")).strip(),
                outcome_quotes=_strs(d.get("outcome_quotes")),
                reasons=[r for r in reasons if r[0]],
                rejected=[r for r in rejected if r[0]],
                # Anything but a plain "decided" is recorded as a proposal.
                stage="decided" if str(d.get("stage", "")).strip().lower() == "decided" else "proposed",
                constraint=d.get("constraint") is True,
            )
        )
    return out


def ground(c: Candidate, window: Window) -> Candidate | None:
    """Keep the claims whose quotes are in the text the model read; None drops the decision.
    The decision's section is the one its first located outcome quote is in."""
    located = [s for s in (find_span(q, window) for q in c.outcome_quotes) if s is not None]
    if not located:
        c.notes.append("dropped: none of the outcome's quotes is in the document text")
        return None
    outside = [s for s in located if not in_recap(s)]
    if not outside:
        c.notes.append("dropped: the quote is in a recap, summary or background section")
        return None
    c.section = outside[0].breadcrumb
    kept_reasons = []
    for text, qs in c.reasons:
        if any(find_span(q, window) for q in qs):
            kept_reasons.append((text, [q for q in qs if find_span(q, window)]))
        else:
            c.notes.append(f"reason '{text}' left out: none of its quotes is in the document text")
    kept_rejected = []
    for opt, why, qs in c.rejected:
        if any(find_span(q, window) for q in qs):
            kept_rejected.append((opt, why, [q for q in qs if find_span(q, window)]))
        else:
            c.notes.append(f"rejected option '{opt}' left out: none of its quotes is in the document text")
    c.reasons, c.rejected = kept_reasons, kept_rejected
    c.outcome_quotes = [q for q in c.outcome_quotes if find_span(q, window)]
    return c


def fits(c: Candidate) -> str:
    """Why a candidate does not fit decision.record ('' when it does)."""
    if not c.category or not c.scenario or not c.outcome:
        return "category, scenario and outcome are required"
    try:
        decision_key(c.category, c.scenario)
    except MissingIdentity as exc:
        return f"{exc.field} has no letter or digit"
    if len(c.scenario) > SCENARIO_MAX or len(c.outcome) > OUTCOME_MAX or len(c.reasoning()) > REASONING_MAX:
        return "a part is longer than decision.record keeps"
    return ""


class Claim(TypedDict):
    """One claim the support check asks the model about, with the quotes said to support it."""

    id: str
    claim: str
    quotes: list[str]


def claims(cands: list[Candidate]) -> list[Claim]:
    """The support check's claims: id `<i>.outcome`, `<i>.reason.<j>`, `<i>.rejected.<j>`."""
    out: list[Claim] = []
    for i, c in enumerate(cands):
        out.append(Claim(id=f"{i}.outcome", claim=c.outcome, quotes=c.outcome_quotes))
        out += [Claim(id=f"{i}.reason.{j}", claim=t, quotes=qs) for j, (t, qs) in enumerate(c.reasons)]
        out += [Claim(id=f"{i}.rejected.{j}", claim=f"rejected {o}: {w}".strip(": "), quotes=qs) for j, (o, w, qs) in enumerate(c.rejected)]
    return out


@dataclass
class SupportVerdict:
    supported: dict[str, bool]
    stored: dict[str, bool]
    restated_by: dict[str, int]


def parse_support(reply: str) -> SupportVerdict:
    obj = _json_object(reply)
    sup = {str(c["id"]): c["supported"] for c in obj.get("claims") or [] if isinstance(c, dict) and isinstance(c.get("supported"), bool)}
    stored: dict[str, bool] = {}
    restated: dict[str, int] = {}
    for s in obj.get("stored") or []:
        if not isinstance(s, dict) or not isinstance(s.get("key"), str):
            continue
        if isinstance(s.get("stated"), bool):
            stored[s["key"]] = s["stated"]
        rb = s.get("restated_by")
        if isinstance(rb, (str, int)) and str(rb).isdigit():
            restated[s["key"]] = int(rb)
    return SupportVerdict(sup, stored, restated)


def apply_support(cands: list[Candidate], v: SupportVerdict) -> list[Candidate]:
    """Leave out the claims the check does not support; drop a decision whose outcome it does not."""
    out: list[Candidate] = []
    for i, c in enumerate(cands):
        if not v.supported.get(f"{i}.outcome", False):
            c.notes.append("dropped: the support check found the outcome not stated")
            continue
        reasons: list[tuple[str, list[str]]] = []
        for j, reason in enumerate(c.reasons):
            if v.supported.get(f"{i}.reason.{j}", False):
                reasons.append(reason)
            else:
                c.notes.append(f"reason '{reason[0]}' left out: the support check found it not stated")
        rejected: list[tuple[str, str, list[str]]] = []
        for j, option in enumerate(c.rejected):
            if v.supported.get(f"{i}.rejected.{j}", False):
                rejected.append(option)
            else:
                c.notes.append(f"rejected option '{option[0]}' left out: the support check found it not stated")
        c.reasons, c.rejected = reasons, rejected
        out.append(c)
    return out


def read_prompt(window_text: str, known: list[tuple[str, str]]) -> str:
    lines = []
    if known:
        lines.append("Known decisions (category | scenario):")
        lines += [f"- {cat} | {scen}" for cat, scen in known]
        lines.append("")
    lines.append("Document part:")
    lines.append(window_text)
    return "\n".join(lines)


def support_prompt(window_text: str, cands: list[Candidate], stored: list[tuple[str, str]]) -> str:
    body = {
        "claims": claims(cands),
        "candidates": [{"index": i, "outcome": c.outcome} for i, c in enumerate(cands)],
        "stored": [{"key": k, "statement": s} for k, s in stored],
    }
    return "Document part:\n" + window_text + "\n\nCheck:\n" + json.dumps(body, ensure_ascii=False)


def code_names(quotes: list[str]) -> list[str]:
    """The names a decision's quotes hold, in order: backticked ones, qualified ones, bare class names."""
    text = " ".join(quotes)
    found: list[str] = []
    for m in _BACKTICKED.finditer(text):
        found.append(m.group(1).strip())
    bare = _BACKTICKED.sub(" ", text)
    for m in _QUALIFIED.finditer(bare):
        name = m.group(0)
        if not _NOT_A_NAME.search(name.removesuffix("()")):
            found.append(name)
    for m in _CLASS_NAME.finditer(_QUALIFIED.sub(" ", bare)):
        found.append(m.group(0))
    return list(dict.fromkeys(found))


def pull_requests(quotes: list[str]) -> list[str]:
    text = " ".join(quotes)
    return list(dict.fromkeys(f"#{m.group(1) or m.group(2)}" for m in _PULL_REQUEST.finditer(text)))


def files_from_quotes(c: Candidate) -> list[str]:
    """Repository paths a cited quote writes out, as memory.set detects one (tests aside)."""
    return [f for f in detect_files(c.quotes()) if not is_test_path(f)]


def source_resource_id(namespace: str, source_uri: str, breadcrumb: str) -> str:
    return f"knowledge:{namespace}/{source_uri}#{breadcrumb}"


def record_body(c: Candidate, namespace: str, source_uri: str, files: list[str], extra_tags: list[str]) -> dpb.RecordDecisionRequest:
    """The decision.record request the run sends (and a dry run prints)."""
    tags = [DESIGN_DOC_TAG, *([CONSTRAINT_TAG] if c.constraint else []), *extra_tags]
    return dpb.RecordDecisionRequest(
        category=c.category,
        scenario=c.scenario,
        outcome=c.outcome,
        reasoning=c.reasoning(),
        alternatives=c.alternatives(),
        confidence=CONFIDENCE,
        stage=c.stage,
        files=files,
        source_resource_id=source_resource_id(namespace, source_uri, c.section),
        source_class="derived",
        tags=tags,
    )
