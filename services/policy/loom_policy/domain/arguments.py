"""Warnings for a rule that names an argument an op does not take: `args_equal` compares a
recorded event's argument, `$args.<field>` the current call's; a name no matching op takes
never matches, so such a rule silently decides as if the comparison failed (a read-before-delete
rule then denies every delete). The names come from each op's input message."""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping

from .model import BoolNode, Leaf, Node, RuleDef


def argument_warnings(rule: RuleDef, op_arguments: Mapping[str, frozenset[str]]) -> list[str]:
    """One warning per argument name no op matching its pattern takes (a pattern matching no
    known op is left alone: nothing to check it against)."""
    warnings: list[str] = []
    for leaf in _leaves(rule.condition):
        for pattern, entries, where in (
            (leaf.operation, leaf.args_equal, "args_equal"),
            (leaf.anchor, leaf.anchor_args_equal, "anchor_args_equal"),
        ):
            for entry in entries:
                warnings += _unknown(f"{leaf.path}.{where}.{entry.field}", entry.field, [pattern], op_arguments)
                if entry.bind is not None:
                    warnings += _unknown(f"{leaf.path}.{where}.{entry.field}", entry.bind, rule.actions, op_arguments, bound=True)
    return warnings


def _unknown(path: str, name: str, patterns: Iterable[str], op_arguments: Mapping[str, frozenset[str]], bound: bool = False) -> list[str]:
    ops = sorted({op for p in patterns if p for op in op_arguments if p == "*" or fnmatch.fnmatchcase(op, p)})
    if not ops:
        return []
    top = name.split(".", 1)[0]
    if any(top in op_arguments[op] for op in ops):
        return []
    what = f"$args.{name}" if bound else name
    takes = "; ".join(f"{op} takes {', '.join(sorted(op_arguments[op])) or 'no arguments'}" for op in ops[:3])
    return [f"{path}: {what} is an argument {' / '.join(ops[:3])} does not take, so it never matches ({takes})"]


def _leaves(node: Node) -> Iterable[Leaf]:
    if isinstance(node, BoolNode):
        for child in node.children:
            yield from _leaves(child)
    else:
        yield node
