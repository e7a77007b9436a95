"""Gateway test fixtures: stubs generated from `proto/` alone, as a client in another repo makes them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def generated_stubs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Python stubs from the .proto files alone, as a client in another repo would make them."""
    out = tmp_path_factory.mktemp("stubs")
    protos = sorted(str(p.relative_to(ROOT / "proto")) for p in (ROOT / "proto").rglob("*.proto"))
    subprocess.run(
        [sys.executable, "-m", "grpc_tools.protoc", "-I", str(ROOT / "proto"), f"--python_out={out}", f"--grpc_python_out={out}", *protos],
        check=True,
    )
    for directory in [out / "loom_api", *(p for p in (out / "loom_api").rglob("*") if p.is_dir())]:
        (directory / "__init__.py").touch()
    return out
