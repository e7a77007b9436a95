"""assistant.ask: proto in, proto out (thin)."""

from __future__ import annotations

from loom_api.assistant.v1 import assistant_pb2 as pb
from loom_core.chain import CallContext

from .service.bridge import Bridge


class AssistantHandlers:
    def __init__(self, bridge: Bridge) -> None:
        self._bridge = bridge

    async def ask(self, req: pb.AskRequest, ctx: CallContext) -> pb.AskResponse:
        labels = {"agent": ctx.agent, "user": ctx.user, "session": ctx.session, "request_id": ctx.request_id}
        # The chain verified the token and ledgers this call (refusals included) on its own row.
        adm = await self._bridge.admit(ctx.token, ctx.namespace, transport=ctx.transport, labels=labels, ledgered=False)
        messages = [{"role": t.role, "content": t.content} for t in req.history] + [{"role": "user", "content": req.question}]
        out = await self._bridge.whole(adm, messages)
        self._bridge.pending_costs[ctx.request_id] = float(adm.extra.get("cost", 0.0))
        choice = (out.get("choices") or [{}])[0]
        return pb.AskResponse(
            text=str((choice.get("message") or {}).get("content") or ""),
            citations=[
                pb.Citation(
                    kind=str(c["kind"]),
                    ref=str(c["ref"]),
                    verified=bool(c["verified"]),
                    reason=str(c.get("reason", "")),
                    anchor=str(c.get("anchor", "")),
                    text=str(c.get("text", "")),
                )
                for c in out["citations"]
            ],
            support=str(out["support"]),
            unknown_names=list(out["unknown_names"]),
            run_id=str(adm.extra.get("run_id", "")),
        )
