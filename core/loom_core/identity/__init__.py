"""Identity: tokens, delegation, grants, revocation, and the per-call authenticator."""

from .authenticator import Authenticator
from .tokens import Principal, TokenCodec

__all__ = ["Authenticator", "Principal", "TokenCodec"]
