"""The interceptor chain every op passes, whichever door it came in by."""

from .context import CallContext, bearer_token, current_call, http_transport
from .gate import GateCall, NoopGate, PolicyGate
from .interceptor import OpChainInterceptor
from .ledger import Ledger

__all__ = [
    "CallContext",
    "GateCall",
    "Ledger",
    "NoopGate",
    "OpChainInterceptor",
    "PolicyGate",
    "bearer_token",
    "current_call",
    "http_transport",
]
