"""Generate Python protobuf and gRPC code for every .proto under proto/ (DO NOT EDIT the output).

Run by the install step (./loom); the generated *_pb2*.py files and their typed stubs (*.pyi,
from mypy-protobuf's protoc plugins, which mypy --strict reads) sit beside their .proto files and
are not committed.
"""

from __future__ import annotations

import sys
from pathlib import Path

import grpc_tools
from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent / "proto"


def main() -> int:
    protos = sorted(str(p.relative_to(ROOT)) for p in ROOT.rglob("*.proto"))
    include = str(Path(grpc_tools.__file__).parent / "_proto")
    # mypy-protobuf's plugins, installed beside this interpreter (requirements.lock).
    bin_dir = Path(sys.executable).parent
    args = [
        "protoc",
        f"-I{ROOT}",
        f"-I{include}",
        f"--python_out={ROOT}",
        f"--grpc_python_out={ROOT}",
        f"--plugin=protoc-gen-mypy={bin_dir / 'protoc-gen-mypy'}",
        f"--plugin=protoc-gen-mypy_grpc={bin_dir / 'protoc-gen-mypy_grpc'}",
        f"--mypy_out={ROOT}",
        f"--mypy_grpc_out={ROOT}",
        *protos,
    ]
    code = protoc.main(args)
    if code != 0:
        return int(code)
    for proto in protos:
        for parent in (ROOT / proto).parents:
            if parent == ROOT:
                break
            (parent / "__init__.py").touch()
    return 0


if __name__ == "__main__":
    sys.exit(main())
