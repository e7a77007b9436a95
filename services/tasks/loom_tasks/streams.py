"""The shape the tasks plane's two JetStream streams share: the task state (store/truth.py) and
the task events (events.py), each with its own limits."""

from __future__ import annotations

from typing import Any

from nats.js.api import DiscardPolicy, RetentionPolicy, StorageType, StreamConfig


def file_stream(name: str, subjects: list[str], replicas: int, *, atomic: bool, **limits: Any) -> StreamConfig:
    """A stream on file that keeps messages up to `limits` (the oldest go first), serves direct
    gets and has at least one replica; `atomic`: the server takes atomic batches
    (`jspublish.server_takes_atomic`), so the stream allows them."""
    return StreamConfig(
        name=name,
        subjects=subjects,
        retention=RetentionPolicy.LIMITS,
        storage=StorageType.FILE,
        discard=DiscardPolicy.OLD,
        num_replicas=max(1, replicas),
        allow_direct=True,
        # Left out (None) unless asked: a nats-server before 2.12 refuses the field it does not know.
        allow_atomic=True if atomic else None,
        **limits,
    )
