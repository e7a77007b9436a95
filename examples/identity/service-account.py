"""A service account, a token for it, and revoking that token: `.venv/bin/python examples/identity/service-account.py`."""

import asyncio

from loom import Agent


async def main() -> None:
    async with Agent.from_env("admin") as admin:
        await admin.ops.sa.create(name="coder", role="writer", description="works the coder inbox")
        minted = await admin.ops.token.mint(subject="sa:coder", roles={admin.namespace: "writer"}, ttl_seconds=3600)
        print(minted["subject"], minted["expires_time"])  # sa:coder ...
        coder_token = minted["token"]

    async with Agent.from_env("coder", api_key=coder_token) as coder:
        me = await coder.ops.auth.whoami()
        print(me["subject"], me["role"])  # sa:coder writer
        token_id = me["token_id"]

    async with Agent.from_env("admin") as admin:
        await admin.ops.token.revoke(token_id=token_id, reason="example done")


asyncio.run(main())
