"""The SDK's public surface is exactly this list (the httpx habit): changing it is a decision."""

from __future__ import annotations

import inspect
import subprocess
import sys
import types
from pathlib import Path

import loom

EXPECTED = [
    "Agent",
    "AuthError",
    "ConflictError",
    "DecisionsClient",
    "FenceStaleError",
    "ForbiddenError",
    "LockedError",
    "LoomError",
    "NotFoundError",
    "Ops",
    "PolicyClient",
    "PolicyForbiddenError",
    "RateLimitedError",
    "TaskTerminalError",
    "TasksClient",
    "UnavailableError",
    "UnknownOpError",
    "ValidationError",
    "__version__",
]


def test_all_is_the_pinned_sorted_list() -> None:
    assert loom.__all__ == EXPECTED
    assert loom.__all__ == sorted(loom.__all__)


def test_every_public_name_of_the_package_is_in_all() -> None:
    # Submodules (loom.tasks, loom.policy) are attributes of the package once imported; they
    # are reached by path, not exported names.
    public = sorted(name for name, value in vars(loom).items() if not name.startswith("_") and not isinstance(value, types.ModuleType))
    assert public == [n for n in loom.__all__ if not n.startswith("_")]


def test_every_exported_symbol_and_public_method_has_a_docstring() -> None:
    missing = []
    for name in loom.__all__:
        obj = getattr(loom, name)
        if not inspect.isclass(obj):
            continue
        if not inspect.getdoc(obj):
            missing.append(name)
        for attr, member in vars(obj).items():
            if attr.startswith("_") and attr not in ("__aenter__", "__aexit__"):
                continue
            if (callable(member) or isinstance(member, property)) and not inspect.getdoc(member):
                missing.append(f"{name}.{attr}")
    assert missing == []


def test_generated_op_methods_have_docstrings() -> None:
    ops = loom.Ops(caller=None)  # type: ignore[arg-type]
    groups = dict(vars(ops))
    assert groups, "the catalog has ops"
    for group_name, group in groups.items():
        assert inspect.getdoc(type(group)), group_name
        for attr, member in vars(type(group)).items():
            if not attr.startswith("_"):
                assert inspect.getdoc(member), f"{group_name}.{attr}"


def test_package_imports_without_server_dependencies() -> None:
    # The SDK ships with httpx only: no loom_core, grpc or protobuf at runtime.
    code = (
        "import sys, loom\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('loom_core', 'loom_api', 'grpc', 'google'))\n"
        "assert not bad, bad\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_package_is_typed() -> None:
    assert loom.__file__ is not None
    assert (Path(loom.__file__).parent / "py.typed").is_file()
