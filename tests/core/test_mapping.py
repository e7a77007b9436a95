"""loom_core.catalog.message_from / dataclass_from: same-named fields cross between a typed row
and its proto message (or a request and its typed input); the keywords given win."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from loom_api.identity.v1 import identity_pb2
from loom_api.tasks.v1 import tasks_pb2
from loom_core.catalog import dataclass_from, message_from, struct_to_dict


@dataclass(frozen=True)
class Row:
    task_id: str
    inbox: str
    priority: int
    brief: dict[str, Any]
    title: str | None = None
    created_at: float = 0.0
    # Not a field of pb.Task: left behind.
    org: str = "o1"

    @property
    def kind(self) -> str:
        return "from-a-property"


def test_message_from_copies_same_named_fields_and_the_keywords_win() -> None:
    row = Row(task_id="t1", inbox="in", priority=3, brief={"a": 1, "b": ["x"]})
    msg = message_from(tasks_pb2.Task, row, inbox="other", created_time="2026-12-04T00:00:00Z")
    assert (msg.task_id, msg.inbox, msg.priority, msg.created_time) == ("t1", "other", 3, "2026-12-04T00:00:00Z")
    assert struct_to_dict(msg.brief) == {"a": 1.0, "b": ["x"]}
    # None leaves a field unset; a dataclass's properties are not its fields.
    assert msg.title == "" and msg.kind == ""


def test_message_from_takes_tuples_for_repeated_fields_and_dicts_for_maps() -> None:
    @dataclass(frozen=True)
    class InboxLike:
        inbox: str
        posters: tuple[str, ...] = ("user:a", "sa:b")
        counts: dict[str, int] = field(default_factory=lambda: {"todo": 2})

    msg = message_from(tasks_pb2.Inbox, InboxLike("in"))
    assert list(msg.posters) == ["user:a", "sa:b"] and dict(msg.counts) == {"todo": 2}


def test_dataclass_from_reads_the_message_into_plain_values() -> None:
    @dataclass(frozen=True)
    class Mint:
        subject: str
        roles: dict[str, str]
        read_scope: list[str]
        ttl_seconds: int
        # Not in the message: keeps its default unless given.
        note: str = "default"

    req = identity_pb2.MintTokenRequest(subject="sa:bot", roles={"ns1": "writer"}, read_scope=["ns2"], ttl_seconds=60)
    got = dataclass_from(Mint, req, ttl_seconds=30)
    assert got == Mint(subject="sa:bot", roles={"ns1": "writer"}, read_scope=["ns2"], ttl_seconds=30)
    assert type(got.roles) is dict and type(got.read_scope) is list


def test_dataclass_from_gives_a_struct_as_a_dict() -> None:
    @dataclass(frozen=True)
    class NewTaskLike:
        inbox: str
        brief: dict[str, Any]

    req = tasks_pb2.CreateTaskRequest(inbox="in")
    req.brief.update({"goal": "ship"})
    assert dataclass_from(NewTaskLike, req) == NewTaskLike(inbox="in", brief={"goal": "ship"})
