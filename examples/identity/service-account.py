"""A service account, a token for it, and revoking that token: `.venv/bin/python examples/identity/service-account.py`."""

import asyncio
import os

from loom import Agent

ORG = os.environ.get("LOOM_ORG", "acme")
NAMESPACE = os.environ.get("LOOM_NAMESPACE", "private")
TOKEN = os.environ["LOOM_TOKEN"]


async def main() -> None:
    async with Agent(org=ORG, namespace=NAMESPACE, agent="admin", api_key=TOKEN) as admin:
        await admin.ops.sa.create(name="coder", role="writer", description="works the coder inbox")
        minted = await admin.ops.token.mint(subject="sa:coder", roles={NAMESPACE: "writer"}, ttl_seconds=3600)
        print(minted["subject"], minted["expires_time"])  # sa:coder ...
        coder_token = minted["token"]

    async with Agent(org=ORG, namespace=NAMESPACE, agent="coder", api_key=coder_token) as coder:
        me = await coder.ops.auth.whoami()
        print(me["subject"], me["role"])  # sa:coder writer
        token_id = me["token_id"]

    async with Agent(org=ORG, namespace=NAMESPACE, agent="admin", api_key=TOKEN) as admin:
        await admin.ops.token.revoke(token_id=token_id, reason="example done")


asyncio.run(main())
