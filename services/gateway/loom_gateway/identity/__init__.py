"""The identity ops (auth.*, namespace.*, grants.*, sa.*, token.*), served by the gateway process."""

from .plane import IdentityPlane, bootstrap_org

__all__ = ["IdentityPlane", "bootstrap_org"]
