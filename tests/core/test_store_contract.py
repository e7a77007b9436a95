"""The Store contract, run against every engine: chDB embedded always, the ClickHouse server
engine when LOOM_TEST_CLICKHOUSE_URL names a server (clickhouse://user:pass@host:9000/db).

Both engines must give the same answers: values bound (never formatted into SQL), the same
Python types back, ReplacingMergeTree + FINAL and tombstones, insert deduplication tokens, and
StoreError with no driver text. Every test makes its own uuid-named tables in the store's
database and drops them afterwards.

"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime

import pytest
from loom_core import fastjson
from loom_core.store.base import Store, StoreError, ch_time, parse_ch_time
from loom_core.store.cluster import on_cluster
from loom_core.store.embedded import EmbeddedStore

TEST_DATABASE = "loom_test_store"
SERVER_URL = os.environ.get("LOOM_TEST_CLICKHOUSE_URL", "")
SERVER_CLUSTER = os.environ.get("LOOM_CLICKHOUSE_CLUSTER", "")  # tables ON CLUSTER, Replicated engines (store/cluster.py)
SERVER_SKIP = "LOOM_TEST_CLICKHOUSE_URL not set: ClickHouse server engine not tested"

ENGINES = [
    "chdb",
    pytest.param("clickhouse", marks=[pytest.mark.clickhouse_server, pytest.mark.skipif(not SERVER_URL, reason=SERVER_SKIP)]),
]


class Engine:
    """One engine under test, with uuid-named tables that are dropped afterwards."""

    def __init__(self, store: Store, request: pytest.FixtureRequest) -> None:
        self.store = store
        self.request = request
        self.tables: list[str] = []

    async def table(self, columns: str, engine: str = "MergeTree ORDER BY tuple()") -> str:
        name = f"{{db}}.t_{uuid.uuid4().hex}"
        cluster = str(getattr(self.store, "cluster", ""))
        await self.store.execute(on_cluster("CREATE DATABASE IF NOT EXISTS {db}", cluster))
        await self.store.execute(on_cluster(f"CREATE TABLE {name} ({columns}) ENGINE = {engine}", cluster))
        self.tables.append(name)
        return name


@pytest.fixture(scope="session")
def _own_embedded_store(tmp_path_factory: pytest.TempPathFactory) -> EmbeddedStore:
    # chDB holds one data dir per process: reuse whatever store is already open.
    existing = next((s for s in EmbeddedStore._open.values() if not s._closed), None)
    return existing or EmbeddedStore.open(tmp_path_factory.mktemp("chdb"), TEST_DATABASE)


@pytest.fixture
def _embedded_store(request: pytest.FixtureRequest) -> EmbeddedStore:
    """The suite's shared session store when tests/conftest.py provides one, else our own."""
    try:
        shared = request.getfixturevalue("store")
    except pytest.FixtureLookupError:
        shared = None
    if isinstance(shared, EmbeddedStore) and not shared._closed:
        return shared
    return request.getfixturevalue("_own_embedded_store")


@pytest.fixture(params=ENGINES)
async def engine(request: pytest.FixtureRequest) -> AsyncIterator[Engine]:
    if request.param == "chdb":
        store: Store = request.getfixturevalue("_embedded_store")
        owned = False
    else:
        from loom_core.store.server import ServerStore

        store = await ServerStore.open(SERVER_URL, TEST_DATABASE, cluster=SERVER_CLUSTER)
        owned = True
    e = Engine(store, request)
    try:
        yield e
    finally:
        for name in e.tables:
            with contextlib.suppress(StoreError):
                await store.execute(on_cluster(f"DROP TABLE IF EXISTS {name}", str(getattr(store, "cluster", ""))))
        if owned:
            await store.close()


# --------------------------------------------------------------------------- basics


async def test_ping(engine: Engine) -> None:
    await engine.store.ping()


