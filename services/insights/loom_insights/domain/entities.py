"""The analyst's entities, generated from the allowlist: the user, its two settings profiles,
the column grants and the signed row policies, in the order of a write.

Everything here is text generation, no I/O. `write_plan` gives the statements a write runs (and
`loom ch-setup --print-analyst-sql` prints); `structure_digest` names the entity set a version
pins, spelled with the `SQL_` prefix and a placeholder key so the version depends on the shape of
the entities, never on the key, the password, the database or the caps.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields

from .allowlist import ALLOWLIST, CANARY, Table
from .scope import SCOPE_FIELDS, pads

# Bump when the allowlist or the shape of any entity changes: a build writes the entities only
# when no version is stored or its own revision is newer (never over a newer build's).
REVISION = 2

ANALYST = "loom_analyst"
PROFILE = "loom_analyst_profile"
CAPS_PROFILE = "loom_analyst_caps"
SCOPE_POLICY = "loom_analyst_scope"
OTHERS_POLICY = "loom_everyone_else"
VERSION_STAMP = "loom_version"
CAPS_STAMP = "loom_caps"

# The pins of the main profile, all CONST: what each one stops is in docs/insights.md.
PINS: tuple[tuple[str, str], ...] = (
    ("readonly", "2"),
    ("final", "1"),
    ("apply_row_policy_after_final", "1"),
    ("use_query_cache", "0"),
    ("use_query_condition_cache", "0"),
    ("send_logs_level", "'none'"),
    ("log_queries_cut_to_length", "1"),
    ("log_formatted_queries", "0"),
    ("result_overflow_mode", "'throw'"),
    ("read_overflow_mode", "'throw'"),
    ("format_display_secrets_in_show_and_select", "0"),
)

# Settings every statement that carries the key or the password runs with, so ClickHouse logs
# the statement as the number of characters it cut and writes no formatted_query.
LOG_TEXT_CUT: dict[str, int] = {"log_queries_cut_to_length": 1, "log_formatted_queries": 0}


@dataclass(frozen=True, slots=True)
class Caps:
    """The deployment's caps, held as MAX in the second profile."""

    max_execution_time: int = 30
    max_rows_to_read: int = 50_000_000
    max_memory_usage: int = 2_000_000_000
    max_result_rows: int = 100_000
    max_threads: int = 4
    max_concurrent_queries_for_user: int = 8

    def items(self) -> list[tuple[str, int]]:
        """(ClickHouse setting, value), in field order: each field is named as its setting."""
        return [(f.name, getattr(self, f.name)) for f in fields(self)]

    def stamp(self) -> str:
        return hashlib.sha256(json.dumps(self.items()).encode()).hexdigest()[:16]


# What each cap means to a caller, for errors and the catalog.
CAP_MEANINGS: dict[str, str] = {
    "max_execution_time": "seconds a statement may run",
    "max_rows_to_read": "rows a statement may read from the tables",
    "max_memory_usage": "bytes of memory a statement may use",
    "max_result_rows": "rows a statement's result may hold before Loom's own row cap",
    "max_threads": "threads a statement may use",
    "max_concurrent_queries_for_user": "statements the analyst user runs at once across all orgs",
}


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement of a write. `secret` ones carry the key or the password: they run under
    LOG_TEXT_CUT and are never logged by Loom."""

    step: str
    sql: str
    secret: bool = False


def quote(text: str) -> str:
    """A ClickHouse string literal (for identifiers of Loom's own and for the password)."""
    out = []
    for ch in text:
        o = ord(ch)
        if ch in ("\\", "'"):
            out.append("\\" + ch)
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02X}")
        else:
            out.append(ch)
    return "'" + "".join(out) + "'"


def setting_reader(prefix: str) -> Callable[[str], str]:
    """How a policy reads a scope field on a server: the custom setting, through toString so a
    number or an array set by the statement cannot make the policy raise."""
    return lambda name: f"toString(getSetting({quote(prefix + name)}))"


def comment_reader() -> Callable[[str], str]:
    """How the chDB persona reads a scope field: chDB refuses custom settings, so the scope
    travels as JSON in the built-in `log_comment` setting (the same predicate otherwise)."""
    return lambda name: f"JSONExtractString(toString(getSetting('log_comment')), {quote(name)})"


def _hidden(pad: bytes, key: bytes) -> str:
    # ClickHouse prints encrypt/decrypt arguments as '[HIDDEN]' in error messages and in SHOW
    # CREATE ROW POLICY, and folds the pair back to the pad: the HMAC is the same.
    k = f"unhex('{key.hex()}')"
    return f"decrypt('aes-256-ecb', encrypt('aes-256-ecb', unhex('{pad.hex()}'), {k}), {k})"


