"""The analysis key's rotation (part 2), as text and rules: no I/O.

- `rotation_plan`: the statements of a rotation in the order of a write (spec 000, "Key
  rotation"): delete the secrets row, set the new password, end the analyst's statements, write
  the rest of the entity set under the new key, settle, end the analyst's statements again, and
  last store the new sealed row at a version from ClickHouse's clock. `loom ch-setup
  --rotate-analysis-key` runs the same plan, waiting on the servers' policies instead of the
  settle statements where it can, and storing the row itself; `--print-analyst-sql` prints it.
- `access_on_cluster`: an access statement as it runs `ON CLUSTER` (with
  distributed_ddl_output_mode = throw, so a server that did not apply it fails the statement).
- `policy_key_id`: which key a scope policy carries, read from its condition as
  system.row_policies shows it; `key_id` names a key without spelling it.
- `judge`: the doctor's verdict on the boundary from its probes, the servers' policy keys and
  the row's stored time.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from .entities import ANALYST, Statement, WritePlan, quote, write_plan

SECRETS_TABLE = "analysis_secrets"
# ClickHouse's sleep() refuses more than 3 seconds per call.
SLEEP_STEP_S = 3
# Steps the CLI runs itself rather than as printed: it waits on the servers' policies where it
# can read them (else the settle time), and stores the row through Loom's store.
CLI_OWN_STEPS = ("settle", "store")

_ENTITY_HEAD = re.compile(r"^((?:CREATE|ALTER)\s+(?:SETTINGS\s+PROFILE|USER|ROW\s+POLICY)(?:\s+IF\s+NOT\s+EXISTS)?\s+\w+)", re.I)
_GRANT_HEAD = re.compile(r"^(GRANT|REVOKE)\s+", re.I)
_KILL_HEAD = re.compile(r"^(KILL\s+QUERY)\s+", re.I)
_TABLE_HEAD = re.compile(r"^(ALTER\s+TABLE\s+[\w.]+)\s+", re.I)
_CLUSTER = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")


def access_on_cluster(sql: str, cluster: str) -> str:
    """The statement with `ON CLUSTER '<cluster>'` where ClickHouse's grammar puts it; unchanged
    on a single server (cluster empty)."""
    if not cluster:
        return sql
    if not _CLUSTER.match(cluster):
        raise ValueError(f"bad ClickHouse cluster name {cluster!r}")
    on = f" ON CLUSTER {quote(cluster)}"
    for head in (_ENTITY_HEAD, _TABLE_HEAD):
        m = head.match(sql)
        if m:
            return m.group(1) + on + sql[len(m.group(1)) :]
    for head in (_GRANT_HEAD, _KILL_HEAD):
        m = head.match(sql)
        if m:
            return m.group(1) + on + " " + sql[m.end() :]
    raise ValueError(f"not an access statement: {sql.split(' ', 3)[:3]}")


def kill_statement(cluster: str) -> Statement:
    return Statement("kill", access_on_cluster(f"KILL QUERY WHERE user = {quote(ANALYST)} SYNC", cluster))


def settle_statements(settle_s: float) -> list[Statement]:
    """The printed settle: `SELECT sleep(3)` as often as the settle time takes (it cannot wait
    on a condition)."""
    return [Statement("settle", f"SELECT sleep({SLEEP_STEP_S})") for _ in range(max(1, math.ceil(settle_s / SLEEP_STEP_S)))]


def store_statement(db: str, sealed: str, cluster: str) -> Statement:
    """The new sealed row at a version from ClickHouse's clock in nanoseconds, far above any
    reseal's version + 1, and ClickHouse's clock as its stored time."""
    del cluster  # an INSERT into a replicated table reaches every replica by replication
    return Statement(
        "store",
        f"INSERT INTO {db}.{SECRETS_TABLE} (id, sealed, version, stored_at)"
        f" SELECT 1, {quote(sealed)}, toUInt64(toUnixTimestamp64Nano(now64(9))), now64(6)",
        secret=True,
    )


def rotation_plan(p: WritePlan, *, cluster: str = "", settle_s: float = 30.0, sealed: str = "") -> list[Statement]:
    """A rotation in the order of a write: delete, new password, KILL QUERY, the rest of the
    entity set under the new key, the settle, KILL QUERY again, and last the new row (when
    `sealed` is given). Every access statement runs ON CLUSTER on a cluster."""
    entities = write_plan(replace(p, create_user=True))
    head = [s for s in entities if s.step in ("profile", "user")]
    rest = [s for s in entities if s.step not in ("profile", "user")]
    delete = Statement(
        "delete", access_on_cluster(f"ALTER TABLE {p.db}.{SECRETS_TABLE} DELETE WHERE id = 1", cluster) + " SETTINGS mutations_sync = 2"
    )
    out = [delete]
    out += [Statement(s.step, access_on_cluster(s.sql, cluster), s.secret) for s in head]
    out.append(kill_statement(cluster))
    out += [Statement(s.step, access_on_cluster(s.sql, cluster), s.secret) for s in rest]
    out += settle_statements(settle_s)
    out.append(kill_statement(cluster))
    if sealed:
        out.append(store_statement(p.db, sealed, cluster))
    return out


# ---------------------------------------------------------------------------- keys


def key_id(key: bytes) -> str:
    """A key's name for reports and comparisons (never the key)."""
    return hashlib.sha256(key).hexdigest()[:12]