async def test_db_placeholder_names_the_configured_database(engine: Engine) -> None:
    name = await engine.table("k UInt64")
    rows = await engine.store.query(
        "SELECT database, name FROM system.tables WHERE database = {d:String} AND name = {n:String}",
        {"d": engine.store.database, "n": name.split(".", 1)[1]},
    )
    assert rows == [{"database": engine.store.database, "name": name.split(".", 1)[1]}]


async def test_braces_and_percent_outside_placeholders_are_left_alone(engine: Engine) -> None:
    rows = await engine.store.query("SELECT 7 % 3 AS m, '{x:String}' AS lit, {x:String} AS x -- {x:String}\n", {"x": "%s %(x)s"})
    assert rows == [{"m": 1, "lit": "{x:String}", "x": "%s %(x)s"}]


# --------------------------------------------------------------------------- hostile strings

# Strings that must arrive unchanged. ESCAPE_HOSTILE are the ones the chDB engine changes or
# refuses when they are parameters (ClickHouse reads its parameter text as escaped text).
SAFE_HOSTILE = [
    "it's",
    "''",
    "'); DROP TABLE victim; --",
    "' OR '1'='1",
    'double "quoted"',
    "`backquoted`",
    "{x:String}",
    "%s %(x)s %%",
    "*/ /* -- # ;",
    "ünïcödé € 😀",
    "back\\slash",
    "nul\x00byte",
    "bell\x07del\x7f",
    # What str.splitlines() breaks a line at besides \n: ClickHouse writes U+0085 into JSON raw.
    "next\x85line \u2028sep\u2029 \x1c\x1d\x1e \x0b\x0c",
    "",
]
ESCAPE_HOSTILE = [
    "trailing\\",
    "\\'",
    "\\'); DROP TABLE t; --",
    "\\N",
    "\\x41\\0",
    "C:\\new\\table",
    "tab\tnew\nline\rcr",
]
DB_LOOKALIKES = ["{db}", "{db}.victim", "'); DROP TABLE {db}.victim; --"]


@pytest.mark.parametrize("value", SAFE_HOSTILE + ESCAPE_HOSTILE + DB_LOOKALIKES)
async def test_hostile_string_param_round_trips(engine: Engine, value: str) -> None:
    rows = await engine.store.query("SELECT {v:String} AS v, length({v:String}) AS n", {"v": value})
    assert rows == [{"v": value, "n": len(value.encode())}]


async def test_hostile_strings_insert_and_filter(engine: Engine) -> None:
    """Insert every hostile string (row data, no parameters) and find each one by parameter."""
    name = await engine.table("k UInt64, s String", "MergeTree ORDER BY k")
    values = SAFE_HOSTILE + ESCAPE_HOSTILE
    await engine.store.insert(name, [{"k": i, "s": v} for i, v in enumerate(values)])
    rows = await engine.store.query(f"SELECT k, s FROM {name} ORDER BY k")
    assert rows == [{"k": i, "s": v} for i, v in enumerate(values)]
    for i, v in enumerate(SAFE_HOSTILE):
        assert await engine.store.query(f"SELECT k FROM {name} WHERE s = {{v:String}}", {"v": v}) == [{"k": i}]


async def test_db_lookalikes_in_row_data_are_stored_as_given(engine: Engine) -> None:
    name = await engine.table("k UInt64, s String, tags Array(String)", "MergeTree ORDER BY k")
    rows = [{"k": i, "s": v, "tags": [v]} for i, v in enumerate(DB_LOOKALIKES)]
    await engine.store.insert(name, rows)
    assert await engine.store.query(f"SELECT k, s, tags FROM {name} ORDER BY k") == rows


async def test_hostile_strings_filter_escaped(engine: Engine) -> None:
    name = await engine.table("k UInt64, s String", "MergeTree ORDER BY k")
    await engine.store.insert(name, [{"k": i, "s": v} for i, v in enumerate(ESCAPE_HOSTILE)])
    for i, v in enumerate(ESCAPE_HOSTILE):
        assert await engine.store.query(f"SELECT k FROM {name} WHERE s = {{v:String}}", {"v": v}) == [{"k": i}]


