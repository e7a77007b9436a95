"""Loom's Python SDK.

    from loom import Agent

    async with Agent(org="acme", namespace="private", agent="admin", api_key=TOKEN) as a:
        me = await a.ops.auth.whoami()          # every op, generated from the catalog
        await a.call("namespace.list")          # any op by name
        await a.tasks.create("bot", kind="chore")  # the spec's plane helpers

Every refusal raises a ``LoomError`` subclass (``AuthError``, ``ForbiddenError``, ...) carrying the
server's stable ``code``; see ``loom._errors`` for the tree.
"""

from ._agent import Agent
from ._errors import (
    AuthError,
    ConflictError,
    FenceStaleError,
    ForbiddenError,
    LockedError,
    LoomError,
    NotFoundError,
    PolicyForbiddenError,
    RateLimitedError,
    TaskTerminalError,
    UnavailableError,
    UnknownOpError,
    ValidationError,
)
from ._ops import DecisionsClient, Ops, PolicyClient
from .tasks import TasksClient

__version__ = "0.1.0"

__all__ = [
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
