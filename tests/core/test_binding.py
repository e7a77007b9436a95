"""The server engine's client-side binding (core/loom_core/store/binding.py) as text in, text out:
which braces are placeholders, and how a type's arguments split. The contract against a live
server is tests/core/test_store_contract.py; these run everywhere."""

from __future__ import annotations

import pytest
from loom_core.store.binding import bind_params, render_literal


def test_placeholders_are_bound_and_quoted_or_commented_braces_are_left_alone() -> None:
    sql = "SELECT '{x:String}' AS a, `{x:String}` AS b, {x:String} AS c -- {x:String}\n /* {x:String} */ # {x:String}\n, {n:UInt8}"
    assert bind_params(sql, {"x": "it's", "n": 3}) == (
        "SELECT '{x:String}' AS a, `{x:String}` AS b, 'it\\'s' AS c -- {x:String}\n /* {x:String} */ # {x:String}\n, _CAST(3, 'UInt8')"
    )


def test_a_placeholder_type_with_quoted_braces_and_commas_is_read_whole() -> None:
    sql = "SELECT {e:Enum8('a}' = 1, 'b,' = 2)} AS e, {t:Tuple(a String, b Array(UInt8))} AS t"
    assert bind_params(sql, {"e": "a}", "t": {"a": "x,y", "b": [1, 2]}}) == (
        "SELECT _CAST('a}', 'Enum8(\\'a}\\' = 1, \\'b,\\' = 2)') AS e, _CAST(tuple('x,y', [1, 2]), 'Tuple(a String, b Array(UInt8))') AS t"
    )


def test_braces_that_are_not_placeholders_are_left_alone() -> None:
    sql = "SELECT {db}.t, map('k', 1)['k'], {x:String}, {y:; {x:"
    assert bind_params(sql, {"x": "v"}) == "SELECT {db}.t, map('k', 1)['k'], 'v', {y:; {x:"


def test_map_and_nested_arguments_split_at_top_level_commas_only() -> None:
    assert render_literal({"k,1": [("a", 1)]}, "Map(String, Array(Tuple(String, UInt8)))") == "[('k,1', [tuple('a', 1)])]"


def test_an_unset_parameter_is_refused() -> None:
    with pytest.raises(Exception, match="parameter y is not set"):
        bind_params("SELECT {x:String}, {y:String}", {"x": "v"})