async def test_injection_attempt_changes_nothing(engine: Engine) -> None:
    name = await engine.table("k UInt64, s String", "MergeTree ORDER BY k")
    await engine.store.insert(name, [{"k": 1, "s": "keep"}])
    attack = f"x'); DROP TABLE {name.replace('{db}', engine.store.database)}; SELECT ('"
    assert await engine.store.query(f"SELECT k FROM {name} WHERE s = {{s:String}}", {"s": attack}) == []
    assert await engine.store.query(f"SELECT s FROM {name}") == [{"s": "keep"}]


# --------------------------------------------------------------------------- Nullable


async def test_nullable_column_round_trip(engine: Engine) -> None:
    name = await engine.table("k UInt64, s Nullable(String), n Nullable(UInt64)", "MergeTree ORDER BY k")
    await engine.store.insert(name, [{"k": 1, "s": None, "n": None}, {"k": 2, "s": "NULL", "n": 7}])
    rows = await engine.store.query(f"SELECT k, s, n, s IS NULL AS s_null FROM {name} ORDER BY k")
    assert rows == [{"k": 1, "s": None, "n": None, "s_null": 1}, {"k": 2, "s": "NULL", "n": 7, "s_null": 0}]


async def test_nullable_param_with_value(engine: Engine) -> None:
    rows = await engine.store.query("SELECT {s:Nullable(String)} AS s, {n:Nullable(UInt64)} AS n", {"s": "x", "n": 5})
    assert rows == [{"s": "x", "n": 5}]


async def test_nullable_param_none_binds_null(engine: Engine) -> None:
    rows = await engine.store.query(
        "SELECT {s:Nullable(String)} AS s, isNull({s:Nullable(String)}) AS s_null, {n:Nullable(UInt64)} AS n", {"s": None, "n": None}
    )
    assert rows == [{"s": None, "s_null": 1, "n": None}]


# --------------------------------------------------------------------------- arrays


async def test_array_columns_round_trip(engine: Engine) -> None:
    name = await engine.table("k UInt64, tags Array(String), ids Array(UInt64), maybe Array(Nullable(String))", "MergeTree ORDER BY k")
    row = {"k": 1, "tags": ["a'b", "c\\d", "", "{x:String}"], "ids": [0, 2**64 - 1], "maybe": ["x", None]}
    await engine.store.insert(name, [row, {"k": 2, "tags": [], "ids": [], "maybe": []}])
    rows = await engine.store.query(f"SELECT k, tags, ids, maybe FROM {name} ORDER BY k")
    assert rows == [row, {"k": 2, "tags": [], "ids": [], "maybe": []}]


async def test_array_of_ints_param(engine: Engine) -> None:
    name = await engine.table("k UInt64", "MergeTree ORDER BY k")
    await engine.store.insert(name, [{"k": k} for k in range(10)])
    rows = await engine.store.query(f"SELECT k FROM {name} WHERE k IN {{ids:Array(UInt64)}} ORDER BY k", {"ids": [2, 3, 9, 42]})
    assert rows == [{"k": 2}, {"k": 3}, {"k": 9}]
    rows = await engine.store.query("SELECT {a:Array(Int64)} AS a", {"a": [-(2**63), 0, 2**63 - 1]})
    assert rows == [{"a": [-(2**63), 0, 2**63 - 1]}]


async def test_array_of_strings_param(engine: Engine) -> None:
    name = await engine.table("k UInt64, s String", "MergeTree ORDER BY k")
    await engine.store.insert(name, [{"k": 1, "s": "a'b"}, {"k": 2, "s": "plain"}, {"k": 3, "s": "other"}])
    rows = await engine.store.query(f"SELECT k FROM {name} WHERE has({{ss:Array(String)}}, s) ORDER BY k", {"ss": ["a'b", "plain", "')--"]})
    assert rows == [{"k": 1}, {"k": 2}]
    assert await engine.store.query("SELECT {a:Array(String)} AS a", {"a": []}) == [{"a": []}]


