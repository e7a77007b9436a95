"""The task inbox's pure rules: the trust decision, evidence, the state machine, argument checks."""

from __future__ import annotations

import asyncio
import json
import random
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
from loom_core.bus.task_subjects import event_subject, namespace_filter, parse_subject
from loom_core.errors import Conflict, Forbidden, ValidationFailed
from loom_tasks.domain import events, model, transitions, trust
from loom_tasks.domain import validate as v
from loom_tasks.domain.model import Actor, InboxRow, PolicyRow, TaskRow
from loom_tasks.handlers import event_pb
from loom_tasks.service import wake
from loom_tasks.service.wake import InboxQueue, WakeHub
from loom_tasks.store.tasks import EventRow, event_row

OWNER = Actor("sa:private-bot", "private-bot", owner=True)
POSTER = Actor("sa:public-bot", "public-bot", owner=False)


def row(status: str = model.TODO, **kw: object) -> TaskRow:
    base: dict[str, object] = {
        "org": "acme",
        "task_id": "0123456789abcdef01234567",
        "inbox": "private-bot",
        "namespace": "private",
        "kind": "k",
    }
    base.update(kw)
    r = TaskRow(**base)  # type: ignore[arg-type]
    r.status = status
    r.poster = str(kw.get("poster", "sa:public-bot"))
    r.version = 1
    return r


# --- trust ----------------------------------------------------------------------------------


def p(poster: str, kind: str, mode: str, evidence: tuple[str, ...] = ()) -> PolicyRow:
    return PolicyRow("private-bot", poster, kind, mode, evidence)


def test_no_row_writer_posts_auto_anyone_else_review() -> None:
    assert trust.decide([], subject="sa:x", agent="x", kind="k", writer_on_owner_namespace=True).mode == "auto"
    assert trust.decide([], subject="sa:x", agent="x", kind="k", writer_on_owner_namespace=False).mode == "review"


def test_kind_row_beats_star_row_for_the_same_poster() -> None:
    rows = [p("sa:public-bot", "security_finding", "review", ("inputs.finding_id",)), p("sa:public-bot", "*", "deny")]
    d = trust.decide(rows, subject="sa:public-bot", agent="public-bot", kind="security_finding", writer_on_owner_namespace=False)
    assert d.mode == "review" and d.require_evidence == ("inputs.finding_id",)
    assert trust.decide(rows, subject="sa:public-bot", agent="public-bot", kind="other", writer_on_owner_namespace=False).mode == "deny"


def test_agent_label_row_grants_auto_only_to_a_writer() -> None:
    rows = [p("public-bot", "*", "auto")]
    outsider = trust.decide(rows, subject="sa:public-bot", agent="public-bot", kind="k", writer_on_owner_namespace=False)
    assert outsider.mode == "review" and outsider.row is None
    assert trust.decide(rows, subject="sa:someone", agent="public-bot", kind="k", writer_on_owner_namespace=True).mode == "auto"


def test_agent_label_auto_row_grants_nothing_so_a_non_writer_meets_the_star_poster_row() -> None:
    rows = [p("public-bot", "*", "auto"), p("*", "*", "deny")]
    outsider = trust.decide(rows, subject="sa:public-bot", agent="public-bot", kind="k", writer_on_owner_namespace=False)
    assert outsider.mode == "deny" and outsider.row is not None and outsider.row.poster == "*"


def test_a_label_never_matches_a_subject_row() -> None:
    rows = [p("sa:trusted", "*", "auto")]
    d = trust.decide(rows, subject="sa:intruder", agent="sa:trusted", kind="k", writer_on_owner_namespace=False)
    assert d.mode == "review" and d.row is None


def test_subject_row_wins_over_label_row_and_star_poster() -> None:
    rows = [p("sa:public-bot", "*", "auto"), p("public-bot", "*", "deny"), p("*", "*", "deny")]
    assert trust.decide(rows, subject="sa:public-bot", agent="public-bot", kind="k", writer_on_owner_namespace=False).mode == "auto"
    assert trust.decide(rows, subject="sa:other", agent="other", kind="k", writer_on_owner_namespace=True).mode == "deny"


