"""NATS: the embedded server child process, the connection, and KV leases."""

from .leases import Lease, LeaseHeld, LeaseStore
from .nats import Bus, connect_bus
from .natsserver import NatsServer

__all__ = ["Bus", "Lease", "LeaseHeld", "LeaseStore", "NatsServer", "connect_bus"]
