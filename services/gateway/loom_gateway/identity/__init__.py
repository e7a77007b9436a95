"""The identity ops (auth.*, namespace.*, grants.*, sa.*, token.*), served by the gateway process."""

from .plane import IdentityPlane, build
from .service.tokens import bootstrap_org

__all__ = ["IdentityPlane", "bootstrap_org", "build"]
