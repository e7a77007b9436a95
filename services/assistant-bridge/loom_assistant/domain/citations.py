"""Citations as the agent writes them (spec 000 "Citations"): parsed from the answer's text.

Kinds: `[memory:<key>@v<n>]`, `[help:<page> § <breadcrumb>]` (section optional),
`[task:<id>]`, `[doc:<source> § <section>]`, `[code:<path>:<line>]`, and a fenced ```sql block
holding a statement exactly as it ran. Only the first MAX_CHECKED are checked.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

MAX_CHECKED = 50

_BRACKET = re.compile(r"\[(memory|help|task|doc|code):([^\[\]\n]+)\]")
_SQL_FENCE = re.compile(r"```sql[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_MEMORY = re.compile(r"^(?P<key>.+?)@v(?P<version>\d+)$")

REASON_COULD_NOT_RUN = "the check could not run"
REASON_PAST_LIMIT = "past the 50 citations an answer has checked"
REASON_MEMORY_NOT_RETURNED = (
    "this key was not returned to this answer by memory.search, memory.ask, memory.get, memory.list or memory.inspect"
)
REASON_MEMORY_NOT_RECORDED = "this deployment does not record memory reads"
REASON_SQL_NOT_RUN = "this statement did not run in this answer (insights.query)"
REASON_TASK_NOT_RETURNED = "no call of this answer returned this task"
# Spec 000 "Citations": a code index is a namespace of its own, which the answer's token does not reach.
REASON_CODE_NOT_CHECKED = "code citations are not checked: a code index is a namespace of its own"
REASON_DOC_NOT_A_DOCUMENT = "this document is not one of Loom's documents (the shipped docs)"
REASON_DOC_NO_SUCH_SECTION = "the document has no such section"
REASON_DOC_AMBIGUOUS_SECTION = "the section names more than one heading of the document"
_LINES = re.compile(r"^(?P<start>\d+)(?:\s*-\s*L?(?P<end>\d+))?$")


@dataclass(frozen=True, slots=True)
class Citation:
    """One citation as written: its kind, what it names (ref), and for help/doc its section."""

    kind: str
    ref: str
    text: str
    section: str = ""
    version: int = 0


@dataclass(slots=True)
class Checked:
    """A citation after its check."""

    citation: Citation
    verified: bool
    reason: str = ""
    anchor: str = ""
    # True when the check itself failed (could not run, not recorded, not checked): no verdict.
    undecided: bool = False
    extra: dict[str, str] = field(default_factory=dict)

    def wire(self) -> dict[str, object]:
        out: dict[str, object] = {
            "kind": self.citation.kind,
            "ref": self.citation.ref,
            "verified": self.verified,
            "text": self.citation.text,
        }
        if self.reason and not self.verified:
            out["reason"] = self.reason
        if self.anchor:
            out["anchor"] = self.anchor
        return out


def sql_digests(statement: str) -> set[str]:
    """Digests a ledgered insights.query row may carry for this statement: the ledger's
    `sha256:<32 hex>` text digest and a full hex SHA-256, of the text as written and trimmed
    (a trailing `;` is dropped by insights.query)."""
    forms = {statement, statement.strip()}
    forms |= {f.rstrip().rstrip(";").rstrip() for f in list(forms)}
    out: set[str] = set()
    for f in forms:
        h = hashlib.sha256(f.encode()).hexdigest()
        out |= {h, "sha256:" + h, "sha256:" + h[:32]}
    return out


def parse(text: str) -> list[Citation]:
    """Every citation in the answer, in the order it first appears, each once."""
    found: list[tuple[int, Citation]] = []
    for m in _BRACKET.finditer(text):
        kind, body = m.group(1), m.group(2).strip()
        c = _bracket(kind, body, m.group(0))
        if c is not None:
            found.append((m.start(), c))
    for m in _SQL_FENCE.finditer(text):
        stmt = m.group(1).strip()
        if stmt:
            found.append(
                (m.start(), Citation("sql", "sha256:" + hashlib.sha256(stmt.rstrip(";").rstrip().encode()).hexdigest()[:32], stmt))
            )
    found.sort(key=lambda p: p[0])
    seen: set[tuple[str, str, str]] = set()
    out: list[Citation] = []
    for _, c in found:
        key = (c.kind, c.ref, c.section)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def _bracket(kind: str, body: str, text: str) -> Citation | None:
    if kind == "memory":
        m = _MEMORY.match(body)
        if m is None:
            return Citation("memory", body, text)
        return Citation("memory", m.group("key"), text, version=int(m.group("version")))
    if kind in ("help", "doc"):
        page, _, section = body.partition("§")
        return Citation(kind, page.strip(), text, section=section.strip())
    if kind == "code":
        path, sep, tail = body.rpartition(":")
        tail = tail.strip().removeprefix("L")
        if sep and _LINES.match(tail):
            return Citation("code", path.strip(), text, section=tail.replace(" ", ""))
        return Citation("code", body, text)
    return Citation(kind, body, text)


def doc_page(ref: str) -> str:
    """The docs page a document citation's source names: `docs/x.md`, `./x.md`, `x.md` and `x`
    all name the page `x.md` of Loom's shipped docs."""
    page = ref.strip()
    for prefix in ("loom://docs/", "file://", "./", "/"):
        page = page.removeprefix(prefix)
    page = page.removeprefix("docs/")
    if page and not page.endswith(".md"):
        page += ".md"
    return page


def split_checked(citations: list[Citation]) -> tuple[list[Citation], list[Citation]]:
    """The citations checked and those past the limit."""
    return citations[:MAX_CHECKED], citations[MAX_CHECKED:]
