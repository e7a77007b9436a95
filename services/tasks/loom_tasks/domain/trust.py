"""The trust decision: where a posted task lands (pure).

Spec 003: the inbox owner sets a mode per (poster, kind) — deny, review or auto — with `*`
for any kind (and, here, any poster). With no row, the inbox owner and a writer on the owner
namespace post auto; anyone else posts review. A row keyed on an agent label grants auto only
to a writer on the owner namespace, because the caller picks its label: for anyone else such an
auto row grants nothing and the rows after it (the `*` poster's, else review) decide. Loom never promotes a poster by itself.

Which row applies: the verified subject's rows first (its kind, then `*`), then the agent
label's (kind, then `*`), then the `*` poster's (kind, then `*`). A label can never match a
subject row: a subject row's key has the `user:` / `sa:` form, which is matched only against
the verified subject.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .model import PolicyRow

ANY = "*"


def is_subject_key(poster: str) -> bool:
    return poster.startswith(("user:", "sa:"))


@dataclass(frozen=True, slots=True)
class TrustDecision:
    mode: str  # deny | review | auto
    require_evidence: tuple[str, ...]
    row: PolicyRow | None


def decide(policies: Iterable[PolicyRow], *, subject: str, agent: str, kind: str, writer_on_owner_namespace: bool) -> TrustDecision:
    by_key = {(p.poster, p.kind): p for p in policies}
    order: list[tuple[str, str]] = [(subject, kind), (subject, ANY)]
    if agent and not is_subject_key(agent) and agent != ANY:
        order += [(agent, kind), (agent, ANY)]
    order += [(ANY, kind), (ANY, ANY)]
    for key in order:
        row = by_key.get(key)
        if row is None:
            continue
        mode = row.mode
        label_row = not is_subject_key(row.poster) and row.poster != ANY
        if label_row and mode == "auto" and not writer_on_owner_namespace:
            continue  # a label grants nothing: the rows after it (the `*` poster's) decide
        return TrustDecision(mode, row.require_evidence, row)
    return TrustDecision("auto" if writer_on_owner_namespace else "review", (), None)


def missing_evidence(brief: dict[str, object], paths: Iterable[str]) -> list[str]:
    """The require_evidence paths (dotted, into the brief) a brief does not carry; an empty
    value (null, "", [], {}) counts as missing."""
    missing: list[str] = []
    for path in paths:
        node: object = brief
        for part in path.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            else:
                node = None
                break
        if node is None or node == "" or node == [] or node == {}:
            missing.append(path)
    return missing
