"""The caller-label columns, once: every table that records who made a call (the ledger's
agent_events, memory_exposures, policy_decisions) begins with `ts, org, namespace` and the same
four, in this order. (The decisions plane's `agent, user, session` columns are a record's scope,
part of its key as the spec defines it, not the labels of the call that wrote it.)

    subject   the token's subject (user:<id> / sa:<name>): the one that is authenticated
    agent     the caller-chosen agent label (grants nothing)
    user      the caller-chosen end-user label
    session   the caller-chosen session label

Tables write `{CALL_COLUMNS_DDL}` first in their CREATE TABLE and `caller_values(...)` into a row.
"""

from __future__ import annotations

from typing import Protocol, TypedDict

CALLER_COLUMNS: tuple[str, ...] = ("subject", "agent", "user", "session")
CALL_COLUMNS_DDL = ",\n            ".join(
    ("ts DateTime64(6, 'UTC')", "org LowCardinality(String)", "namespace LowCardinality(String)", *(f"{c} String" for c in CALLER_COLUMNS))
)


class CallerLabels(TypedDict):
    """The four caller-label columns."""

    subject: str
    agent: str
    user: str
    session: str


class CallerRow(CallerLabels):
    """Whose call a row records: its org and namespace, and the four caller-label columns."""

    org: str
    namespace: str


class _Caller(Protocol):
    @property
    def subject(self) -> str: ...

    agent: str
    user: str
    session: str


def caller_values(call: _Caller) -> CallerLabels:
    """The four caller-label columns of a row, from a call context (or anything shaped like one)."""
    return CallerLabels(subject=call.subject, agent=call.agent, user=call.user, session=call.session)
