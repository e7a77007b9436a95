"""Every generated loom_api message module (`*_pb2`), imported. The op catalog reads their
services from it, and scripts/gen_converters.py their messages: a module outside the catalog
package, so the generator imports it without importing the converters it renders."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import loom_api


def api_modules() -> list[ModuleType]:
    return [
        importlib.import_module(info.name) for info in pkgutil.walk_packages(loom_api.__path__, "loom_api.") if info.name.endswith("_pb2")
    ]
