"""Runs Loom: every plane in one process (embedded) or one plane per process (cluster)."""

import os

# gRPC's transport on the legacy iomgr TCP endpoints rather than the EventEngine ones grpcio
# turns on by default: an empty unary grpc.aio call costs ~20% less CPU on each side with them
# (bench/cluster.py's floor row; docs/benchmarks.md "Cluster mode"), the gateway -> plane hop
# most of all. grpc core reads the variable once, when grpc is first imported: so here, before
# any module of this package imports it. An operator's own GRPC_EXPERIMENTS wins.
GRPC_EXPERIMENTS = "-event_engine_client,-event_engine_listener,-event_engine_for_all_other_endpoints"
os.environ.setdefault("GRPC_EXPERIMENTS", GRPC_EXPERIMENTS)