def _lp(expr: str) -> str:
    return f"toString(length({expr})), ':', {expr}"


SERVER_QUERY_ID = "initialQueryID()"


def policy_predicate(table: Table, key: bytes, read: Callable[[str], str], query_id: str = SERVER_QUERY_ID) -> str:
    """The signed row policy's condition: org and namespace match the scope, the expiry is in
    the future, the HMAC of the scope and the statement's query id matches, and the live
    predicate holds. On a server the query id is initialQueryID(), the id Loom sent with the
    statement (the same on every server it fans out to)."""
    org, ns, exp, sig = (read(f) for f in SCOPE_FIELDS)
    ipad, opad = pads(key)
    message = f"concat({_lp(org)}, {_lp(ns)}, {_lp(exp)}, {_lp(query_id)})"
    inner = f"SHA256(concat({_hidden(ipad, key)}, {message}))"
    mac = f"lower(hex(SHA256(concat({_hidden(opad, key)}, {inner}))))"
    parts = [
        f"{table.org_column} = {org}",
        f"has(splitByChar(',', {ns}), {table.namespace_column})",
        f"toInt64OrZero({exp}) > toUnixTimestamp(now())",
        f"{mac} = {sig}",
    ]
    if table.live:
        parts.append(f"({table.live})")
    return " AND ".join(parts)


def profile_settings(prefix: str, version: str) -> str:
    """The main profile's SETTINGS list: the caps profile inherited, every pin CONST, the version stamp."""
    parts = [f"INHERIT {quote(CAPS_PROFILE)}"]
    parts += [f"{name} = {value} CONST" for name, value in PINS]
    if version:
        parts.append(f"{prefix}{VERSION_STAMP} = {quote(version)} CONST")
    return ", ".join(parts)


def caps_settings(prefix: str, caps: Caps) -> str:
    parts = [f"{name} = {value} MAX {value}" for name, value in caps.items() if name != "max_concurrent_queries_for_user"]
    parts.append(f"max_concurrent_queries_for_user = {caps.max_concurrent_queries_for_user} CONST")
    parts.append(f"{prefix}{CAPS_STAMP} = {quote(caps.stamp())} CONST")
    return ", ".join(parts)


def grant_sql(db: str, table: Table) -> str:
    cols = ", ".join(table.column_names)
    return f"GRANT SELECT({cols}) ON {db}.{table.name} TO {ANALYST}"


def policy_sql(db: str, table: Table, key: bytes, prefix: str) -> list[Statement]:
    """Every other user's permissive policy first, then the analyst's restrictive one, each
    created reading nothing and then altered in place."""
    on = f"{db}.{table.name}"
    pred = policy_predicate(table, key, setting_reader(prefix))
    return [
        Statement(
            "policy",
            f"CREATE ROW POLICY IF NOT EXISTS {OTHERS_POLICY} ON {on} AS PERMISSIVE FOR SELECT USING 1 TO ALL EXCEPT {ANALYST}",
        ),
        Statement("policy", f"ALTER ROW POLICY {OTHERS_POLICY} ON {on} AS PERMISSIVE FOR SELECT USING 1 TO ALL EXCEPT {ANALYST}"),
        Statement("policy", f"CREATE ROW POLICY IF NOT EXISTS {SCOPE_POLICY} ON {on} AS RESTRICTIVE FOR SELECT USING 0 TO {ANALYST}"),
        Statement("policy", f"ALTER ROW POLICY {SCOPE_POLICY} ON {on} AS RESTRICTIVE FOR SELECT USING {pred} TO {ANALYST}", secret=True),
    ]


# The condition of a retired table's policy: it reads nothing.
RETIRED_PREDICATE = "0"


def retired_policy_sql(db: str, table_name: str) -> Statement:
    """A table that left the allowlist keeps a policy that reads nothing (never dropped)."""
    return Statement(
        "policy", f"ALTER ROW POLICY {SCOPE_POLICY} ON {db}.{table_name} AS RESTRICTIVE FOR SELECT USING {RETIRED_PREDICATE} TO {ANALYST}"
    )


def password_clause(password: str) -> str:
    return f"IDENTIFIED WITH sha256_password BY {quote(password)}"


@dataclass(frozen=True, slots=True)
class WritePlan:
    """Inputs of one write."""

    db: str
    prefix: str
    key: bytes
    password: str
    version: str
    caps: Caps
    tables: Sequence[Table]
    previous_version: str = ""
    retired_tables: Sequence[str] = ()
    revoke_roles: Sequence[str] = ()
    write_caps: bool = True
    create_user: bool = True


