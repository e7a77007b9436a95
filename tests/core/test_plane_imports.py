"""Planes are composed through entry points: no service package imports another's (the runner,
which composes them, imports no plane; a plane's own commands reach the CLI through `loom.commands`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.pyast import parse_file

SERVICES = Path(__file__).resolve().parents[2] / "services"
# The runner builds the gateway (the HTTP door, not a plane) around the planes it finds by entry point.
ALLOWED = {"loom_runner": {"loom_gateway"}}
PACKAGES = {p.name: p for d in SERVICES.iterdir() for p in d.glob("loom_*") if p.is_dir() and (p / "__init__.py").exists()}


def imported_packages(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(parse_file(path)):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("package", sorted(PACKAGES))
def test_a_service_package_imports_no_other_service_package(package: str) -> None:
    others = set(PACKAGES) - {package} - ALLOWED.get(package, set())
    offending = {
        f"{path.relative_to(SERVICES)}: {name}" for path in PACKAGES[package].rglob("*.py") for name in imported_packages(path) & others
    }
    assert not offending, sorted(offending)


def test_the_runner_composes_the_gateway_from_its_public_surface_alone() -> None:
    """The runner names what it composes a process from (`loom_gateway.__all__`), never a
    gateway module by its path, so the gateway's inside can move without the runner knowing."""
    import loom_gateway

    offending: set[str] = set()
    for path in PACKAGES["loom_runner"].rglob("*.py"):
        for node in ast.walk(parse_file(path)):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("loom_gateway."):
                offending.add(f"{path.name}: from {node.module}")
            elif isinstance(node, ast.ImportFrom) and node.module == "loom_gateway":
                offending |= {f"{path.name}: {a.name} (not exported)" for a in node.names if a.name not in loom_gateway.__all__}
            elif isinstance(node, ast.Import):
                offending |= {f"{path.name}: import {a.name}" for a in node.names if a.name.startswith("loom_gateway.")}
    assert not offending, sorted(offending)
    for name in loom_gateway.__all__:
        assert getattr(loom_gateway, name) is not None
