"""A WHERE clause built one condition at a time, each value bound as a query parameter.

    where = Where("org = {org:String}", org=org)
    if inbox is not None:
        where.add("inbox = {inbox:String}", inbox=inbox)
    await store.query(f"SELECT … FROM t WHERE {where} LIMIT {{limit:UInt32}}", where.bind(limit=limit))

A condition names its parameters in ClickHouse's `{name:Type}` form and `add` binds their
values, so a value is never formatted into the SQL text.
"""

from __future__ import annotations

from typing import Any


class Where:
    __slots__ = ("conditions", "params")

    def __init__(self, *conditions: str, **params: Any) -> None:
        self.conditions = list(conditions)
        self.params: dict[str, Any] = params

    def add(self, condition: str, **params: Any) -> Where:
        """AND one more condition, binding the parameters it names."""
        self.conditions.append(condition)
        self.params.update(params)
        return self

    def bind(self, **params: Any) -> dict[str, Any]:
        """The clause's parameters with the rest of the statement's (a LIMIT, a vector)."""
        return {**self.params, **params}

    def __str__(self) -> str:
        return " AND ".join(self.conditions)