def write_plan(p: WritePlan) -> list[Statement]:
    """The order of a write: profiles that exist (readonly from the start), the user and its
    password, every policy (the canary's included, every other user's before the analyst's),
    the caps, the main profile's pins (after every policy, before every grant), the revokes,
    the allowlist's grants, and last the version stamp."""
    out: list[Statement] = [
        Statement("profile", f"CREATE SETTINGS PROFILE IF NOT EXISTS {CAPS_PROFILE} SETTINGS max_execution_time = 1 MAX 1"),
        Statement("profile", f"CREATE SETTINGS PROFILE IF NOT EXISTS {PROFILE} SETTINGS readonly = 2 CONST"),
    ]
    if p.create_user:
        out.append(
            Statement(
                "user",
                f"CREATE USER IF NOT EXISTS {ANALYST} {password_clause(p.password)} DEFAULT DATABASE {p.db} SETTINGS PROFILE {quote(PROFILE)}",
                secret=True,
            )
        )
    out.append(
        Statement(
            "user",
            f"ALTER USER {ANALYST} {password_clause(p.password)} DEFAULT DATABASE {p.db} SETTINGS PROFILE {quote(PROFILE)}",
            secret=True,
        )
    )
    for t in (*p.tables, CANARY):
        out += policy_sql(p.db, t, p.key, p.prefix)
    for name in p.retired_tables:
        out.append(retired_policy_sql(p.db, name))
    if p.write_caps:
        out.append(Statement("caps", f"ALTER SETTINGS PROFILE {CAPS_PROFILE} SETTINGS {caps_settings(p.prefix, p.caps)}"))
    out.append(Statement("pins", f"ALTER SETTINGS PROFILE {PROFILE} SETTINGS {profile_settings(p.prefix, p.previous_version)}"))
    # Revoke exactly what a write grants (each allowlisted table, the canary, and each table
    # retired from the allowlist), so the re-grant below replaces its columns; no blanket
    # REVOKE ALL, which would also take what an operator granted the user on purpose.
    for name in (*(t.name for t in (*p.tables, CANARY)), *p.retired_tables):
        out.append(Statement("revoke", f"REVOKE SELECT ON {p.db}.{name} FROM {ANALYST}"))
    for role in p.revoke_roles:
        out.append(Statement("revoke", f"REVOKE {role} FROM {ANALYST}"))
    for t in (*p.tables, CANARY):
        out.append(Statement("grant", grant_sql(p.db, t)))
    out.append(Statement("version", f"ALTER SETTINGS PROFILE {PROFILE} SETTINGS {profile_settings(p.prefix, p.version)}"))
    return out


PLACEHOLDER_KEY = bytes(32)


def structure_digest(tables: Sequence[Table]) -> str:
    """The digest of the entity set for these tables: statements spelled with SQL_, database
    `loom`, a zero key, no password and default caps, so only the structure counts."""
    plan = WritePlan("loom", "SQL_", PLACEHOLDER_KEY, "", "", Caps(), tables)
    text = "\n".join(s.sql for s in write_plan(plan) if s.step not in ("user", "caps"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def version_of(tables: Sequence[Table]) -> str:
    """`<revision>.<structure digest>`: what the main profile's stamp holds."""
    return f"{REVISION}.{structure_digest(tables)}"


def revision_of(version: str) -> int:
    """The revision part of a stored version (0 for none or an unreadable one)."""
    head = version.split(".", 1)[0]
    return int(head) if head.isdigit() else 0


def may_write(stored: str, ours: str) -> bool:
    """A build writes when nothing is stored or its own revision is at least the stored one
    (at the same revision a write repairs, or adds a table that appeared); never over a newer one."""
    return not stored or revision_of(ours) >= revision_of(stored)


def writes_caps(mode: str, stored_stamp: str, ours: Caps) -> bool:
    """Whether a write sets the caps profile. The caps are deployment settings, read at boot:
    a boot writes them when the stored ones differ from its settings, `loom ch-setup` always
    does, and a repair never does (it would undo another replica's boot), except where no caps
    were ever stored. So two replicas with different caps settings never fight over them."""
    if mode == "setup":
        return True
    if mode == "boot":
        return stored_stamp != ours.stamp()
    return not stored_stamp


def full_version() -> str:
    """The version of the whole allowlist (every conditional table present)."""
    return version_of(ALLOWLIST)