# --------------------------------------------------------------------------- 64-bit integers

INT_EDGES = {"u": [0, 1, 2**53 + 1, 2**63, 2**64 - 1], "i": [-(2**63), -(2**53) - 1, -1, 2**53 + 1, 2**63 - 1]}


async def test_int64_round_trip(engine: Engine) -> None:
    name = await engine.table("k UInt64, u UInt64, i Int64", "MergeTree ORDER BY k")
    rows = [{"k": n, "u": u, "i": i} for n, (u, i) in enumerate(zip(INT_EDGES["u"], INT_EDGES["i"], strict=True))]
    await engine.store.insert(name, rows)
    got = await engine.store.query(f"SELECT k, u, i FROM {name} ORDER BY k")
    assert got == rows
    assert all(type(r["u"]) is int and type(r["i"]) is int for r in got)
    for r in rows:
        found = await engine.store.query(f"SELECT k FROM {name} WHERE u = {{u:UInt64}} AND i = {{i:Int64}}", {"u": r["u"], "i": r["i"]})
        assert found == [{"k": r["k"]}]


async def test_int64_params_echo(engine: Engine) -> None:
    rows = await engine.store.query(
        "SELECT {u:UInt64} AS u, {i:Int64} AS i, toTypeName({u:UInt64}) AS tu, {s:UInt64} AS s",
        {"u": 2**64 - 1, "i": -(2**63), "s": "12"},
    )
    assert rows == [{"u": 2**64 - 1, "i": -(2**63), "tu": "UInt64", "s": 12}]
    assert type(rows[0]["u"]) is int


# --------------------------------------------------------------------------- DateTime64


async def test_datetime64_round_trip(engine: Engine) -> None:
    name = await engine.table(
        "k UInt64, ts DateTime64(6, 'UTC'), local DateTime64(6), gone Nullable(DateTime64(6, 'UTC'))", "MergeTree ORDER BY k"
    )
    now = ch_time()
    fixed = "2024-02-29 23:59:59.999999"
    await engine.store.insert(
        name,
        [
            {"k": 1, "ts": now, "local": fixed, "gone": None},
            {"k": 2, "ts": fixed, "local": "2001-01-01 00:00:00.000001", "gone": fixed},
            {"k": 3, "ts": "2024-03-01T12:30:00.25Z", "local": "1999-12-31 23:59:59.000000", "gone": now},
        ],
    )
    rows = await engine.store.query(f"SELECT k, ts, local, gone, toString(ts) AS ts_text FROM {name} ORDER BY k")
    assert rows == [
        {"k": 1, "ts": now, "local": fixed, "gone": None, "ts_text": now},
        {"k": 2, "ts": fixed, "local": "2001-01-01 00:00:00.000001", "gone": fixed, "ts_text": fixed},
        {
            "k": 3,
            "ts": "2024-03-01 12:30:00.250000",
            "local": "1999-12-31 23:59:59.000000",
            "gone": now,
            "ts_text": "2024-03-01 12:30:00.250000",
        },
    ]
    assert parse_ch_time(rows[1]["ts"]) == datetime(2024, 2, 29, 23, 59, 59, 999999, tzinfo=UTC)
    found = await engine.store.query(f"SELECT k FROM {name} WHERE ts = {{t:DateTime64(6, 'UTC')}}", {"t": fixed})
    assert found == [{"k": 2}]
    found = await engine.store.query(f"SELECT k FROM {name} WHERE ts > {{t:DateTime64(6, 'UTC')}} ORDER BY k", {"t": fixed})
    assert found == [{"k": 1}, {"k": 3}]


