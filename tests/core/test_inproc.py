"""core's in-process registry: a part finds another part of its own replica, never another's."""

from __future__ import annotations

from loom_core import inproc


def test_a_part_is_found_by_its_replica_and_not_by_another() -> None:
    replica_a, replica_b, part_a, part_b = object(), object(), object(), object()
    inproc.register("test-part", replica_a, part_a)
    inproc.register("test-part", replica_b, part_b)
    try:
        assert inproc.find("test-part", replica_a) is part_a
        assert inproc.find("test-part", replica_b) is part_b
        assert inproc.find("other-part", replica_a) is None
        # With no replica named, only a process's single such part is an answer.
        assert inproc.find("test-part", None) is None
        inproc.unregister("test-part", replica_b)
        assert inproc.find("test-part", replica_b) is None
        assert inproc.find("test-part", None) is part_a
    finally:
        inproc.unregister("test-part", replica_a)
        inproc.unregister("test-part", replica_b)
    assert inproc.find("test-part", None) is None
