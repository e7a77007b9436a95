"""A refused policy condition's second look (loom_core.catalog.validation.refusal_validator): the
`jsonschema` validator that names the refused field, over `policy.set` bodies whose condition
tree holds one wrong node at the bottom of valid subtrees (a bad number, a malformed window, an
unknown field, an unknown kind, a node without `op`).

    .venv/bin/python bench/refusals.py [--depth 3] [--rounds 200] [--repeat 5] [--json]

Baseline, in the same run: plain `jsonschema` over the same schema (Draft202012Validator,
walking every branch of every union), what the catalog ran before. Both must name the same
field and reason. Prints CPU milliseconds per refused body (the best of `--repeat`) and the
ratio plain / refusal_validator.
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from _machine import load, machine  # bench/ is on sys.path when a script runs
from jsonschema import Draft202012Validator
from loom_core.catalog import load_catalog
from loom_core.catalog.validation import FORMATS, raise_refusal, refusal_validator
from loom_core.errors import ValidationFailed

LEAF = {"op": "formerly", "within": "1h", "operation": "memory.get"}
WRONG: dict[str, dict[str, Any]] = {
    "a number below its minimum": {"op": "count_within", "within": "1h", "cmp": "gt", "value": -1},
    "a malformed window": {"op": "formerly", "within": "1 hour"},
    "an unknown field": {**LEAF, "zzz": 1},
    "an unknown kind": {"op": "sometimes", "within": "1h"},
    "a node without op": {"within": "1h"},
}


def tree(depth: int) -> dict[str, Any]:
    """A valid condition: any(subtree, not(subtree), leaf), `depth` levels (3: 40 nodes)."""
    if depth == 0:
        return LEAF
    return {"op": "any", "of": [tree(depth - 1), {"op": "not", "of": tree(depth - 1)}, LEAF]}


def refusal(validator: Any, body: dict[str, Any]) -> tuple[str, object]:
    errors = sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    try:
        raise_refusal(errors[0])
    except ValidationFailed as exc:
        return exc.message, exc.detail
    raise AssertionError("raise_refusal returned")


def cpu_ms(validator: Any, body: dict[str, Any], rounds: int, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        started = time.process_time()
        for _ in range(rounds):
            refusal(validator, body)
        best = min(best, (time.process_time() - started) / rounds * 1000)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    op = load_catalog().ops["policy.set"]
    plain = Draft202012Validator(op.input_schema, format_checker=FORMATS)
    judged = refusal_validator(op.input_schema)
    rows = []
    for what, wrong in WRONG.items():
        condition = {"op": "all", "of": [tree(args.depth), {"op": "not", "of": {"op": "any", "of": [LEAF, wrong]}}]}
        body = {"name": "r1", "effect": "forbid", "actions": ["memory.put"], "condition": condition}
        answer = refusal(judged, body)
        assert answer == refusal(plain, body), (what, answer, refusal(plain, body))
        before = cpu_ms(plain, body, max(1, args.rounds // 10), args.repeat)
        after = cpu_ms(judged, body, args.rounds, args.repeat)
        rows.append(
            {
                "wrong": what,
                "plain_ms": round(before, 3),
                "judged_ms": round(after, 3),
                "ratio": round(before / after, 1),
                "field": answer[1],
            }
        )
    result = {"machine": machine(), "load": load(), "depth": args.depth, "rows": rows}
    if args.json:
        print(json.dumps(result))
        return
    print(f"{result['machine']}; {result['load']}; a {args.depth}-level tree beside the wrong node; CPU ms per refused body")
    for r in rows:
        print(f"  {r['wrong']:<28} plain jsonschema {r['plain_ms']:7.2f}  refusal_validator {r['judged_ms']:6.3f}  x{r['ratio']}")


if __name__ == "__main__":
    main()