async def test_datetime64_param_echo(engine: Engine) -> None:
    rows = await engine.store.query(
        "SELECT {t:DateTime64(6, 'UTC')} AS t, {l:DateTime64(3)} AS l, toString({t:DateTime64(6, 'UTC')}) AS s",
        {"t": "2024-01-02 03:04:05.123456", "l": "2024-01-02 03:04:05.123456"},
    )
    assert rows == [{"t": "2024-01-02 03:04:05.123456", "l": "2024-01-02 03:04:05.123", "s": "2024-01-02 03:04:05.123456"}]


# --------------------------------------------------------------------------- result types


async def test_result_types_match_embedded_json(engine: Engine) -> None:
    rows = await engine.store.query(
        "SELECT 1 AS one, toUInt64(18446744073709551615) AS big, toInt128(-5) AS wide, 0.5 AS half, toFloat64(3) AS integral,"
        " toFloat32(0.1) AS f32, nan AS not_a_number, toDecimal64(2.5, 2) AS dec, toDecimal64(2, 2) AS dec_int, true AS yes,"
        " toDate('2024-01-02') AS day, toDateTime('2024-01-02 03:04:05', 'UTC') AS sec,"
        " toDateTime64('2024-01-02 03:04:05.123456', 6, 'Asia/Tokyo') AS tokyo,"
        " toUUID('6ba7b810-9dad-11d1-80b4-00c04fd430c8') AS id, map('k', 1.5) AS m, map(1, 'a') AS m_int,"
        " (1, 'a') AS pair, CAST((1, 'a') AS Tuple(x UInt8, y String)) AS named, NULL AS nothing,"
        " toLowCardinality('lc') AS lc, CAST('b' AS Enum8('a' = 1, 'b' = 2)) AS enum, [[1], []] AS nested,"
        " toString(toDateTime64('2024-01-02 03:04:05.5', 6, 'UTC')) AS as_text"
    )
    assert rows == [
        {
            "one": 1,
            "big": 18446744073709551615,
            "wide": -5,
            "half": 0.5,
            "integral": 3,
            "f32": 0.1,
            "not_a_number": None,
            "dec": 2.5,
            "dec_int": 2,
            "yes": True,
            "day": "2024-01-02",
            "sec": "2024-01-02 03:04:05",
            "tokyo": "2024-01-02 03:04:05.123456",
            "id": "6ba7b810-9dad-11d1-80b4-00c04fd430c8",
            "m": {"k": 1.5},
            "m_int": {"1": "a"},
            "pair": [1, "a"],
            "named": {"x": 1, "y": "a"},
            "nothing": None,
            "lc": "lc",
            "enum": "b",
            "nested": [[1], []],
            "as_text": "2024-01-02 03:04:05.500000",
        }
    ]


async def test_statements_without_rows_return_empty(engine: Engine) -> None:
    name = await engine.table("k UInt64")
    assert await engine.store.query(f"SELECT k FROM {name}") == []
    assert await engine.store.query(f"INSERT INTO {name} SELECT number FROM numbers(3)") == []
    assert await engine.store.query(f"SELECT count() AS n FROM {name}") == [{"n": 3}]


# --------------------------------------------------------------------------- ReplacingMergeTree


async def test_replacing_merge_tree_final_returns_latest_version(engine: Engine) -> None:
    name = await engine.table("id String, val String, version UInt64", "ReplacingMergeTree(version) ORDER BY id")
    # Separate inserts make separate parts; the highest version wins, not the last insert.
    for version, val in [(1, "first"), (3, "latest"), (2, "stale")]:
        await engine.store.insert(name, [{"id": "a", "val": val, "version": version}])
    await engine.store.insert(name, [{"id": "b", "val": "only", "version": 1}])
    rows = await engine.store.query(f"SELECT id, val, version FROM {name} FINAL ORDER BY id")
    assert rows == [{"id": "a", "val": "latest", "version": 3}, {"id": "b", "val": "only", "version": 1}]
    rows = await engine.store.query(f"SELECT val FROM {name} FINAL WHERE id = {{id:String}}", {"id": "a"})
    assert rows == [{"val": "latest"}]