# The key enters a policy only as the third argument of each padded form's encrypt/decrypt:
# `unhex('<64 hex digits>')`; the pads are 64 bytes (128 hex digits), so they never match.
_KEY_IN_POLICY = re.compile(r"unhex\('([0-9A-Fa-f]{64})'\)")


def policy_key_id(condition: str) -> str | None:
    """The key a scope policy's condition carries (as key_id), or None when it carries none
    (a retired policy reading nothing) or more than one."""
    keys = {k.lower() for k in _KEY_IN_POLICY.findall(condition)}
    if len(keys) != 1:
        return None
    return key_id(bytes.fromhex(keys.pop()))


# ---------------------------------------------------------------------------- the doctor's verdict


@dataclass(frozen=True, slots=True)
class Probe:
    """One signed canary read on a new connection: `ok` when it returned the canary row; `host`
    the server it reached (hostName()), empty when it failed to sign in."""

    ok: bool
    host: str = ""


@dataclass(frozen=True, slots=True)
class Verdict:
    outcome: str  # ok | settling | lagging_servers | stale_row | servers_disagree | ambiguous
    summary: str
    fix: str = ""
    fault: str = ""


LIVE = "loom ch-setup --rotate-analysis-key --live"


def defers_repair(row_age_s: float, settle_s: float) -> bool:
    """Within three settle times of the row's stored time a canary under another key may be a
    server still applying the rotation: the probe's repair waits, as the doctor's verdict does."""
    return row_age_s < 3 * settle_s


SETTLE_SETTING = "LOOM_CH_ANALYSIS_ROTATION_SETTLE_S"


def judge(
    probes: Sequence[Probe],
    policy_keys: Mapping[str, str | None] | None,
    row_key: str,
    row_age_s: float | None,
    settle_s: float,
) -> Verdict:
    """The verdict on a boundary whose secrets row opens, from the probes, each server's scope
    policy key (`None`: Loom's user cannot list every server's policies) and the row's age by
    ClickHouse's clock (spec 000, "Key rotation": loom doctor)."""
    failed = [p for p in probes if not p.ok]
    if not failed:
        return Verdict("ok", f"{len(probes)} signed probes on new connections read the canary")
    if row_age_s is not None and defers_repair(row_age_s, settle_s):
        return Verdict(
            "settling",
            f"{len(failed)} of {len(probes)} probes failed within three settle times of the row's stored time"
            f" ({row_age_s:.0f} s ago): a server is still applying the rotation",
            f"run `loom doctor` again after {3 * settle_s:.0f} s; if servers keep lagging, set {SETTLE_SETTING} above the lag"
            " your ClickHouse shows for access changes before the next rotation",
            "analysis-rotation-settling",
        )
    behind = sorted(h for h, k in (policy_keys or {}).items() if k != row_key)
    if len(failed) < len(probes):
        where = f" (servers whose policy is not on the row's key: {', '.join(behind)})" if behind else ""
        return Verdict(
            "lagging_servers",
            f"{len(failed)} of {len(probes)} probes failed while the others passed: some servers are not applying access changes{where}",
            "an admin makes those servers apply access changes (their access storage, or its replication through Keeper),"
            " then run `loom doctor` again; a new rotation would not reach them either",
            "analysis-servers-lagging",
        )
    if not policy_keys:
        return Verdict(
            "ambiguous",
            "every probe failed to read the canary, and Loom's user cannot read every server's policies to tell why:"
            " either some servers are not applying access changes, or the row is stale"
            " (a rotation stopped after its password change, with a row a reseal put back)",
            f"an admin checks that every server applies access changes; if they do, run `{LIVE}`",
            "analysis-probes-failing",
        )
    groups: dict[str | None, list[str]] = {}
    for host, k in sorted(policy_keys.items()):
        groups.setdefault(k, []).append(host)
    if len(groups) == 1:
        (only,) = groups
        which = "the row's key" if only == row_key else "one key that is not the row's"
        return Verdict(
            "stale_row",
            f"every probe failed and every server's policy is on {which}: the row is stale"
            " (a rotation stopped after its password change, with a row a reseal put back)",
            f"run `{LIVE}`",
            "analysis-row-stale",
        )
    named = "; ".join(
        f"{'on the row key' if k == row_key else f'on key {k}' if k else 'on no key'}: {', '.join(hosts)}" for k, hosts in groups.items()
    )
    return Verdict(
        "servers_disagree",
        f"every probe failed and the servers' policies disagree ({named}): some servers are not applying access changes",
        "an admin makes every server apply access changes, then run `loom doctor` again once they agree",
        "analysis-servers-disagree",
    )
