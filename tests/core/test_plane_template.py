"""Every plane has the template's shape, and its handlers serve exactly its proto's ops."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

import pytest
from google.protobuf.message import Message
from loom_core.catalog import load_catalog
from loom_core.chain import CallContext
from loom_core.plane import bind_handlers, handler_name
from loom_core.runtime import Runtime
from loom_gateway.identity import build as build_identity
from loom_runner.embedded import Instance

PLANE_EPS = sorted(entry_points(group="loom.planes"), key=lambda e: e.name)
TEMPLATE = ("plane.py", "handlers.py", "service", "domain", "store")
# `consumers/` is the template's too, for a plane that reads the bus: present only with a reader in it.
CONSUMERS = "consumers"


def _package_dir(module: str) -> Path:
    mod = importlib.import_module(module)
    assert mod.__file__ is not None
    return Path(mod.__file__).parent


@pytest.mark.parametrize("ep", PLANE_EPS, ids=[e.name for e in PLANE_EPS])
def test_every_installed_plane_has_the_template_layout(ep: object) -> None:
    pkg = _package_dir(ep.value.split(":")[0].rsplit(".", 1)[0])  # type: ignore[attr-defined]
    missing = [part for part in TEMPLATE if not (pkg / part).exists()]
    assert missing == [], f"{pkg.name} lacks {missing}"


def test_identity_has_the_template_layout() -> None:
    pkg = _package_dir("loom_gateway.identity")
    assert [part for part in TEMPLATE if not (pkg / part).exists()] == []


@pytest.mark.parametrize("ep", PLANE_EPS, ids=[e.name for e in PLANE_EPS])
def test_a_planes_consumers_package_holds_a_bus_reader_or_is_absent(ep: object) -> None:
    consumers = _package_dir(ep.value.split(":")[0].rsplit(".", 1)[0]) / CONSUMERS  # type: ignore[attr-defined]
    if consumers.exists():
        readers = [p.name for p in consumers.glob("*.py") if p.name != "__init__.py"]
        assert readers, f"{consumers} is empty: a plane that reads nothing from the bus has no consumers/"


@pytest.mark.parametrize("ep", PLANE_EPS, ids=[e.name for e in PLANE_EPS])
def test_a_planes_service_takes_narrow_parts_not_the_runtime(ep: object) -> None:
    """`service/` is handed the stores, the bus and the settings it uses by `plane.py`, never the
    whole `Runtime` (CONVENTIONS: a plane takes the narrow, typed dependencies it uses)."""
    service = _package_dir(ep.value.split(":")[0].rsplit(".", 1)[0]) / "service"  # type: ignore[attr-defined]
    reaching = [
        str(p.relative_to(service.parent))
        for p in service.rglob("*.py")
        if "loom_core.runtime import Runtime" in p.read_text() or ".runtime." in p.read_text()
    ]
    assert reaching == []


@pytest.mark.parametrize("ep", PLANE_EPS, ids=[e.name for e in PLANE_EPS])
async def test_every_op_of_an_installed_plane_has_a_handler_and_every_handler_an_op(stack: Instance, ep: object) -> None:
    plane = ep.load()(stack.runtime)  # type: ignore[attr-defined]
    served = plane.handlers()
    assert set(served) == {op.name for op in stack.runtime.catalog.for_plane(plane.name)}


async def test_every_identity_op_has_a_handler_and_every_handler_an_op(stack: Instance) -> None:
    runtime: Runtime = stack.runtime
    plane = build_identity(runtime)
    served = plane.handlers()
    assert set(served) == {op.name for op in runtime.catalog.for_plane("identity")}
    for name, fn in served.items():
        assert fn.__name__ == handler_name(runtime.catalog.get(name).method)  # type: ignore[union-attr]


@dataclass
class _Policyish:
    """Handlers for the policy proto with one RPC missing and one method serving nothing."""

    async def set_policy(self, req: Message, ctx: CallContext) -> Message: ...
    async def delete_policy(self, req: Message, ctx: CallContext) -> Message: ...
    async def list_policies(self, req: Message, ctx: CallContext) -> Message: ...
    async def check_policy(self, req: Message, ctx: CallContext) -> Message: ...
    async def list_decisions(self, req: Message, ctx: CallContext) -> Message: ...


class _PolicyComplete(_Policyish):
    async def replay_policy(self, req: Message, ctx: CallContext) -> Message: ...


class _PolicyStray(_PolicyComplete):
    async def set_rule(self, req: Message, ctx: CallContext) -> Message: ...


def test_an_op_without_a_handler_fails_the_binding() -> None:
    with pytest.raises(RuntimeError, match=r"no handler for policy\.replay \(ReplayPolicy -> replay_policy\)"):
        bind_handlers(load_catalog(), "policy", _Policyish())


def test_a_handler_without_an_op_fails_the_binding() -> None:
    with pytest.raises(RuntimeError, match="handler methods serve no op: set_rule"):
        bind_handlers(load_catalog(), "policy", _PolicyStray())
    assert len(bind_handlers(load_catalog(), "policy", _PolicyComplete())) == 6