async def test_tombstones_filter_deleted_rows(engine: Engine) -> None:
    name = await engine.table(
        "org String, name String, version UInt64, tombstoned_at Nullable(DateTime64(6, 'UTC'))",
        "ReplacingMergeTree(version) ORDER BY (org, name)",
    )
    live = f"SELECT name FROM {name} FINAL WHERE org = {{org:String}} AND tombstoned_at IS NULL ORDER BY name"
    await engine.store.insert(
        name,
        [
            {"org": "o", "name": "a", "version": 1, "tombstoned_at": None},
            {"org": "o", "name": "b", "version": 1, "tombstoned_at": None},
            {"org": "p", "name": "a", "version": 1, "tombstoned_at": None},
        ],
    )
    assert await engine.store.query(live, {"org": "o"}) == [{"name": "a"}, {"name": "b"}]
    await engine.store.insert(name, [{"org": "o", "name": "a", "version": 2, "tombstoned_at": ch_time()}])
    assert await engine.store.query(live, {"org": "o"}) == [{"name": "b"}]
    assert await engine.store.query(live, {"org": "p"}) == [{"name": "a"}]
    # A newer live version brings the row back.
    await engine.store.insert(name, [{"org": "o", "name": "a", "version": 3, "tombstoned_at": None}])
    assert await engine.store.query(live, {"org": "o"}) == [{"name": "a"}, {"name": "b"}]


async def test_a_large_insert_lands_every_row_whatever_columns_its_rows_name(engine: Engine) -> None:
    """Past the rows the chDB engine encodes in one loop step (its columns gathered a slice a
    step): every row lands, and a row deep in the batch that leaves a column out takes its
    default."""
    name = await engine.table("k UInt64, v String, n UInt32 DEFAULT 7", "MergeTree ORDER BY k")
    uniform = [{"k": i, "v": f"v{i}", "n": i % 5} for i in range(1000)]
    await engine.store.insert(name, uniform)
    mixed = [{"k": 1000 + i, "v": f"w{i}", "n": 1} for i in range(700)]
    mixed[600] = {"k": 1600, "v": "no n"}
    await engine.store.insert(name, mixed)
    got = await engine.store.query(f"SELECT count() AS rows, sum(n) AS total FROM {name}")
    assert got == [{"rows": 1700, "total": sum(r["n"] for r in uniform) + 699 + 7}]
    assert await engine.store.query(f"SELECT v, n FROM {name} WHERE k = 1600") == [{"v": "no n", "n": 7}]


# --------------------------------------------------------------------------- insert dedup


async def test_insert_dedup_token_makes_a_repeat_a_no_op(engine: Engine) -> None:
    name = await engine.table("k UInt64, v String", "MergeTree ORDER BY k SETTINGS non_replicated_deduplication_window = 100")
    count = f"SELECT count() AS n FROM {name}"
    token = f"batch-{uuid.uuid4().hex}"
    await engine.store.insert(name, [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}], dedup_token=token)
    assert await engine.store.query(count) == [{"n": 2}]
    # Same token, even with different rows: the server treats it as the same block.
    await engine.store.insert(name, [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}], dedup_token=token)
    await engine.store.insert(name, [{"k": 3, "v": "c"}], dedup_token=token)
    assert await engine.store.query(count) == [{"n": 2}]
    await engine.store.insert(name, [{"k": 3, "v": "c"}], dedup_token=f"batch-{uuid.uuid4().hex}")
    assert await engine.store.query(count) == [{"n": 3}]


