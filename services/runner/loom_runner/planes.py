"""Plane discovery: each plane package declares `[project.entry-points."loom.planes"]`
name = "pkg.module:build", where build(runtime) returns a Plane. The identity plane is the
gateway's own."""

from __future__ import annotations

from importlib.metadata import entry_points

from loom_core.runtime import Plane, Runtime
from loom_gateway.identity import IdentityPlane


def build_planes(runtime: Runtime) -> list[Plane]:
    planes: list[Plane] = [IdentityPlane(runtime)]
    for ep in sorted(entry_points(group="loom.planes"), key=lambda e: e.name):
        planes.append(ep.load()(runtime))
    return planes
