"""viewer < writer < admin."""

from __future__ import annotations

from enum import IntEnum

from loom_api.options.v1 import options_pb2


class Role(IntEnum):
    NONE = 0
    VIEWER = 1
    WRITER = 2
    ADMIN = 3

    @classmethod
    def parse(cls, value: str) -> Role:
        role = _BY_NAME.get(value)  # the spelling tokens and grants carry: no enum lookup per call
        if role is not None:
            return role
        try:
            return cls[value.upper()]
        except KeyError:
            raise ValueError(f"unknown role {value!r} (viewer, writer, admin)") from None

    @classmethod
    def from_proto(cls, value: int) -> Role:
        by_proto: dict[int, Role] = {
            options_pb2.ROLE_VIEWER: cls.VIEWER,
            options_pb2.ROLE_WRITER: cls.WRITER,
            options_pb2.ROLE_ADMIN: cls.ADMIN,
        }
        return by_proto.get(value, cls.VIEWER)

    @property
    def label(self) -> str:
        return _LABELS[self]


# Read on every call (a token's claims, a live grant, an answer's role): plain dicts, not the
# enum's name machinery.
_LABELS: dict[Role, str] = {r: r.name.lower() for r in Role}
_BY_NAME: dict[str, Role] = {label: r for r, label in _LABELS.items()}
