# example-needs: the identity plane's gRPC address (`loom up` prints each plane's; LOOM_GRPC_PORT_BASE=7000 fixes them)
"""auth.whoami over gRPC with the generated stubs: `.venv/bin/python examples/doors/grpc_whoami.py`."""

import asyncio
import os

import grpc
from loom_api.identity.v1 import identity_pb2, identity_pb2_grpc


async def main() -> None:
    async with grpc.aio.insecure_channel("127.0.0.1:7000") as channel:
        stub = identity_pb2_grpc.IdentityServiceStub(channel)
        me = await stub.WhoAmI(identity_pb2.WhoAmIRequest(), metadata=[("authorization", f"Bearer {os.environ['LOOM_TOKEN']}")])
        print(me)


asyncio.run(main())
