"""Each citation kind's verdict from its input (pure; the service reads the inputs): the
answer's exposure rows, its ledger rows, a help.verify answer."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from . import citations as cit
from .ledger import LedgerCall


def memory(c: cit.Citation, exposed_keys: Iterable[str]) -> cit.Checked:
    """Verified when one of the answer's memory reads was returned the key (versions are not
    compared: exposure rows record keys)."""
    ok = c.ref in set(exposed_keys)
    return cit.Checked(c, ok, "" if ok else cit.REASON_MEMORY_NOT_RETURNED)


def sql(c: cit.Citation, rows: Iterable[LedgerCall]) -> cit.Checked:
    """Verified when the block's digest is the statement digest of an insights.query call
    ledgered in this answer."""
    want = cit.sql_digests(c.text)
    for r in rows:
        digests = {r.args.get("sql", ""), r.args.get("sql_digest", ""), r.args.get("out_sql_digest", "")}
        if r.op == "insights.query" and r.ok and digests & want:
            return cit.Checked(c, True)
    return cit.Checked(c, False, cit.REASON_SQL_NOT_RUN)


def task(c: cit.Citation, rows: Iterable[LedgerCall]) -> cit.Checked:
    """Verified when a task call of this answer named the task and succeeded."""
    for r in rows:
        if r.op.startswith("task.") and r.ok and c.ref in r.args.values():
            return cit.Checked(c, True)
    return cit.Checked(c, False, cit.REASON_TASK_NOT_RETURNED)


def help_(c: cit.Citation, result: Mapping[str, Any] | None) -> cit.Checked:
    """From help.verify's result for this citation (`{ref, verified, anchor, reason}`)."""
    if not isinstance(result, Mapping):
        return cit.Checked(c, False, cit.REASON_COULD_NOT_RUN, undecided=True)
    ok = bool(result.get("verified"))
    reason = "" if ok else str(result.get("reason") or "this page or section is not in Loom's documentation")
    return cit.Checked(c, ok, reason, str(result.get("anchor") or ""))


_DOC_REASONS = {
    "page_not_indexed": cit.REASON_DOC_NOT_A_DOCUMENT,
    "no_such_section": cit.REASON_DOC_NO_SUCH_SECTION,
    "ambiguous_section": cit.REASON_DOC_AMBIGUOUS_SECTION,
}


def doc_as_help(c: cit.Citation) -> str:
    """The help-index form of a document citation: Loom's documents are its shipped docs."""
    page = cit.doc_page(c.ref)
    return f"[help:{page} § {c.section}]" if c.section else f"[help:{page}]"


def doc(c: cit.Citation, result: Mapping[str, Any] | None) -> cit.Checked:
    """From help.verify's result for the citation's help form: verified when the document is a
    shipped docs page and the section one of its headings (or names none)."""
    if not isinstance(result, Mapping):
        return cit.Checked(c, False, cit.REASON_COULD_NOT_RUN, undecided=True)
    if bool(result.get("verified")):
        return cit.Checked(c, True, anchor=str(result.get("anchor") or ""))
    reason = _DOC_REASONS.get(str(result.get("reason") or ""))
    if reason is None:  # help_unavailable, or an answer this build does not know
        return cit.Checked(c, False, cit.REASON_COULD_NOT_RUN, undecided=True)
    return cit.Checked(c, False, reason)


def could_not_run(c: cit.Citation) -> cit.Checked:
    return cit.Checked(c, False, cit.REASON_COULD_NOT_RUN, undecided=True)
