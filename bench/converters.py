"""The message -> JSON converters on every request's path (loom_core.catalog.to_json): the
response printer (`message_to_json`, every door's answer) and the sparse printer
(`message_to_sparse_json`, a direct gRPC caller's request as it is checked), over every op's
request and response message filled with values.

    .venv/bin/python bench/converters.py [--rounds 200] [--repeat 5] [--json]

Baseline, in the same run: protobuf's own printer (json_format.MessageToDict, what the
converters must equal: `message_to_json_reference`). Prints microseconds per message (the best
of `--repeat` timings) and the ratio converter / printer.
"""

from __future__ import annotations

import argparse
import json
import random
import timeit
from collections.abc import Callable

from _machine import machine  # bench/ is on sys.path when a script runs
from google.protobuf import json_format
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from loom_core.catalog import load_catalog, message_to_json, message_to_json_reference, message_to_sparse_json
from loom_core.catalog.schema import FieldDescriptorOf


def _value(f: FieldDescriptorOf, rnd: random.Random) -> object:
    if f.type == FieldDescriptor.TYPE_STRING:
        return f"value-{rnd.randrange(1000)}"
    if f.type == FieldDescriptor.TYPE_BOOL:
        return True
    if f.type == FieldDescriptor.TYPE_ENUM:
        assert f.enum_type is not None
        return f.enum_type.values[-1].number
    if f.type == FieldDescriptor.TYPE_BYTES:
        return b"bytes"
    if f.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return 0.5
    return rnd.randrange(1, 1000)


def fill(msg: Message, rnd: random.Random, depth: int = 0) -> None:
    """Every field set (nested messages to depth 3, two items per list and map)."""
    for f in msg.DESCRIPTOR.fields:
        target = getattr(msg, f.name)
        mt = f.message_type
        if mt is not None:
            if mt.GetOptions().map_entry:
                key_f, val_f = mt.fields_by_name["key"], mt.fields_by_name["value"]
                for i in range(2):
                    key = f"k{i}" if key_f.type == FieldDescriptor.TYPE_STRING else i
                    if val_f.message_type is None:
                        target[key] = _value(val_f, rnd)
                    elif depth < 3:
                        fill(target[key], rnd, depth + 1)
            elif mt.full_name == "google.protobuf.Struct":
                (target.add() if f.is_repeated else target).update({"a": 1, "b": [1.5, "x", None, True], "c": {"d": 2}})
            elif mt.full_name.startswith("google.protobuf."):
                continue
            elif depth < 3 and f.is_repeated:
                for _ in range(2):
                    fill(target.add(), rnd, depth + 1)
            elif depth < 3:
                target.SetInParent()
                fill(target, rnd, depth + 1)
        elif f.is_repeated:
            target.extend([_value(f, rnd), _value(f, rnd)])
        elif f.containing_oneof is None or not msg.WhichOneof(f.containing_oneof.name):
            setattr(msg, f.name, _value(f, rnd))


def per_message_us(convert: Callable[[Message], object], corpus: list[Message], rounds: int, repeat: int) -> float:
    def run() -> None:
        for msg in corpus:
            convert(msg)

    best = min(timeit.repeat(run, number=rounds, repeat=repeat))
    return best / (rounds * len(corpus)) * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    rnd = random.Random(7)
    requests: list[Message] = []
    responses: list[Message] = []
    for op in load_catalog().ops.values():
        for cls, corpus in ((op.request_cls, requests), (op.response_cls, responses)):
            msg = cls()
            fill(msg, rnd)
            corpus.append(msg)
    everything = requests + responses
    for msg in everything:  # the converters are built on first use: not part of the timing
        message_to_json(msg)
        message_to_sparse_json(msg)

    def sparse_reference(msg: Message) -> object:
        return json_format.MessageToDict(msg, preserving_proto_field_name=True)

    result: dict[str, object] = {"machine": machine(), "messages": len(everything), "rounds": args.rounds}
    for name, convert, reference, corpus in (
        ("message_to_json", message_to_json, message_to_json_reference, everything),
        ("message_to_sparse_json", message_to_sparse_json, sparse_reference, requests),
    ):
        ours = per_message_us(convert, corpus, args.rounds, args.repeat)
        theirs = per_message_us(reference, corpus, max(1, args.rounds // 10), args.repeat)
        result[name] = {"us_per_message": round(ours, 3), "printer_us_per_message": round(theirs, 3), "ratio": round(ours / theirs, 4)}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(f"{result['messages']} messages (every op's request and response, filled), best of {args.repeat}")
    for name in ("message_to_json", "message_to_sparse_json"):
        r = result[name]
        assert isinstance(r, dict)
        print(
            f"{name:24} {r['us_per_message']:8.3f} us/message   protobuf's printer {r['printer_us_per_message']:8.3f}   ratio {r['ratio']:.4f}"
        )


if __name__ == "__main__":
    main()