def test_missing_evidence_names_absent_and_empty_paths() -> None:
    brief = {"inputs": {"finding_id": "f-77", "test": ""}, "x": []}
    assert trust.missing_evidence(brief, ["inputs.finding_id", "inputs.test", "inputs.other", "x", "y.z"]) == [
        "inputs.test",
        "inputs.other",
        "x",
        "y.z",
    ]


# --- the state machine ------------------------------------------------------------------------


def test_claim_complete_path() -> None:
    c = transitions.claim(row(), OWNER, fence=42, lease_seconds=60, now=100.0)
    assert c.row.status == model.IN_PROGRESS and c.row.fence == 42 and c.row.lease_expires_at == 160.0
    assert "fence" not in c.data  # the fence is the claimant's alone
    d = transitions.complete(c.row, OWNER, {"ok": 1}, now=101.0)
    assert d.row.status == model.DONE and d.row.fence == 0 and d.event == "done"


@pytest.mark.parametrize("status", sorted(model.TERMINAL))
def test_finished_task_answers_terminal_to_every_move(status: str) -> None:
    r = row(status)
    moves = [
        lambda: transitions.accept(r, OWNER, "", 1.0),
        lambda: transitions.wont_do(r, OWNER, "x", 1.0),
        lambda: transitions.cancel(r, OWNER, "x", 1.0),
        lambda: transitions.claim(r, OWNER, 1, 1, 1.0),
        lambda: transitions.complete(r, OWNER, {}, 1.0),
        lambda: transitions.fail(r, OWNER, "x", 1.0),
        lambda: transitions.defer(r, OWNER, 2.0, "", 5, 1.0),
        lambda: transitions.block(r, OWNER, "human", "x", 1.0),
        lambda: transitions.unblock(r, OWNER, "", 1.0),
        lambda: transitions.resume(r, OWNER, "", 1.0),
        lambda: transitions.update(r, OWNER, 1, {"title": "t"}, 1.0),
    ]
    for move in moves:
        with pytest.raises(Conflict) as e:
            move()
        assert e.value.code == "TASK_TERMINAL"


@pytest.mark.parametrize("status", sorted(model.REOPENABLE))
def test_reopen_moves_failed_wont_do_cancelled_back_to_todo(status: str) -> None:
    c = transitions.reopen(row(status, attempts=2), OWNER, "again", 1.0)
    assert c.row.status == model.TODO and c.row.attempts == 0


def test_reopen_refuses_done_and_unfinished() -> None:
    for status in (model.DONE, model.TODO, model.IN_PROGRESS):
        with pytest.raises(Conflict):
            transitions.reopen(row(status), OWNER, "", 1.0)


def test_poster_may_not_accept_its_own_task() -> None:
    with pytest.raises(Forbidden) as e:
        transitions.accept(row(model.TRIAGE, poster="sa:private-bot"), OWNER, "", 1.0)
    assert e.value.code == "TASK_SELF_ACCEPT"


def test_poster_cancels_only_while_nobody_holds_the_task() -> None:
    assert transitions.cancel(row(model.TODO), POSTER, "x", 1.0).row.status == model.CANCELLED
    with pytest.raises(Conflict):
        transitions.cancel(row(model.IN_PROGRESS), POSTER, "x", 1.0)
    assert transitions.cancel(row(model.IN_PROGRESS), OWNER, "x", 1.0).row.status == model.CANCELLED
    with pytest.raises(Forbidden):
        transitions.cancel(row(model.TODO), Actor("sa:stranger", "s", owner=False), "x", 1.0)


def test_wont_do_and_cancel_apply_from_every_unfinished_status() -> None:
    for status in model.UNFINISHED:
        assert transitions.wont_do(row(status), OWNER, "no", 1.0).row.status == model.WONT_DO
        assert transitions.cancel(row(status), OWNER, "no", 1.0).row.status == model.CANCELLED


