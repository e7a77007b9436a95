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
from xml.sax.saxutils import escape

from .allowlist import CANARY, Table
from .entities import PINS, Caps, comment_reader, policy_predicate
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


def users_xml(db: str, tables: Sequence[Table], key: bytes, caps: Caps) -> str:
    """users.xml declaring the analyst's grants, signed row filters and pinned profile on `default`."""
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
    grants = [f"<query>GRANT SELECT({', '.join(t.column_names)}) ON {db}.{t.name}</query>" for t in (*tables, CANARY)]
    filters = [
        f"<{t.name}><filter>{escape(policy_predicate(t, key, comment_reader(), PERSONA_QUERY_ID))}</filter></{t.name}>"
        for t in (*tables, CANARY)
    ]
    nl = "\n      "
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
        <{db}>
          {(nl + "    ").join(filters)}
        </{db}>
      </databases>
    </default>
  </users>
  <quotas><default/></quotas>
</clickhouse>
"""