async def test_rows_already_encoded_insert_as_given_and_dedup_by_token(engine: Engine) -> None:
    """insert_json_lines: rows encoded once by their writer (one JSON object a line), hostile
    strings and arrays included, land as `insert` would land them; a repeated token lands once."""
    name = await engine.table(
        "k UInt64, s String, tags Array(String)", "MergeTree ORDER BY k SETTINGS non_replicated_deduplication_window = 100"
    )
    rows = [{"k": i, "s": v, "tags": [v]} for i, v in enumerate(SAFE_HOSTILE + ESCAPE_HOSTILE + DB_LOOKALIKES)]
    data = b"\n".join(fastjson.dumps(r) for r in rows)
    token = f"batch-{uuid.uuid4().hex}"
    await engine.store.insert_json_lines(name, data, dedup_token=token)
    await engine.store.insert_json_lines(name, data, dedup_token=token)
    await engine.store.insert_json_lines(name, b"")
    assert await engine.store.query(f"SELECT k, s, tags FROM {name} ORDER BY k") == rows
    # The same rows given as their lines (joined into the statement by the store) land alike.
    lines = [fastjson.dumps({**r, "k": r["k"] + len(rows)}) for r in rows]
    await engine.store.insert_json_lines(name, lines, dedup_token=f"batch-{uuid.uuid4().hex}")
    await engine.store.insert_json_lines(name, [])
    again = await engine.store.query(f"SELECT k, s, tags FROM {name} WHERE k >= {{n:UInt64}} ORDER BY k", {"n": len(rows)})
    assert again == [{**r, "k": r["k"] + len(rows)} for r in rows]


async def test_insert_rejects_bad_token_and_table_and_skips_empty(engine: Engine) -> None:
    name = await engine.table("k UInt64")
    with pytest.raises(ValueError):
        await engine.store.insert(name, [{"k": 1}], dedup_token="bad token'")
    with pytest.raises(ValueError):
        await engine.store.insert(f"{name}; DROP TABLE {name}", [{"k": 1}])
    await engine.store.insert(name, [])
    assert await engine.store.query(f"SELECT count() AS n FROM {name}") == [{"n": 0}]


# --------------------------------------------------------------------------- errors

DRIVER_WORDS = ("Code:", "DB::", "Exception", "SELEC", "no_such_table", "SYNTAX", "UNKNOWN", "s3cr3t", "chdb", "asynch")


def _assert_clean(exc: StoreError) -> None:
    assert exc.code == "BACKEND_UNAVAILABLE"
    text = " ".join([exc.message, str(exc), repr(exc.to_payload())])
    for word in DRIVER_WORDS:
        assert word.lower() not in text.lower(), f"{word!r} leaked into {text!r}"


@pytest.mark.parametrize(
    ("sql", "params"),
    [
        ("SELEC 1", None),
        ("SELECT * FROM {db}.no_such_table_x", None),
        ("SELECT {missing:UInt64} AS v", {}),
        ("SELECT {v:UInt64} AS v", {"v": "s3cr3t-not-a-number"}),
        ("SELECT throwIf(1, 's3cr3t')", None),
    ],
)
async def test_store_error_hides_driver_text(engine: Engine, sql: str, params: dict[str, object] | None) -> None:
    with pytest.raises(StoreError) as caught:
        await engine.store.query(sql, params)
    _assert_clean(caught.value)
    with pytest.raises(StoreError) as caught:
        await engine.store.execute(sql, params)
    _assert_clean(caught.value)
    await engine.store.ping()  # the engine is still usable


async def test_insert_error_is_a_store_error(engine: Engine) -> None:
    name = await engine.table("k UInt64")
    with pytest.raises(StoreError) as caught:
        await engine.store.insert(f"{{db}}.no_such_table_{uuid.uuid4().hex}", [{"k": 1}])
    _assert_clean(caught.value)
    await engine.store.insert(name, [{"k": 1}])


async def test_concurrent_parameterised_queries_keep_their_own_values(engine: Engine) -> None:
    """Statements in flight at once never see each other's parameters (a tenant's filter value
    must never be another's)."""
    import asyncio

    async def one(i: int) -> None:
        rows = await engine.store.query("SELECT {v:String} AS v, {n:UInt64} AS n", {"v": f"tenant-{i}", "n": i})
        assert rows == [{"v": f"tenant-{i}", "n": i}]

    await asyncio.gather(*(one(i) for i in range(400)))