def test_expiry_returns_to_todo_and_the_last_attempt_blocks_on_a_person() -> None:
    r = row(model.IN_PROGRESS, attempts=0)
    c = transitions.expire(r, max_attempts=2, now=1.0)
    assert c.row.status == model.TODO and c.row.attempts == 1 and c.event == "released"
    c2 = transitions.expire(c.row.copy(status=model.IN_PROGRESS), max_attempts=2, now=2.0)
    assert c2.row.status == model.BLOCKED and c2.row.blocked_on == "human" and c2.event == "blocked"


def test_the_max_defers_th_defer_blocks_on_a_person() -> None:
    r = row(model.IN_PROGRESS, defers=1)
    assert transitions.defer(r, OWNER, 5.0, "later", max_defers=3, now=1.0).row.status == model.DEFERRED
    blocked = transitions.defer(r.copy(defers=2), OWNER, 5.0, "later", max_defers=3, now=1.0)
    assert blocked.row.status == model.BLOCKED and blocked.row.blocked_on == "human"


def test_escalate_happens_once_and_stays_in_triage() -> None:
    c = transitions.escalate(row(model.TRIAGE), now=10.0)
    assert c is not None and c.row.status == model.TRIAGE and c.row.escalated_at == 10.0
    assert transitions.escalate(c.row, now=11.0) is None


def test_update_needs_the_current_version() -> None:
    with pytest.raises(Conflict) as e:
        transitions.update(row(), OWNER, 7, {"title": "x"}, 1.0)
    assert e.value.code == "PRECONDITION_FAILED"
    assert transitions.update(row(), OWNER, 1, {"title": "x"}, 1.0).row.title == "x"


def test_reassign_moves_the_task_and_ends_its_claim() -> None:
    target = InboxRow("acme", "other", "ns2", "other-bot")
    c = transitions.reassign(row(model.IN_PROGRESS, fence=9), OWNER, target, model.TODO, "handover", 1.0)
    assert (c.row.inbox, c.row.namespace, c.row.status, c.row.fence) == ("other", "ns2", model.TODO, 0)


def test_pull_order_is_priority_then_deadline_then_age() -> None:
    rows = [
        row(task_id="a" * 24, priority=3, created_at=1.0),
        row(task_id="b" * 24, priority=1, created_at=5.0),
        row(task_id="c" * 24, priority=3, deadline=50.0, created_at=9.0),
        row(task_id="d" * 24, priority=3, deadline=20.0, created_at=9.0),
    ]
    assert [r.task_id[0] for r in sorted(rows, key=TaskRow.pull_order)] == ["b", "d", "c", "a"]
    # `later` moves a row after the others of its priority and deadline, never past them.
    later = {"b" * 24, "d" * 24}
    assert [r.task_id[0] for r in sorted(rows, key=lambda r: r.pull_order(r.task_id in later))] == ["b", "d", "c", "a"]
    rows.append(row(task_id="e" * 24, priority=3, created_at=0.5))
    assert [r.task_id[0] for r in sorted(rows, key=lambda r: r.pull_order(r.task_id[0] == "e"))] == ["b", "d", "c", "a", "e"]


# --- arguments ---------------------------------------------------------------------------------


def test_disclosure_refusal_names_the_accepted_values() -> None:
    with pytest.raises(ValidationFailed) as e:
        v.disclosure("public_ok", ("confidential", "internal"))
    assert e.value.detail == {"field": "disclosure", "reason": "not accepted", "accepted": ["confidential", "internal"]}


def test_posters_must_be_subjects() -> None:
    assert v.posters(["sa:public-bot", "user:alice"]) == ("sa:public-bot", "user:alice")
    with pytest.raises(ValidationFailed):
        v.posters(["public-bot"])


def test_times_parse_rfc3339_and_round_trip() -> None:
    t = v.parse_time("2026-01-02T03:04:05.25Z", "deadline")
    assert t is not None and v.format_time(t) == "2026-01-02T03:04:05.250000Z"
    assert v.parse_time("", "deadline") is None
    with pytest.raises(ValidationFailed):
        v.parse_time("tomorrow", "deadline")


