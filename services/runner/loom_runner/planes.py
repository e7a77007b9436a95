"""Plane discovery: each plane package declares `[project.entry-points."loom.planes"]`
name = "pkg.module:build", where build(runtime) returns a Plane. The identity plane is the
gateway's own."""

from __future__ import annotations

from importlib.metadata import entry_points

from loom_core.runtime import Plane, Runtime
from loom_gateway import IdentityPlane, build_identity


def build_planes(runtime: Runtime, only: set[str] | None = None) -> list[Plane]:
    """Every installed plane, or those named in `only` (a process serving a few planes does not
    import or build the others)."""
    planes: list[Plane] = [build_identity(runtime)] if only is None or IdentityPlane.name in only else []
    for ep in sorted(entry_points(group="loom.planes"), key=lambda e: e.name):
        if only is not None and ep.name not in only:
            continue
        planes.append(ep.load()(runtime))
    return planes


async def start_gate(runtime: Runtime) -> None:
    """The history-policy gate from the `loom.gate` entry point (`build_gate(runtime)`), set as
    `runtime.gate` and started. Without one the runtime keeps its no-op gate."""
    for ep in sorted(entry_points(group="loom.gate"), key=lambda e: e.name):
        gate = ep.load()(runtime)
        start = getattr(gate, "start", None)
        if start is not None:
            await start()
        runtime.gate = gate


async def stop_gate(runtime: Runtime) -> None:
    stop = getattr(runtime.gate, "stop", None)
    if stop is not None:
        await stop()
