"""JetStream replicas on a NATS cluster (LOOM_NATS_REPLICAS).

Every stream and KV bucket Loom declares (the ledger, task events, task state, leases, …) goes
through `add_stream`, `update_stream` or `create_key_value` of the bus's JetStream context, and
none names a replica count. On a 3-node NATS cluster they must hold three copies, so that losing
one node loses no write and stops no flow (a JetStream write is acknowledged once a quorum, two
of three, has it). `BusJetStream` is that context with the deployment's replica count as
the default: a declaration that asks for one replica (nats-py's default) gets the deployment's
count instead. Consumers are left alone: a durable consumer takes its stream's replicas, and an
ephemeral cursor keeps the one it asks for.

`BusJetStream` is the bus's context on one node too (one replica then): it keeps the connection,
the API prefix and the timeout it was made with as public attributes, for the requests Loom
sends itself (`bus/kv.py`'s direct gets and compare-and-set writes go through `bus/jspublish.py`).
"""

from __future__ import annotations

from typing import Any

from nats.aio.client import Client
from nats.js import JetStreamContext, api
from nats.js.kv import KeyValue


class BusJetStream(JetStreamContext):
    def __init__(self, nc: Client, replicas: int = 1, *, prefix: str = api.DEFAULT_PREFIX, timeout: float = 5.0) -> None:
        super().__init__(nc, prefix=prefix, timeout=timeout)
        if replicas < 1:
            raise ValueError("LOOM_NATS_REPLICAS must be 1 or more")
        self.replicas = replicas
        self.nc = nc
        self.api_prefix = prefix
        self.timeout = timeout

    def replicated(self, config: api.StreamConfig | None, params: dict[str, Any]) -> api.StreamConfig:
        config = (config or api.StreamConfig()).evolve(**params)
        if not config.num_replicas or config.num_replicas == 1:
            config = config.evolve(num_replicas=self.replicas)
        return config

    async def add_stream(self, config: api.StreamConfig | None = None, **params: Any) -> api.StreamInfo:
        return await super().add_stream(self.replicated(config, params))

    async def update_stream(self, config: api.StreamConfig | None = None, **params: Any) -> api.StreamInfo:
        return await super().update_stream(self.replicated(config, params))

    async def create_key_value(self, config: api.KeyValueConfig | None = None, **params: Any) -> KeyValue:
        if config is None:
            config = api.KeyValueConfig(bucket=params["bucket"])
        config = config.evolve(**params)
        if not config.replicas or config.replicas == 1:
            config = config.evolve(replicas=self.replicas)
        return await super().create_key_value(config)


def jetstream(nc: Client, replicas: int, timeout: float) -> BusJetStream:
    """The bus's JetStream context: one replica on one node, LOOM_NATS_REPLICAS on a cluster;
    its requests wait `timeout` seconds for an answer (LOOM_NATS_REQUEST_TIMEOUT_SECONDS)."""
    return BusJetStream(nc, replicas, timeout=timeout)