def test_wait_seconds_is_at_most_thirty() -> None:
    assert v.wait_seconds(30) == 30
    with pytest.raises(ValidationFailed):
        v.wait_seconds(31)


def test_event_subjects_have_four_tokens_after_the_prefix() -> None:
    s = event_subject("acme", "private", "private-bot", "done")
    assert s == "loom.tasks.acme.private.private-bot.done"
    assert parse_subject(s) == ("acme", "private", "private-bot", "done")
    assert namespace_filter("acme", "private") == "loom.tasks.acme.private.>"


# --- a stored task read back (model.stored / model.from_stored)


def test_an_event_is_copied_field_by_field_under_the_names_events_lists() -> None:
    """handlers.event_pb and store/tasks.py copy an event's text fields by events.TEXT_FIELDS:
    with at, version, data (and seq) they are every field, and a partial event's optional ones
    read empty."""
    assert set(events.TEXT_FIELDS) | {"at", "version", "data", "seq"} == set(events.TaskEvent.__annotations__)
    assert set(events.TEXT_FIELDS) | {"at", "version", "data"} == set(EventRow.__annotations__)
    e = events.build(row(), "task.created", at=1_700_000_000.0, actor="user:a", reason="why")
    stored = event_row(e, 1_700_000_000.0)
    assert {k: stored[k] for k in events.TEXT_FIELDS} == {k: e[k] for k in events.TEXT_FIELDS}
    assert (stored["data"], stored["version"], stored["at"]) == ("{}", e["version"], 1_700_000_000.0)
    sent = event_pb(e)
    assert {k: getattr(sent, k) for k in events.TEXT_FIELDS} == {k: e[k] for k in events.TEXT_FIELDS}
    partial = {k: v for k, v in e.items() if k not in events.OPTIONAL_TEXT}
    assert all(event_row(partial, 0.0)[k] == "" for k in events.OPTIONAL_TEXT)
    assert all(getattr(event_pb(partial), k) == "" for k in events.OPTIONAL_TEXT)


def test_a_stored_task_reads_back_as_it_was_except_its_revision() -> None:
    r = row(model.IN_PROGRESS, brief={"a": [1, 2]}, outcome={}, deadline=1764547200.5, claimed_by="sa:x", fence=9)
    r.rev = 41
    back = model.from_stored(json.loads(json.dumps(model.stored(r))))
    assert back.rev == 0  # a value never carries the revision it is stored at
    back.rev = r.rev
    assert back == r


def test_a_stored_task_of_another_version_reads_with_defaults_and_without_unknown_keys() -> None:
    d = model.stored(row(title="older"))
    del d["escalated_at"]  # written before the field existed
    d["rev"] = 7  # a stray revision (an older wake-up carried one)
    d["from_a_newer_version"] = True
    back = model.from_stored(d)
    assert (back.title, back.escalated_at, back.rev) == ("older", None, 0)
    reordered = dict(reversed(list(model.stored(row(title="older")).items())))
    assert model.from_stored(reordered) == model.from_stored(model.stored(row(title="older")))


