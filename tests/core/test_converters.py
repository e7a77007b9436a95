"""core/loom_core/catalog/converters.py is exactly what scripts/gen_converters.py renders from
the proto descriptors, and it covers every op's messages (a message type it lacks would print
through protobuf's slower printer). That each converter equals protobuf's printer is
tests/gateway/test_transports.py's."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

from loom_core.catalog import load_catalog
from loom_core.catalog.converters import JSON, SPARSE

from tests.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _load_generator() -> ModuleType:
    return load_script("gen_converters")


gen_converters = _load_generator()


def test_committed_converters_match_a_fresh_render() -> None:
    committed = (ROOT / "core" / "loom_core" / "catalog" / "converters.py").read_text()
    assert committed == gen_converters.render(), "converters.py is stale: run python scripts/gen_converters.py"
    assert gen_converters.main(["--check"]) == 0


def test_every_op_message_has_its_generated_converters() -> None:
    ops = load_catalog().ops.values()
    assert [op.name for op in ops if op.request_cls not in JSON or op.request_cls not in SPARSE] == []
    assert [op.name for op in ops if op.response_cls not in JSON] == []
