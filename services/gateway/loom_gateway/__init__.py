"""The gateway: the only HTTP surface. It translates and relays to the planes over gRPC.

What the runner composes a process from is exported here, and only here (the runner imports no
gateway module by its path: tests/core/test_plane_imports.py). Loaded on first use, so a CLI
command that needs one name does not import the HTTP app."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .errors import error_response
    from .identity import IdentityPlane, bootstrap_org
    from .identity import build as build_identity
    from .login_links import login_url
    from .relay import Relay
    from .sessions import issue_login_code, open_sessions
    from .settings import GatewaySettings

# name -> (module, attribute)
_EXPORTS = {
    "GatewaySettings": (".settings", "GatewaySettings"),
    "IdentityPlane": (".identity", "IdentityPlane"),
    "Relay": (".relay", "Relay"),
    "bootstrap_org": (".identity", "bootstrap_org"),
    "build_identity": (".identity", "build"),
    "create_app": (".app", "create_app"),
    "error_response": (".errors", "error_response"),
    "issue_login_code": (".sessions", "issue_login_code"),
    "login_url": (".login_links", "login_url"),
    "open_sessions": (".sessions", "open_sessions"),
}

__all__ = [
    "GatewaySettings",
    "IdentityPlane",
    "Relay",
    "bootstrap_org",
    "build_identity",
    "create_app",
    "error_response",
    "issue_login_code",
    "login_url",
    "open_sessions",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _EXPORTS[name]
    return getattr(importlib.import_module(module, __name__), attr)
