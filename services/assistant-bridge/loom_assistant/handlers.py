"""The assistant plane's ops: proto in, proto out (thin)."""

from __future__ import annotations

from loom_api.assistant.v1 import assistant_pb2 as pb
from loom_core.chain import CallContext

from .service.bridge import Bridge
from .service.controls import Budget, Controls


def _budget(b: Budget) -> pb.BudgetResponse:
    return pb.BudgetResponse(
        namespace=b.namespace,
        daily_cost_cap_usd=b.cap_usd,
        is_default=b.is_default,
        assistant_share=b.share,
        assistant_spent_today_usd=round(b.spent_usd, 6),
    )


class AssistantHandlers:
    def __init__(self, bridge: Bridge, controls: Controls) -> None:
        self._bridge = bridge
        self._controls = controls

    async def ask(self, req: pb.AskRequest, ctx: CallContext) -> pb.AskResponse:
        # The chain verified the token and ledgers this call (refusals included) on its own row,
        # which the bridge stamps with the answer's spend and run.
        adm = await self._bridge.admit(ctx)
        messages = [{"role": t.role, "content": t.content} for t in req.history] + [{"role": "user", "content": req.question}]
        out = await self._bridge.whole(adm, messages)
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
            run_id=adm.run_id,
        )

    async def set_model_calls(self, req: pb.SetModelCallsRequest, ctx: CallContext) -> pb.ModelCallsResponse:
        org, enabled = await self._controls.set_model_calls(ctx.principal, org=req.org, enabled=req.enabled)
        return pb.ModelCallsResponse(org=org, enabled=enabled)

    async def get_model_calls(self, req: pb.GetModelCallsRequest, ctx: CallContext) -> pb.ModelCallsResponse:
        org, enabled = await self._controls.model_calls(ctx.principal, org=req.org)
        return pb.ModelCallsResponse(org=org, enabled=enabled)

    async def set_budget(self, req: pb.SetBudgetRequest, ctx: CallContext) -> pb.BudgetResponse:
        cap = req.daily_cost_cap_usd if req.HasField("daily_cost_cap_usd") else None
        return _budget(await self._controls.set_budget(ctx.principal, ctx.namespace, cap))

    async def get_budget(self, req: pb.GetBudgetRequest, ctx: CallContext) -> pb.BudgetResponse:
        return _budget(await self._controls.budget(ctx.principal, ctx.namespace))
