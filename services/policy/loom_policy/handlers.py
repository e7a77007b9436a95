"""Handlers for the policy.* ops, one per RPC of policy.proto: proto in, proto out. The use
cases are in service/, the rules in domain/, the SQL in store/."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message
from loom_api.policy.v1 import policy_pb2 as pb
from loom_core.catalog import dataclass_from, dict_to_struct, message_from, struct_to_dict
from loom_core.chain import CallContext

from .domain.timeutil import ch_to_us, us_to_iso
from .service.decisions import DecisionService
from .service.evaluation import CheckRequest, EvaluationService, ReplayRequest
from .service.rules import RuleService
from .settings import PolicySettings
from .store.rules import RuleRow, RuleSpec

M = TypeVar("M", bound=Message)


def _rule_msg(row: RuleRow, broken_reason: str = "") -> pb.Rule:
    updated = row["updated_at"]
    return pb.Rule(
        name=row["name"],
        effect=row["effect"],
        actions=list(row["actions"]),
        condition=dict_to_struct(json.loads(row["condition"])),
        description=row["description"],
        mode=row["mode"],
        leaf_count=int(row["leaf_count"]),
        updated_by=row["updated_by"],
        updated_time=us_to_iso(ch_to_us(updated) if updated else 0),
        broken=bool(broken_reason),
        broken_reason=broken_reason,
    )


def _spec(spec: pb.SetPolicyRequest | pb.RuleSpec) -> RuleSpec:
    return RuleSpec(
        name=spec.name,
        effect=spec.effect,
        actions=list(spec.actions),
        condition=struct_to_dict(spec.condition) if spec.HasField("condition") else None,
        description=spec.description,
        mode=spec.mode,
    )


def _parsed(msg_cls: type[M], body: dict[str, Any]) -> M:
    """A message from a service's JSON answer (the message's JSON shape)."""
    msg = msg_cls()
    json_format.ParseDict(body, msg)
    return msg


@dataclass(eq=False, slots=True)
class PolicyHandlers:
    rules: RuleService
    evaluation: EvaluationService
    decisions: DecisionService
    settings: PolicySettings

    async def set_policy(self, req: pb.SetPolicyRequest, ctx: CallContext) -> pb.SetPolicyResponse:
        out = await self.rules.set(ctx, _spec(req))
        return message_from(pb.SetPolicyResponse, out, rule=_rule_msg(out.row))

    async def delete_policy(self, req: pb.DeletePolicyRequest, ctx: CallContext) -> pb.DeletePolicyResponse:
        await self.rules.delete(ctx, req.name)
        return pb.DeletePolicyResponse(deleted=True, widened=True)

    async def list_policies(self, req: pb.ListPoliciesRequest, ctx: CallContext) -> pb.ListPoliciesResponse:
        rows = await self.rules.live(ctx.org, ctx.namespace)
        s = self.settings
        return pb.ListPoliciesResponse(
            rules=[_rule_msg(r, r["broken_reason"]) for r in rows],
            mode=s.policy_mode,
            max_window_seconds=s.policy_max_window_seconds,
            cache_ttl_seconds=s.policy_cache_ttl_seconds,
        )

    async def check_policy(self, req: pb.CheckPolicyRequest, ctx: CallContext) -> pb.CheckPolicyResponse:
        verdict = await self.evaluation.check(ctx, dataclass_from(CheckRequest, req, rules=[_spec(r) for r in req.rules]))
        return _parsed(pb.CheckPolicyResponse, verdict)

    async def list_decisions(self, req: pb.ListDecisionsRequest, ctx: CallContext) -> pb.ListDecisionsResponse:
        rows = await self.decisions.list(ctx, req)
        return pb.ListDecisionsResponse(decisions=[_parsed(pb.Decision, r) for r in rows])

    async def replay_policy(self, req: pb.ReplayPolicyRequest, ctx: CallContext) -> pb.ReplayPolicyResponse:
        body = await self.evaluation.replay(ctx, dataclass_from(ReplayRequest, req, rules=[_spec(r) for r in req.rules]))
        return _parsed(pb.ReplayPolicyResponse, body)
