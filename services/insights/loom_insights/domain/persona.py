"""The analyst's restrictions as a chDB users.xml, for proving the boundary without a server.

chDB runs every statement as its `default` user and has no writable access storage, so SQL
`CREATE USER` / `ROW POLICY` fail there; but it enforces what a users.xml declares for that
user: grants, row filters, profile settings with CONST/MAX constraints and readonly. This module
declares the analyst's entity set on `default`, generated from the same allowlist and the same
`policy_predicate` as the SQL a server gets, with two differences chDB forces: the scope travels
as JSON in the built-in `log_comment` setting (chDB refuses custom settings), and the query id
the signature binds is carried there too (`loom_qid`), since chDB cannot be handed a query id.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

from .allowlist import CANARY, Table
from .entities import PINS, RETIRED_PREDICATE, Caps, comment_reader, policy_predicate
from .scope import Scope, sign

PERSONA_QUERY_ID = "JSONExtractString(toString(getSetting('log_comment')), 'loom_qid')"


def persona_comment(key: bytes, scope: Scope, query_id: str) -> str:
    """The `log_comment` value carrying a signed scope to the persona."""
    return json.dumps(
        {
            "loom_org": scope.org,
            "loom_ns": scope.ns_text,
            "loom_exp": str(scope.expires),
            "loom_qid": query_id,
            "loom_sig": sign(key, scope, query_id),
        }
    )


@dataclass(frozen=True, slots=True)
class PersonaDatabase:
    """The analyst's entity set on one database of the persona.

    `retired` names tables that left the allowlist: each keeps a filter that reads nothing (the
    server's retired policy) and gets no grant. The other two describe entities a write did not
    leave, to prove what the boundary and the probe do with them: `stray_grants` are column
    grants the analyst still holds on tables outside `tables` (a grant an older build left), and
    `canary_key` puts the canary's filter under another key (a hand edit)."""

    db: str
    tables: Sequence[Table]
    key: bytes
    retired: Sequence[str] = ()
    stray_grants: Sequence[Table] = ()
    canary_key: bytes | None = None

    def grants(self) -> list[str]:
        return [f"GRANT SELECT({', '.join(t.column_names)}) ON {self.db}.{t.name}" for t in (*self.tables, CANARY, *self.stray_grants)]

    def filters(self) -> list[tuple[str, str]]:
        out = [(t.name, policy_predicate(t, self.key, comment_reader(), PERSONA_QUERY_ID)) for t in self.tables]
        canary_key = self.key if self.canary_key is None else self.canary_key
        out.append((CANARY.name, policy_predicate(CANARY, canary_key, comment_reader(), PERSONA_QUERY_ID)))
        out += [(name, RETIRED_PREDICATE) for name in self.retired]
        return out


def users_xml(db: str, tables: Sequence[Table], key: bytes, caps: Caps, *, also: Sequence[PersonaDatabase] = ()) -> str:
    """users.xml declaring the analyst's grants, signed row filters and pinned profile on
    `default`: the allowlist's entity set on `db`, and each of `also` on its own database."""
    settings: list[str] = []
    constraints: list[str] = []
    for name, value in PINS:
        v = value.strip("'")
        settings.append(f"<{name}>{escape(v)}</{name}>")
        constraints.append(f"<{name}><const/></{name}>")
    for name, cap in caps.items():
        if name == "max_concurrent_queries_for_user":
            continue
        settings.append(f"<{name}>{cap}</{name}>")
        constraints.append(f"<{name}><max>{cap}</max></{name}>")
    dbs = (PersonaDatabase(db, tables, key), *also)
    grants = [f"<query>{escape(g)}</query>" for d in dbs for g in d.grants()]
    nl = "\n      "
    databases = [
        f"<{d.db}>" + "".join(f"{nl}    <{t}><filter>{escape(f)}</filter></{t}>" for t, f in d.filters()) + f"{nl}  </{d.db}>" for d in dbs
    ]
    return f"""<clickhouse>
  <profiles>
    <default>
      {nl.join(settings)}
      <constraints>
        {(nl + "  ").join(constraints)}
      </constraints>
    </default>
  </profiles>
  <users>
    <default>
      <password></password>
      <networks><ip>::/0</ip></networks>
      <profile>default</profile>
      <quota>default</quota>
      <access_management>0</access_management>
      <grants>
        {(nl + "  ").join(grants)}
      </grants>
      <databases>
        {(nl + "  ").join(databases)}
      </databases>
    </default>
  </users>
  <quotas><default/></quotas>
</clickhouse>
"""
