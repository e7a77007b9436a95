"""NATS: the embedded server child process, the runtime's broker and connection, declared
streams/buckets/consumers, and KV leases."""

from .layout import AckPolicy, BusLayout, Consumer, KVBucket, describe, ensure_bucket
from .leases import Lease, LeaseHeld, LeaseStore
from .nats import BatchHandler, Bus, Consuming, Listener, MessageHandler, connect_bus, make_broker
from .natsserver import NatsServer

__all__ = [
    "AckPolicy",
    "BatchHandler",
    "Bus",
    "BusLayout",
    "Consumer",
    "Consuming",
    "KVBucket",
    "Lease",
    "LeaseHeld",
    "LeaseStore",
    "Listener",
    "MessageHandler",
    "NatsServer",
    "connect_bus",
    "describe",
    "ensure_bucket",
    "make_broker",
]