def test_format_time_writes_what_datetime_writes() -> None:
    def reference(t: float) -> str:
        return datetime.fromtimestamp(t, UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")

    rng = random.Random(8)
    edges = [1764547200.0, 1764547200.9999995, 1764547200.0000005, 1764547200.0000015, 1764547199.9999996, 1.5, 5e-7, 1.5e-6, 1e-7]
    values = (
        edges + [rng.uniform(0, 4e9) for _ in range(5000)] + [int(rng.uniform(1.7e9, 1.8e9)) + k / 1e6 + 5e-7 for k in range(0, 10**6, 97)]
    )
    assert [v.format_time(t) for t in values] == [reference(t) for t in values]
    assert v.format_time(None) == v.format_time(0) == ""


# --- a replica's pull queue (service/wake.py InboxQueue): what a store query's answer changes


def _todo(task_id: str, created_at: float, priority: int = 3) -> TaskRow:
    r = row(model.TODO, task_id=task_id, priority=priority)
    r.created_at = created_at
    return r


def test_a_query_cut_at_its_limit_forgets_nothing_past_its_last_row() -> None:
    q = InboxQueue()
    for i in range(10):
        q.offer(_todo(f"t{i}", 100.0 + i))
    started = time.monotonic()
    # the store's first four in pull order; t1 was claimed elsewhere (the query no longer has it)
    q.replace([_todo("t0", 100.0), _todo("t2", 102.0), _todo("t3", 103.0), _todo("t4", 104.0)], started, complete=False)
    assert sorted(q.rows) == ["t0", "t2", "t3", "t4", "t5", "t6", "t7", "t8", "t9"]
    # a complete answer is the whole truth: what it does not hold goes
    q.replace([_todo("t9", 109.0)], time.monotonic(), complete=True)
    assert sorted(q.rows) == ["t9"]


def test_rows_offered_while_a_query_ran_stay() -> None:
    q = InboxQueue()
    started = time.monotonic()
    q.offer(_todo("late", 200.0))
    q.replace([], started, complete=True)
    assert list(q.rows) == ["late"]


def test_the_queue_hands_out_the_first_rows_in_pull_order() -> None:
    q = InboxQueue()
    rows = [_todo(f"t{i:03d}", 100.0 + (i * 37) % 500, priority=1 + i % 3) for i in range(500)]
    for r in rows:
        q.offer(r)
    q.reserved.add(rows[0].task_id)
    want = sorted((r for r in rows[1:]), key=TaskRow.pull_order)[:25]
    assert q.ordered([], time.time(), 25) == want


async def test_a_followed_queue_with_rows_answers_at_once_and_queries_the_store_beside_the_pull() -> None:
    release = asyncio.Event()
    asked: list[tuple[str, ...]] = []
    stored = [_todo("stored", 50.0)]

    async def loader(org: str, inbox: str, kinds: Sequence[str], limit: int) -> list[TaskRow]:
        asked.append(tuple(kinds))
        await release.wait()
        return list(stored)

    hub = WakeHub(None, loader, poll_seconds=60.0)
    q = hub.queue("acme", "bot")
    # Never filled: the pull waits for the store's answer.
    first = asyncio.create_task(hub.refresh("acme", "bot", q, kinds=()))
    await asyncio.sleep(0)
    assert not first.done() and asked == [()]
    release.set()
    await first
    assert list(q.rows) == ["stored"]
    # Followed since, with rows, and its answer now stale: the pull goes on at once (the store
    # does not answer yet), and the safety-net query runs beside it, unfiltered.
    release.clear()
    hub.poll_seconds = 0.0
    stored.append(_todo("new", 60.0))
    q.offer(stored[-1])
    await hub.refresh("acme", "bot", q, kinds=["chore"])
    assert not q.lock.locked()  # returned before the query began
    await asyncio.sleep(0)
    assert asked == [(), ()] and q.lock.locked()
    # A forced refresh (a pull that timed out) waits for the store.
    forced = asyncio.create_task(hub.refresh("acme", "bot", q, force=True))
    await asyncio.sleep(0)
    assert not forced.done()
    release.set()
    await forced
    assert sorted(q.rows) == ["new", "stored"] and len(asked) == 3


async def test_a_waiting_pull_on_an_empty_followed_queue_is_not_held_by_the_store_query() -> None:
    """The wake-up tail: a pull with time left to wait does not wait for the store (which waits
    for the projection) when its queue follows the inbox; a wake-up that lands meanwhile is
    claimable at once, and the query's rows wake the pull when they land."""
    release = asyncio.Event()
    asked: list[bool] = []
    stored: list[TaskRow] = []

    async def loader(org: str, inbox: str, kinds: Sequence[str], limit: int) -> list[TaskRow]:
        asked.append(True)
        await release.wait()
        return list(stored)

    hub = WakeHub(None, loader, poll_seconds=60.0)
    q = hub.queue("acme", "bot")
    # Never filled: even a pull that may wait gets the store's answer first.
    first = asyncio.create_task(hub.refresh("acme", "bot", q, waits=True))
    await asyncio.sleep(0)
    assert not first.done() and len(asked) == 1
    release.set()
    await first
    assert not q.rows and q.complete
    # Followed, empty and complete, fresh: nothing to ask.
    await hub.refresh("acme", "bot", q, waits=True)
    await asyncio.sleep(0)
    assert len(asked) == 1
    # Stale: the query runs beside the pull, which returns before the store answers ...
    release.clear()
    hub.poll_seconds = 0.0
    await hub.refresh("acme", "bot", q, waits=True)
    await asyncio.sleep(0)
    assert len(asked) == 2 and q.lock.locked()
    # ... so a wake-up that lands meanwhile is in the queue for the pull's next look.
    woken = asyncio.create_task(q.wait(60.0))
    await asyncio.sleep(0)
    q.offer(_todo("woken", 70.0))
    assert await woken and q.ordered([], time.time(), 1)[0].task_id == "woken"
    q.drop("woken")
    # The query's own rows wake a waiting pull when they land.
    stored.append(_todo("stored", 50.0))
    waiting = asyncio.create_task(q.wait(60.0))
    await asyncio.sleep(0)
    release.set()
    assert await waiting and list(q.rows) == ["stored"]
    # A pull with no time left (its wait is over, or it never had one) waits for the store.
    q.drop("stored")
    stored.clear()
    release.clear()
    last = asyncio.create_task(hub.refresh("acme", "bot", q, force=True, waits=False))
    await asyncio.sleep(0)
    assert not last.done() and len(asked) == 3
    release.set()
    await last


def test_rows_another_replica_just_announced_go_after_this_replicas_own_of_the_same_priority(monkeypatch: pytest.MonkeyPatch) -> None:
    q = InboxQueue()
    q.offer(_todo("remote-old", 100.0), remote=True)
    q.offer(_todo("remote-urgent", 300.0, priority=1), remote=True)
    q.offer(_todo("mine-young", 200.0))
    q.offer(_todo("mine-old", 150.0))
    # priority first, always; within a priority, this replica's own rows before a fresh remote one
    assert [r.task_id for r in q.ordered([], time.time(), 4)] == ["remote-urgent", "mine-old", "mine-young", "remote-old"]
    # once the announcing replica had its chance, age order again
    monkeypatch.setattr(wake, "REMOTE_GRACE_SECONDS", 0.0)
    assert [r.task_id for r in q.ordered([], time.time(), 4)] == ["remote-urgent", "remote-old", "mine-old", "mine-young"]
    # offered again by this replica (a local write), a row is this replica's own
    monkeypatch.setattr(wake, "REMOTE_GRACE_SECONDS", 60.0)
    q.offer(_todo("remote-old", 100.0))
    assert [r.task_id for r in q.ordered([], time.time(), 2)] == ["remote-urgent", "remote-old"]
    q.drop("remote-urgent")
    assert set(q.remote) == set()


def test_rows_another_replicas_pulls_will_claim_are_left_to_them_for_the_grace(monkeypatch: pytest.MonkeyPatch) -> None:
    q = InboxQueue()
    # This replica promises as many rows as its running pulls would take and have not claimed, no more.
    with q.pulling(2):
        assert [q.promise(), q.promise(), q.promise()] == [True, True, False]
        q.claimed(1)
        assert [q.promise(), q.promise()] == [True, False]
    assert (q.wanted, q.promised) == (0, 0)
    # Another replica's promised rows are not this replica's to claim during the grace.
    monkeypatch.setattr(wake, "REMOTE_GRACE_SECONDS", 60.0)
    q.offer(_todo("promised", 100.0), remote=True, promised=True)
    q.offer(_todo("open", 200.0), remote=True)
    assert [r.task_id for r in q.ordered([], time.time(), 2)] == ["open"]
    due = q.promised_for()
    assert due is not None and 59.0 < due <= 60.0
    # Once it is over (the other replica's pull did not claim it), it is anyone's.
    monkeypatch.setattr(wake, "REMOTE_GRACE_SECONDS", 0.0)
    assert [r.task_id for r in q.ordered([], time.time(), 2)] == ["promised", "open"]
    assert q.promised_for() is None and q.promised_there == {}
