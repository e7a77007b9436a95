"""Every loom_api message's JSON converters (DO NOT EDIT: rendered from the proto descriptors by
scripts/gen_converters.py; `--check` says when it is stale).

`<message>_json(msg)`: loom_core.catalog.message_to_json's JSON of that message type;
`<message>_sparse(msg)`: message_to_sparse_json's. JSON and SPARSE map each message class to
its converter.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

from google.protobuf.message import Message
from loom_api.assistant.v1 import assistant_pb2
from loom_api.decisions.v1 import code_pb2, decisions_pb2, memory_pb2, search_pb2
from loom_api.help.v1 import help_pb2
from loom_api.identity.v1 import identity_pb2
from loom_api.insights.v1 import insights_pb2
from loom_api.options.v1 import options_pb2
from loom_api.policy.v1 import policy_pb2
from loom_api.relay.v1 import relay_pb2
from loom_api.tasks.v1 import tasks_pb2

from .json_values import double_json, struct_to_dict, well_known_json
from .timestamps import rfc3339

_E_options_v1_Role = {0: "ROLE_UNSPECIFIED", 1: "ROLE_VIEWER", 2: "ROLE_WRITER", 3: "ROLE_ADMIN"}


def assistant_v1_AskRequest_json(msg: assistant_pb2.AskRequest) -> dict[str, Any]:
    return {"question": msg.question, "history": [assistant_v1_Turn_json(x) for x in msg.history]}


def assistant_v1_AskRequest_sparse(msg: assistant_pb2.AskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_question := msg.question:
        out["question"] = v_question
    if v_history := msg.history:
        out["history"] = [assistant_v1_Turn_sparse(x) for x in v_history]
    return out


def assistant_v1_AskResponse_json(msg: assistant_pb2.AskResponse) -> dict[str, Any]:
    return {
        "text": msg.text,
        "citations": [assistant_v1_Citation_json(x) for x in msg.citations],
        "support": msg.support,
        "unknown_names": list(msg.unknown_names),
        "run_id": msg.run_id,
    }


def assistant_v1_BudgetResponse_json(msg: assistant_pb2.BudgetResponse) -> dict[str, Any]:
    return {
        "namespace": msg.namespace,
        "daily_cost_cap_usd": double_json(msg.daily_cost_cap_usd),
        "is_default": msg.is_default,
        "assistant_share": double_json(msg.assistant_share),
        "assistant_spent_today_usd": double_json(msg.assistant_spent_today_usd),
    }


def assistant_v1_Citation_json(msg: assistant_pb2.Citation) -> dict[str, Any]:
    return {"kind": msg.kind, "ref": msg.ref, "verified": msg.verified, "reason": msg.reason, "anchor": msg.anchor, "text": msg.text}


def assistant_v1_GetBudgetRequest_json(msg: assistant_pb2.GetBudgetRequest) -> dict[str, Any]:
    return {}


def assistant_v1_GetBudgetRequest_sparse(msg: assistant_pb2.GetBudgetRequest) -> dict[str, Any]:
    return {}


def assistant_v1_GetModelCallsRequest_json(msg: assistant_pb2.GetModelCallsRequest) -> dict[str, Any]:
    return {"org": msg.org}


def assistant_v1_GetModelCallsRequest_sparse(msg: assistant_pb2.GetModelCallsRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_org := msg.org:
        out["org"] = v_org
    return out


def assistant_v1_ModelCallsResponse_json(msg: assistant_pb2.ModelCallsResponse) -> dict[str, Any]:
    return {"org": msg.org, "enabled": msg.enabled}


def assistant_v1_SetBudgetRequest_json(msg: assistant_pb2.SetBudgetRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("daily_cost_cap_usd"):
        out["daily_cost_cap_usd"] = double_json(msg.daily_cost_cap_usd)
    return out


def assistant_v1_SetBudgetRequest_sparse(msg: assistant_pb2.SetBudgetRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("daily_cost_cap_usd"):
        out["daily_cost_cap_usd"] = double_json(msg.daily_cost_cap_usd)
    return out


def assistant_v1_SetModelCallsRequest_json(msg: assistant_pb2.SetModelCallsRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("enabled"):
        out["enabled"] = msg.enabled
    out["org"] = msg.org
    return out


def assistant_v1_SetModelCallsRequest_sparse(msg: assistant_pb2.SetModelCallsRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("enabled"):
        out["enabled"] = msg.enabled
    if v_org := msg.org:
        out["org"] = v_org
    return out


def assistant_v1_Turn_json(msg: assistant_pb2.Turn) -> dict[str, Any]:
    return {"role": msg.role, "content": msg.content}


def assistant_v1_Turn_sparse(msg: assistant_pb2.Turn) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_role := msg.role:
        out["role"] = v_role
    if v_content := msg.content:
        out["content"] = v_content
    return out


def decisions_v1_ActionResult_json(msg: memory_pb2.ActionResult) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "action": msg.action,
        "ok": msg.ok,
        "version": msg.version,
        "error_code": msg.error_code,
        "error": msg.error,
        "retired_record": msg.retired_record,
    }


def decisions_v1_ApplyMemoryRequest_json(msg: memory_pb2.ApplyMemoryRequest) -> dict[str, Any]:
    return {"actions": [decisions_v1_MemoryAction_json(x) for x in msg.actions]}


def decisions_v1_ApplyMemoryRequest_sparse(msg: memory_pb2.ApplyMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_actions := msg.actions:
        out["actions"] = [decisions_v1_MemoryAction_sparse(x) for x in v_actions]
    return out


def decisions_v1_ApplyMemoryResponse_json(msg: memory_pb2.ApplyMemoryResponse) -> dict[str, Any]:
    return {"results": [decisions_v1_ActionResult_json(x) for x in msg.results]}


def decisions_v1_AutoSupersedeRequest_json(msg: memory_pb2.AutoSupersedeRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "by_key": msg.by_key}


def decisions_v1_AutoSupersedeRequest_sparse(msg: memory_pb2.AutoSupersedeRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_by_key := msg.by_key:
        out["by_key"] = v_by_key
    return out


def decisions_v1_AutoSupersedeResponse_json(msg: memory_pb2.AutoSupersedeResponse) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "by_key": msg.by_key,
        "version": msg.version,
        "retired_record": msg.retired_record,
        "similarity": double_json(msg.similarity),
    }


def decisions_v1_CalibrationBin_json(msg: decisions_pb2.CalibrationBin) -> dict[str, Any]:
    return {
        "lower": double_json(msg.lower),
        "upper": double_json(msg.upper),
        "count": msg.count,
        "mean_confidence": double_json(msg.mean_confidence),
        "success_rate": double_json(msg.success_rate),
    }


def decisions_v1_CalibrationRow_json(msg: decisions_pb2.CalibrationRow) -> dict[str, Any]:
    return {
        "agent": msg.agent,
        "category": msg.category,
        "count": msg.count,
        "successes": msg.successes,
        "mean_confidence": double_json(msg.mean_confidence),
        "success_rate": double_json(msg.success_rate),
        "brier": double_json(msg.brier),
        "overconfidence": double_json(msg.overconfidence),
        "bins": [decisions_v1_CalibrationBin_json(x) for x in msg.bins],
    }


def decisions_v1_ChainEdge_json(msg: decisions_pb2.ChainEdge) -> dict[str, Any]:
    return {"from_key": msg.from_key, "to_key": msg.to_key, "kind": msg.kind}


def decisions_v1_ChainNode_json(msg: decisions_pb2.ChainNode) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "hops": msg.hops,
        "stage": msg.stage,
        "is_decision": msg.is_decision,
        "category": msg.category,
        "scenario": msg.scenario,
        "outcome": msg.outcome,
        "realized_outcome": msg.realized_outcome,
    }


def decisions_v1_ClearMemoryRequest_json(msg: memory_pb2.ClearMemoryRequest) -> dict[str, Any]:
    return {"prefix": msg.prefix, "memory_type": msg.memory_type}


def decisions_v1_ClearMemoryRequest_sparse(msg: memory_pb2.ClearMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_prefix := msg.prefix:
        out["prefix"] = v_prefix
    if v_memory_type := msg.memory_type:
        out["memory_type"] = v_memory_type
    return out


def decisions_v1_ClearMemoryResponse_json(msg: memory_pb2.ClearMemoryResponse) -> dict[str, Any]:
    return {"cleared": msg.cleared, "locked": list(msg.locked)}


def decisions_v1_CodeReposRequest_json(msg: code_pb2.CodeReposRequest) -> dict[str, Any]:
    return {"remote": msg.remote}


def decisions_v1_CodeReposRequest_sparse(msg: code_pb2.CodeReposRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_remote := msg.remote:
        out["remote"] = v_remote
    return out


def decisions_v1_CodeReposResponse_json(msg: code_pb2.CodeReposResponse) -> dict[str, Any]:
    return {"repositories": [decisions_v1_Repository_json(x) for x in msg.repositories]}


def decisions_v1_CodeSymbolDefinition_json(msg: code_pb2.CodeSymbolDefinition) -> dict[str, Any]:
    return {
        "path": msg.path,
        "line": msg.line,
        "kind": msg.kind,
        "name": msg.name,
        "qualname": msg.qualname,
        "test": msg.test,
        "page": msg.page,
    }


def decisions_v1_CodeSymbolRequest_json(msg: code_pb2.CodeSymbolRequest) -> dict[str, Any]:
    return {"name": msg.name}


def decisions_v1_CodeSymbolRequest_sparse(msg: code_pb2.CodeSymbolRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_name := msg.name:
        out["name"] = v_name
    return out


def decisions_v1_CodeSymbolResponse_json(msg: code_pb2.CodeSymbolResponse) -> dict[str, Any]:
    return {
        "symbols": [decisions_v1_CodeSymbolDefinition_json(x) for x in msg.symbols],
        "files": list(msg.files),
        "only_tests_or_pages": msg.only_tests_or_pages,
    }


def decisions_v1_ContextPackRequest_json(msg: memory_pb2.ContextPackRequest) -> dict[str, Any]:
    return {"query": msg.query, "token_budget": msg.token_budget, "category": msg.category}


def decisions_v1_ContextPackRequest_sparse(msg: memory_pb2.ContextPackRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_query := msg.query:
        out["query"] = v_query
    if v_token_budget := msg.token_budget:
        out["token_budget"] = v_token_budget
    if v_category := msg.category:
        out["category"] = v_category
    return out


def decisions_v1_ContextPackResponse_json(msg: memory_pb2.ContextPackResponse) -> dict[str, Any]:
    return {
        "block": msg.block,
        "tokens": msg.tokens,
        "token_budget": msg.token_budget,
        "decisions": [decisions_v1_PackedDecision_json(x) for x in msg.decisions],
        "omitted": msg.omitted,
    }


def decisions_v1_DecisionCalibrationRequest_json(msg: decisions_pb2.DecisionCalibrationRequest) -> dict[str, Any]:
    return {"window_days": msg.window_days, "agent": msg.agent, "category": msg.category}


def decisions_v1_DecisionCalibrationRequest_sparse(msg: decisions_pb2.DecisionCalibrationRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_window_days := msg.window_days:
        out["window_days"] = v_window_days
    if v_agent := msg.agent:
        out["agent"] = v_agent
    if v_category := msg.category:
        out["category"] = v_category
    return out


def decisions_v1_DecisionCalibrationResponse_json(msg: decisions_pb2.DecisionCalibrationResponse) -> dict[str, Any]:
    return {"rows": [decisions_v1_CalibrationRow_json(x) for x in msg.rows], "window_days": msg.window_days, "unscored": msg.unscored}


def decisions_v1_DecisionChainRequest_json(msg: decisions_pb2.DecisionChainRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "direction": msg.direction, "max_hops": msg.max_hops}


def decisions_v1_DecisionChainRequest_sparse(msg: decisions_pb2.DecisionChainRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_direction := msg.direction:
        out["direction"] = v_direction
    if v_max_hops := msg.max_hops:
        out["max_hops"] = v_max_hops
    return out


def decisions_v1_DecisionChainResponse_json(msg: decisions_pb2.DecisionChainResponse) -> dict[str, Any]:
    return {"nodes": [decisions_v1_ChainNode_json(x) for x in msg.nodes], "edges": [decisions_v1_ChainEdge_json(x) for x in msg.edges]}


def decisions_v1_DecisionItemError_json(msg: decisions_pb2.DecisionItemError) -> dict[str, Any]:
    return {"code": msg.code, "message": msg.message, "http_status": msg.http_status}


def decisions_v1_DecisionOutcomeRequest_json(msg: decisions_pb2.DecisionOutcomeRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"memory_key": msg.memory_key, "realized_outcome": msg.realized_outcome}
    if msg.HasField("success"):
        out["success"] = msg.success
    return out


def decisions_v1_DecisionOutcomeRequest_sparse(msg: decisions_pb2.DecisionOutcomeRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_realized_outcome := msg.realized_outcome:
        out["realized_outcome"] = v_realized_outcome
    if msg.HasField("success"):
        out["success"] = msg.success
    return out


def decisions_v1_DecisionOutcomeResponse_json(msg: decisions_pb2.DecisionOutcomeResponse) -> dict[str, Any]:
    out: dict[str, Any] = {"memory_key": msg.memory_key, "realized_outcome": msg.realized_outcome}
    if msg.HasField("success"):
        out["success"] = msg.success
    out["stage"] = msg.stage
    out["statement"] = msg.statement
    out["version"] = msg.version
    out["credited"] = list(msg.credited)
    out["charged"] = list(msg.charged)
    out["restated"] = msg.restated
    out["uncredited"] = list(msg.uncredited)
    return out


def decisions_v1_DecisionPrecedentsRequest_json(msg: decisions_pb2.DecisionPrecedentsRequest) -> dict[str, Any]:
    return {"query": msg.query, "category": msg.category, "with_outcome_only": msg.with_outcome_only, "limit": msg.limit}


def decisions_v1_DecisionPrecedentsRequest_sparse(msg: decisions_pb2.DecisionPrecedentsRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_query := msg.query:
        out["query"] = v_query
    if v_category := msg.category:
        out["category"] = v_category
    if v_with_outcome_only := msg.with_outcome_only:
        out["with_outcome_only"] = v_with_outcome_only
    if v_limit := msg.limit:
        out["limit"] = v_limit
    return out


def decisions_v1_DecisionPrecedentsResponse_json(msg: decisions_pb2.DecisionPrecedentsResponse) -> dict[str, Any]:
    return {
        "precedents": [decisions_v1_Precedent_json(x) for x in msg.precedents],
        "min_similarity": double_json(msg.min_similarity),
        "none_close": msg.none_close,
    }


def decisions_v1_DedupResolveRequest_json(msg: memory_pb2.DedupResolveRequest) -> dict[str, Any]:
    return {
        "keep_key": msg.keep_key,
        "drop_key": msg.drop_key,
        "agent_id": msg.agent_id,
        "user_id": msg.user_id,
        "session_id": msg.session_id,
    }


def decisions_v1_DedupResolveRequest_sparse(msg: memory_pb2.DedupResolveRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_keep_key := msg.keep_key:
        out["keep_key"] = v_keep_key
    if v_drop_key := msg.drop_key:
        out["drop_key"] = v_drop_key
    if v_agent_id := msg.agent_id:
        out["agent_id"] = v_agent_id
    if v_user_id := msg.user_id:
        out["user_id"] = v_user_id
    if v_session_id := msg.session_id:
        out["session_id"] = v_session_id
    return out


def decisions_v1_DedupResolveResponse_json(msg: memory_pb2.DedupResolveResponse) -> dict[str, Any]:
    return {"kept": msg.kept, "dropped": msg.dropped, "version": msg.version, "retired_record": msg.retired_record}


def decisions_v1_DeleteMemoryRequest_json(msg: memory_pb2.DeleteMemoryRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "agent_id": msg.agent_id, "user_id": msg.user_id, "session_id": msg.session_id}


def decisions_v1_DeleteMemoryRequest_sparse(msg: memory_pb2.DeleteMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_agent_id := msg.agent_id:
        out["agent_id"] = v_agent_id
    if v_user_id := msg.user_id:
        out["user_id"] = v_user_id
    if v_session_id := msg.session_id:
        out["session_id"] = v_session_id
    return out


def decisions_v1_DeleteMemoryResponse_json(msg: memory_pb2.DeleteMemoryResponse) -> dict[str, Any]:
    return {"deleted": msg.deleted, "retired_record": msg.retired_record, "version": msg.version}


def decisions_v1_DeleteMemoryVersionRequest_json(msg: memory_pb2.DeleteMemoryVersionRequest) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "version": msg.version,
        "agent_id": msg.agent_id,
        "user_id": msg.user_id,
        "session_id": msg.session_id,
    }


def decisions_v1_DeleteMemoryVersionRequest_sparse(msg: memory_pb2.DeleteMemoryVersionRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_version := msg.version:
        out["version"] = v_version
    if v_agent_id := msg.agent_id:
        out["agent_id"] = v_agent_id
    if v_user_id := msg.user_id:
        out["user_id"] = v_user_id
    if v_session_id := msg.session_id:
        out["session_id"] = v_session_id
    return out


def decisions_v1_ForFileEntry_json(msg: memory_pb2.ForFileEntry) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "memory_type": msg.memory_type,
        "shown": msg.shown,
        "value": msg.value,
        "pinned": msg.pinned,
        "source_changed": msg.source_changed,
        "constraint": msg.constraint,
        "conflicts": list(msg.conflicts),
        "agent_id": msg.agent_id,
        "actor": msg.actor,
        "updated_time": msg.updated_time,
        "version": msg.version,
        "files": list(msg.files),
    }


def decisions_v1_GetMemoryRequest_json(msg: memory_pb2.GetMemoryRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "user_id": msg.user_id, "session_id": msg.session_id, "agent_id": msg.agent_id}


def decisions_v1_GetMemoryRequest_sparse(msg: memory_pb2.GetMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_user_id := msg.user_id:
        out["user_id"] = v_user_id
    if v_session_id := msg.session_id:
        out["session_id"] = v_session_id
    if v_agent_id := msg.agent_id:
        out["agent_id"] = v_agent_id
    return out


def decisions_v1_ListMemoryRequest_json(msg: memory_pb2.ListMemoryRequest) -> dict[str, Any]:
    return {"memory_type": msg.memory_type, "tag": msg.tag, "prefix": msg.prefix, "limit": msg.limit}


def decisions_v1_ListMemoryRequest_sparse(msg: memory_pb2.ListMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_type := msg.memory_type:
        out["memory_type"] = v_memory_type
    if v_tag := msg.tag:
        out["tag"] = v_tag
    if v_prefix := msg.prefix:
        out["prefix"] = v_prefix
    if v_limit := msg.limit:
        out["limit"] = v_limit
    return out


def decisions_v1_ListMemoryResponse_json(msg: memory_pb2.ListMemoryResponse) -> dict[str, Any]:
    return {"rows": [decisions_v1_MemoryRow_json(x) for x in msg.rows]}


def decisions_v1_LockMemoryRequest_json(msg: memory_pb2.LockMemoryRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "ttl_seconds": msg.ttl_seconds}


def decisions_v1_LockMemoryRequest_sparse(msg: memory_pb2.LockMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_ttl_seconds := msg.ttl_seconds:
        out["ttl_seconds"] = v_ttl_seconds
    return out


def decisions_v1_LockMemoryResponse_json(msg: memory_pb2.LockMemoryResponse) -> dict[str, Any]:
    return {"key": msg.key, "locked": msg.locked, "expires_time": msg.expires_time, "holder": msg.holder}


def decisions_v1_MemoryAction_json(msg: memory_pb2.MemoryAction) -> dict[str, Any]:
    return {
        "action": msg.action,
        "memory_key": msg.memory_key,
        "value": msg.value,
        "memory_type": msg.memory_type,
        "tags": list(msg.tags),
        "files": list(msg.files),
    }


def decisions_v1_MemoryAction_sparse(msg: memory_pb2.MemoryAction) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_action := msg.action:
        out["action"] = v_action
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_value := msg.value:
        out["value"] = v_value
    if v_memory_type := msg.memory_type:
        out["memory_type"] = v_memory_type
    if v_tags := msg.tags:
        out["tags"] = list(v_tags)
    if v_files := msg.files:
        out["files"] = list(v_files)
    return out


def decisions_v1_MemoryForFileRequest_json(msg: memory_pb2.MemoryForFileRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"path": msg.path, "repo": msg.repo}
    if msg.HasField("include_conflicted"):
        out["include_conflicted"] = msg.include_conflicted
    out["max_chars"] = msg.max_chars
    return out


def decisions_v1_MemoryForFileRequest_sparse(msg: memory_pb2.MemoryForFileRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_path := msg.path:
        out["path"] = v_path
    if v_repo := msg.repo:
        out["repo"] = v_repo
    if msg.HasField("include_conflicted"):
        out["include_conflicted"] = msg.include_conflicted
    if v_max_chars := msg.max_chars:
        out["max_chars"] = v_max_chars
    return out


def decisions_v1_MemoryForFileResponse_json(msg: memory_pb2.MemoryForFileResponse) -> dict[str, Any]:
    return {"path": msg.path, "block": msg.block, "entries": [decisions_v1_ForFileEntry_json(x) for x in msg.entries]}


def decisions_v1_MemoryHistoryRequest_json(msg: memory_pb2.MemoryHistoryRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "user_id": msg.user_id, "session_id": msg.session_id, "agent_id": msg.agent_id}


def decisions_v1_MemoryHistoryRequest_sparse(msg: memory_pb2.MemoryHistoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_user_id := msg.user_id:
        out["user_id"] = v_user_id
    if v_session_id := msg.session_id:
        out["session_id"] = v_session_id
    if v_agent_id := msg.agent_id:
        out["agent_id"] = v_agent_id
    return out


def decisions_v1_MemoryHistoryResponse_json(msg: memory_pb2.MemoryHistoryResponse) -> dict[str, Any]:
    return {
        "versions": [decisions_v1_MemoryRow_json(x) for x in msg.versions],
        "records": [decisions_v1_RecordVersion_json(x) for x in msg.records],
    }


def decisions_v1_MemoryRow_json(msg: memory_pb2.MemoryRow) -> dict[str, Any]:
    return {
        "key": msg.key,
        "value": msg.value,
        "version": msg.version,
        "tags": list(msg.tags),
        "memory_type": msg.memory_type,
        "pinned": msg.pinned,
        "memory_id": msg.memory_id,
        "agent_id": msg.agent_id,
        "user_id": msg.user_id,
        "session_id": msg.session_id,
        "attestation": msg.attestation,
        "locked": msg.locked,
        "status": msg.status,
        "conflicts": list(msg.conflicts),
        "reinforcements": msg.reinforcements,
        "credits": msg.credits,
        "charges": msg.charges,
        "files": list(msg.files),
        "source_resource_id": msg.source_resource_id,
        "source_class": msg.source_class,
        "value_hash": msg.value_hash,
        "updated_time": msg.updated_time,
        "op": msg.op,
    }


def decisions_v1_MemoryWriteResponse_json(msg: memory_pb2.MemoryWriteResponse) -> dict[str, Any]:
    return {
        "key": msg.key,
        "version": msg.version,
        "memory_id": msg.memory_id,
        "pinned": msg.pinned,
        "attestation": msg.attestation,
        "value_hash": msg.value_hash,
    }


def decisions_v1_MoveMemoryRequest_json(msg: memory_pb2.MoveMemoryRequest) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "to_key": msg.to_key,
        "keep_redirect": msg.keep_redirect,
        "agent_id": msg.agent_id,
        "user_id": msg.user_id,
        "session_id": msg.session_id,
    }


def decisions_v1_MoveMemoryRequest_sparse(msg: memory_pb2.MoveMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_to_key := msg.to_key:
        out["to_key"] = v_to_key
    if v_keep_redirect := msg.keep_redirect:
        out["keep_redirect"] = v_keep_redirect
    if v_agent_id := msg.agent_id:
        out["agent_id"] = v_agent_id
    if v_user_id := msg.user_id:
        out["user_id"] = v_user_id
    if v_session_id := msg.session_id:
        out["session_id"] = v_session_id
    return out


def decisions_v1_MoveMemoryResponse_json(msg: memory_pb2.MoveMemoryResponse) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "to_key": msg.to_key,
        "version": msg.version,
        "kept_redirect": msg.kept_redirect,
        "retired_record": msg.retired_record,
    }


def decisions_v1_PackedDecision_json(msg: memory_pb2.PackedDecision) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "stage": msg.stage, "line": msg.line, "tokens": msg.tokens}


def decisions_v1_PinMemoryRequest_json(msg: memory_pb2.PinMemoryRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "agent_id": msg.agent_id, "user_id": msg.user_id, "session_id": msg.session_id}


def decisions_v1_PinMemoryRequest_sparse(msg: memory_pb2.PinMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_agent_id := msg.agent_id:
        out["agent_id"] = v_agent_id
    if v_user_id := msg.user_id:
        out["user_id"] = v_user_id
    if v_session_id := msg.session_id:
        out["session_id"] = v_session_id
    return out


def decisions_v1_Precedent_json(msg: decisions_pb2.Precedent) -> dict[str, Any]:
    out: dict[str, Any] = {
        "memory_key": msg.memory_key,
        "score": double_json(msg.score),
        "stage": msg.stage,
        "category": msg.category,
        "scenario": msg.scenario,
        "outcome": msg.outcome,
        "reasoning": msg.reasoning,
        "alternatives": list(msg.alternatives),
        "realized_outcome": msg.realized_outcome,
    }
    if msg.HasField("success"):
        out["success"] = msg.success
    if msg.HasField("confidence"):
        out["confidence"] = double_json(msg.confidence)
    out["statement"] = msg.statement
    out["agent_id"] = msg.agent_id
    out["recorded_time"] = msg.recorded_time
    out["conflicts"] = list(msg.conflicts)
    return out


def decisions_v1_RecordDecisionRequest_json(msg: decisions_pb2.RecordDecisionRequest) -> dict[str, Any]:
    out: dict[str, Any] = {
        "category": msg.category,
        "scenario": msg.scenario,
        "reasoning": msg.reasoning,
        "outcome": msg.outcome,
        "alternatives": list(msg.alternatives),
    }
    if msg.HasField("confidence"):
        out["confidence"] = double_json(msg.confidence)
    out["caused_by"] = list(msg.caused_by)
    out["influenced_by"] = list(msg.influenced_by)
    out["stage"] = msg.stage
    out["files"] = list(msg.files)
    out["source_resource_id"] = msg.source_resource_id
    out["source_class"] = msg.source_class
    out["tags"] = list(msg.tags)
    out["run_id"] = msg.run_id
    out["memories_used"] = list(msg.memories_used)
    return out


def decisions_v1_RecordDecisionRequest_sparse(msg: decisions_pb2.RecordDecisionRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_category := msg.category:
        out["category"] = v_category
    if v_scenario := msg.scenario:
        out["scenario"] = v_scenario
    if v_reasoning := msg.reasoning:
        out["reasoning"] = v_reasoning
    if v_outcome := msg.outcome:
        out["outcome"] = v_outcome
    if v_alternatives := msg.alternatives:
        out["alternatives"] = list(v_alternatives)
    if msg.HasField("confidence"):
        out["confidence"] = double_json(msg.confidence)
    if v_caused_by := msg.caused_by:
        out["caused_by"] = list(v_caused_by)
    if v_influenced_by := msg.influenced_by:
        out["influenced_by"] = list(v_influenced_by)
    if v_stage := msg.stage:
        out["stage"] = v_stage
    if v_files := msg.files:
        out["files"] = list(v_files)
    if v_source_resource_id := msg.source_resource_id:
        out["source_resource_id"] = v_source_resource_id
    if v_source_class := msg.source_class:
        out["source_class"] = v_source_class
    if v_tags := msg.tags:
        out["tags"] = list(v_tags)
    if v_run_id := msg.run_id:
        out["run_id"] = v_run_id
    if v_memories_used := msg.memories_used:
        out["memories_used"] = list(v_memories_used)
    return out


def decisions_v1_RecordDecisionResponse_json(msg: decisions_pb2.RecordDecisionResponse) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "created": msg.created,
        "superseded_prior": msg.superseded_prior,
        "restated": msg.restated,
        "conflicts": list(msg.conflicts),
        "stage": msg.stage,
        "statement": msg.statement,
        "version": msg.version,
    }


def decisions_v1_RecordDecisionResult_json(msg: decisions_pb2.RecordDecisionResult) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("decision"):
        out["decision"] = decisions_v1_RecordDecisionResponse_json(msg.decision)
    if msg.HasField("error"):
        out["error"] = decisions_v1_DecisionItemError_json(msg.error)
    return out


def decisions_v1_RecordDecisionsRequest_json(msg: decisions_pb2.RecordDecisionsRequest) -> dict[str, Any]:
    return {"records": [decisions_v1_RecordDecisionRequest_json(x) for x in msg.records]}


def decisions_v1_RecordDecisionsRequest_sparse(msg: decisions_pb2.RecordDecisionsRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_records := msg.records:
        out["records"] = [decisions_v1_RecordDecisionRequest_sparse(x) for x in v_records]
    return out


def decisions_v1_RecordDecisionsResponse_json(msg: decisions_pb2.RecordDecisionsResponse) -> dict[str, Any]:
    return {"results": [decisions_v1_RecordDecisionResult_json(x) for x in msg.results]}


def decisions_v1_RecordHistoryRequest_json(msg: memory_pb2.RecordHistoryRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key}


def decisions_v1_RecordHistoryRequest_sparse(msg: memory_pb2.RecordHistoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    return out


def decisions_v1_RecordHistoryResponse_json(msg: memory_pb2.RecordHistoryResponse) -> dict[str, Any]:
    return {"records": [decisions_v1_RecordVersion_json(x) for x in msg.records]}


def decisions_v1_RecordVersion_json(msg: memory_pb2.RecordVersion) -> dict[str, Any]:
    out: dict[str, Any] = {
        "version": msg.version,
        "status": msg.status,
        "agent_id": msg.agent_id,
        "user_id": msg.user_id,
        "session_id": msg.session_id,
        "category": msg.category,
        "scenario": msg.scenario,
        "outcome": msg.outcome,
        "reasoning": msg.reasoning,
        "realized_outcome": msg.realized_outcome,
    }
    if msg.HasField("success"):
        out["success"] = msg.success
    out["recorded_time"] = msg.recorded_time
    return out


def decisions_v1_Repository_json(msg: code_pb2.Repository) -> dict[str, Any]:
    return {
        "repo_id": msg.repo_id,
        "owner": msg.owner,
        "name": msg.name,
        "remotes": list(msg.remotes),
        "trunk_namespace": msg.trunk_namespace,
    }


def decisions_v1_RestoreMemoryRequest_json(msg: memory_pb2.RestoreMemoryRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "agent_id": msg.agent_id, "user_id": msg.user_id, "session_id": msg.session_id}


def decisions_v1_RestoreMemoryRequest_sparse(msg: memory_pb2.RestoreMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_agent_id := msg.agent_id:
        out["agent_id"] = v_agent_id
    if v_user_id := msg.user_id:
        out["user_id"] = v_user_id
    if v_session_id := msg.session_id:
        out["session_id"] = v_session_id
    return out


def decisions_v1_RollbackNamespaceRequest_json(msg: memory_pb2.RollbackNamespaceRequest) -> dict[str, Any]:
    return {"to_time": rfc3339(msg.to_time), "dry_run": msg.dry_run}


def decisions_v1_RollbackNamespaceRequest_sparse(msg: memory_pb2.RollbackNamespaceRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_to_time := msg.to_time:
        out["to_time"] = v_to_time
    if v_dry_run := msg.dry_run:
        out["dry_run"] = v_dry_run
    return out


def decisions_v1_RollbackNamespaceResponse_json(msg: memory_pb2.RollbackNamespaceResponse) -> dict[str, Any]:
    return {"revived": msg.revived, "reverted": msg.reverted, "tombstoned": msg.tombstoned, "keys": list(msg.keys), "dry_run": msg.dry_run}


def decisions_v1_SearchHit_json(msg: memory_pb2.SearchHit) -> dict[str, Any]:
    return {
        "key": msg.key,
        "score": double_json(msg.score),
        "value": msg.value,
        "memory_type": msg.memory_type,
        "tags": list(msg.tags),
        "agent_id": msg.agent_id,
        "pinned": msg.pinned,
        "version": msg.version,
    }


def decisions_v1_SearchMemoryRequest_json(msg: memory_pb2.SearchMemoryRequest) -> dict[str, Any]:
    return {"query": msg.query, "memory_type": msg.memory_type, "tag": msg.tag, "limit": msg.limit}


def decisions_v1_SearchMemoryRequest_sparse(msg: memory_pb2.SearchMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_query := msg.query:
        out["query"] = v_query
    if v_memory_type := msg.memory_type:
        out["memory_type"] = v_memory_type
    if v_tag := msg.tag:
        out["tag"] = v_tag
    if v_limit := msg.limit:
        out["limit"] = v_limit
    return out


def decisions_v1_SearchMemoryResponse_json(msg: memory_pb2.SearchMemoryResponse) -> dict[str, Any]:
    return {"hits": [decisions_v1_SearchHit_json(x) for x in msg.hits], "weak": msg.weak}


def decisions_v1_SetMemoryRequest_json(msg: memory_pb2.SetMemoryRequest) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "value": msg.value,
        "memory_type": msg.memory_type,
        "tags": list(msg.tags),
        "files": list(msg.files),
        "source_resource_id": msg.source_resource_id,
        "source_class": msg.source_class,
    }


def decisions_v1_SetMemoryRequest_sparse(msg: memory_pb2.SetMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    if v_value := msg.value:
        out["value"] = v_value
    if v_memory_type := msg.memory_type:
        out["memory_type"] = v_memory_type
    if v_tags := msg.tags:
        out["tags"] = list(v_tags)
    if v_files := msg.files:
        out["files"] = list(v_files)
    if v_source_resource_id := msg.source_resource_id:
        out["source_resource_id"] = v_source_resource_id
    if v_source_class := msg.source_class:
        out["source_class"] = v_source_class
    return out


def decisions_v1_SetMemoryResponse_json(msg: memory_pb2.SetMemoryResponse) -> dict[str, Any]:
    return {
        "memory_key": msg.memory_key,
        "version": msg.version,
        "memory_id": msg.memory_id,
        "created": msg.created,
        "restated": msg.restated,
        "pinned": msg.pinned,
        "attestation": msg.attestation,
        "value_hash": msg.value_hash,
        "files": list(msg.files),
        "reinforcements": msg.reinforcements,
    }


def decisions_v1_UnifiedSearchHit_json(msg: search_pb2.UnifiedSearchHit) -> dict[str, Any]:
    return {
        "kind": msg.kind,
        "namespace": msg.namespace,
        "key": msg.key,
        "text": msg.text,
        "score": double_json(msg.score),
        "stage": msg.stage,
        "status": msg.status,
        "inbox": msg.inbox,
    }


def decisions_v1_UnifiedSearchRequest_json(msg: search_pb2.UnifiedSearchRequest) -> dict[str, Any]:
    return {"query": msg.query, "limit": msg.limit, "namespaces": list(msg.namespaces), "sources": list(msg.sources), "remote": msg.remote}


def decisions_v1_UnifiedSearchRequest_sparse(msg: search_pb2.UnifiedSearchRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_query := msg.query:
        out["query"] = v_query
    if v_limit := msg.limit:
        out["limit"] = v_limit
    if v_namespaces := msg.namespaces:
        out["namespaces"] = list(v_namespaces)
    if v_sources := msg.sources:
        out["sources"] = list(v_sources)
    if v_remote := msg.remote:
        out["remote"] = v_remote
    return out


def decisions_v1_UnifiedSearchResponse_json(msg: search_pb2.UnifiedSearchResponse) -> dict[str, Any]:
    return {
        "results": [decisions_v1_UnifiedSearchHit_json(x) for x in msg.results],
        "namespaces": list(msg.namespaces),
        "skipped": [decisions_v1_UnifiedSearchSkip_json(x) for x in msg.skipped],
    }


def decisions_v1_UnifiedSearchSkip_json(msg: search_pb2.UnifiedSearchSkip) -> dict[str, Any]:
    return {"namespace": msg.namespace, "source": msg.source, "code": msg.code}


def decisions_v1_UnlockMemoryRequest_json(msg: memory_pb2.UnlockMemoryRequest) -> dict[str, Any]:
    return {"memory_key": msg.memory_key}


def decisions_v1_UnlockMemoryRequest_sparse(msg: memory_pb2.UnlockMemoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_key := msg.memory_key:
        out["memory_key"] = v_memory_key
    return out


def decisions_v1_UpdateMemoryByIdRequest_json(msg: memory_pb2.UpdateMemoryByIdRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"memory_id": msg.memory_id}
    if msg.HasField("value"):
        out["value"] = msg.value
    out["tags"] = list(msg.tags)
    out["set_tags"] = msg.set_tags
    out["if_value_hash"] = msg.if_value_hash
    return out


def decisions_v1_UpdateMemoryByIdRequest_sparse(msg: memory_pb2.UpdateMemoryByIdRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_memory_id := msg.memory_id:
        out["memory_id"] = v_memory_id
    if msg.HasField("value"):
        out["value"] = msg.value
    if v_tags := msg.tags:
        out["tags"] = list(v_tags)
    if v_set_tags := msg.set_tags:
        out["set_tags"] = v_set_tags
    if v_if_value_hash := msg.if_value_hash:
        out["if_value_hash"] = v_if_value_hash
    return out


def decisions_v1_WriteRecordRequest_json(msg: memory_pb2.WriteRecordRequest) -> dict[str, Any]:
    out: dict[str, Any] = {
        "schema": msg.schema,
        "category": msg.category,
        "scenario": msg.scenario,
        "reasoning": msg.reasoning,
        "outcome": msg.outcome,
        "alternatives": list(msg.alternatives),
    }
    if msg.HasField("confidence"):
        out["confidence"] = double_json(msg.confidence)
    out["caused_by"] = list(msg.caused_by)
    out["influenced_by"] = list(msg.influenced_by)
    return out


def decisions_v1_WriteRecordRequest_sparse(msg: memory_pb2.WriteRecordRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_schema := msg.schema:
        out["schema"] = v_schema
    if v_category := msg.category:
        out["category"] = v_category
    if v_scenario := msg.scenario:
        out["scenario"] = v_scenario
    if v_reasoning := msg.reasoning:
        out["reasoning"] = v_reasoning
    if v_outcome := msg.outcome:
        out["outcome"] = v_outcome
    if v_alternatives := msg.alternatives:
        out["alternatives"] = list(v_alternatives)
    if msg.HasField("confidence"):
        out["confidence"] = double_json(msg.confidence)
    if v_caused_by := msg.caused_by:
        out["caused_by"] = list(v_caused_by)
    if v_influenced_by := msg.influenced_by:
        out["influenced_by"] = list(v_influenced_by)
    return out


def decisions_v1_WriteRecordResponse_json(msg: memory_pb2.WriteRecordResponse) -> dict[str, Any]:
    return {"memory_key": msg.memory_key, "version": msg.version, "superseded_prior": msg.superseded_prior}


def help_v1_GetRequest_json(msg: help_pb2.GetRequest) -> dict[str, Any]:
    return {"page": msg.page, "anchor": msg.anchor, "offset": msg.offset}


def help_v1_GetRequest_sparse(msg: help_pb2.GetRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_page := msg.page:
        out["page"] = v_page
    if v_anchor := msg.anchor:
        out["anchor"] = v_anchor
    if v_offset := msg.offset:
        out["offset"] = v_offset
    return out


def help_v1_GetResponse_json(msg: help_pb2.GetResponse) -> dict[str, Any]:
    out: dict[str, Any] = {
        "page": msg.page,
        "title": msg.title,
        "text": msg.text,
        "outline": [help_v1_OutlineEntry_json(x) for x in msg.outline],
    }
    if msg.HasField("next_offset"):
        out["next_offset"] = msg.next_offset
    return out


def help_v1_Hit_json(msg: help_pb2.Hit) -> dict[str, Any]:
    return {
        "page": msg.page,
        "title": msg.title,
        "breadcrumb": list(msg.breadcrumb),
        "anchor": msg.anchor,
        "audience": msg.audience,
        "snippet": msg.snippet,
        "score": double_json(msg.score),
        "citation": msg.citation,
    }


def help_v1_OutlineEntry_json(msg: help_pb2.OutlineEntry) -> dict[str, Any]:
    return {"breadcrumb": list(msg.breadcrumb), "anchor": msg.anchor, "level": msg.level}


def help_v1_SearchRequest_json(msg: help_pb2.SearchRequest) -> dict[str, Any]:
    return {"query": msg.query, "limit": msg.limit, "audience": msg.audience}


def help_v1_SearchRequest_sparse(msg: help_pb2.SearchRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_query := msg.query:
        out["query"] = v_query
    if v_limit := msg.limit:
        out["limit"] = v_limit
    if v_audience := msg.audience:
        out["audience"] = v_audience
    return out


def help_v1_SearchResponse_json(msg: help_pb2.SearchResponse) -> dict[str, Any]:
    return {"available": msg.available, "hits": [help_v1_Hit_json(x) for x in msg.hits], "weak": msg.weak, "ranking": msg.ranking}


def help_v1_Verification_json(msg: help_pb2.Verification) -> dict[str, Any]:
    return {"ref": msg.ref, "verified": msg.verified, "anchor": msg.anchor, "reason": msg.reason}


def help_v1_VerifyRequest_json(msg: help_pb2.VerifyRequest) -> dict[str, Any]:
    return {"citations": list(msg.citations)}


def help_v1_VerifyRequest_sparse(msg: help_pb2.VerifyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_citations := msg.citations:
        out["citations"] = list(v_citations)
    return out


def help_v1_VerifyResponse_json(msg: help_pb2.VerifyResponse) -> dict[str, Any]:
    return {"results": [help_v1_Verification_json(x) for x in msg.results]}


def identity_v1_CreateNamespaceRequest_json(msg: identity_pb2.CreateNamespaceRequest) -> dict[str, Any]:
    return {"name": msg.name, "description": msg.description}


def identity_v1_CreateNamespaceRequest_sparse(msg: identity_pb2.CreateNamespaceRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_name := msg.name:
        out["name"] = v_name
    if v_description := msg.description:
        out["description"] = v_description
    return out


def identity_v1_CreateNamespaceResponse_json(msg: identity_pb2.CreateNamespaceResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("namespace"):
        out["namespace"] = identity_v1_Namespace_json(msg.namespace)
    out["created"] = msg.created
    return out


def identity_v1_CreateServiceAccountRequest_json(msg: identity_pb2.CreateServiceAccountRequest) -> dict[str, Any]:
    return {"name": msg.name, "role": msg.role, "description": msg.description}


def identity_v1_CreateServiceAccountRequest_sparse(msg: identity_pb2.CreateServiceAccountRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_name := msg.name:
        out["name"] = v_name
    if v_role := msg.role:
        out["role"] = v_role
    if v_description := msg.description:
        out["description"] = v_description
    return out


def identity_v1_CreateServiceAccountResponse_json(msg: identity_pb2.CreateServiceAccountResponse) -> dict[str, Any]:
    out: dict[str, Any] = {"subject": msg.subject}
    if msg.HasField("grant"):
        out["grant"] = identity_v1_Grant_json(msg.grant)
    out["created"] = msg.created
    return out


def identity_v1_Grant_json(msg: identity_pb2.Grant) -> dict[str, Any]:
    return {"subject": msg.subject, "namespace": msg.namespace, "role": msg.role, "updated_time": rfc3339(msg.updated_time)}


def identity_v1_ListGrantsRequest_json(msg: identity_pb2.ListGrantsRequest) -> dict[str, Any]:
    return {}


def identity_v1_ListGrantsRequest_sparse(msg: identity_pb2.ListGrantsRequest) -> dict[str, Any]:
    return {}


def identity_v1_ListGrantsResponse_json(msg: identity_pb2.ListGrantsResponse) -> dict[str, Any]:
    return {"grants": [identity_v1_Grant_json(x) for x in msg.grants]}


def identity_v1_ListNamespacesRequest_json(msg: identity_pb2.ListNamespacesRequest) -> dict[str, Any]:
    return {}


def identity_v1_ListNamespacesRequest_sparse(msg: identity_pb2.ListNamespacesRequest) -> dict[str, Any]:
    return {}


def identity_v1_ListNamespacesResponse_json(msg: identity_pb2.ListNamespacesResponse) -> dict[str, Any]:
    return {"namespaces": [identity_v1_Namespace_json(x) for x in msg.namespaces]}


def identity_v1_MintTokenRequest_json(msg: identity_pb2.MintTokenRequest) -> dict[str, Any]:
    return {
        "subject": msg.subject,
        "roles": {k: x for k, x in msg.roles.items()},
        "ttl_seconds": msg.ttl_seconds,
        "default_namespace": msg.default_namespace,
        "read_scope": list(msg.read_scope),
        "consumer": msg.consumer,
        "start_session": msg.start_session,
        "ends_with_session": msg.ends_with_session,
        "token_id_prefix": msg.token_id_prefix,
    }


def identity_v1_MintTokenRequest_sparse(msg: identity_pb2.MintTokenRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_subject := msg.subject:
        out["subject"] = v_subject
    if v_roles := msg.roles:
        out["roles"] = {k: x for k, x in v_roles.items()}
    if v_ttl_seconds := msg.ttl_seconds:
        out["ttl_seconds"] = v_ttl_seconds
    if v_default_namespace := msg.default_namespace:
        out["default_namespace"] = v_default_namespace
    if v_read_scope := msg.read_scope:
        out["read_scope"] = list(v_read_scope)
    if v_consumer := msg.consumer:
        out["consumer"] = v_consumer
    if v_start_session := msg.start_session:
        out["start_session"] = v_start_session
    if v_ends_with_session := msg.ends_with_session:
        out["ends_with_session"] = v_ends_with_session
    if v_token_id_prefix := msg.token_id_prefix:
        out["token_id_prefix"] = v_token_id_prefix
    return out


def identity_v1_MintTokenResponse_json(msg: identity_pb2.MintTokenResponse) -> dict[str, Any]:
    return {
        "token": msg.token,
        "token_id": msg.token_id,
        "subject": msg.subject,
        "expires_time": rfc3339(msg.expires_time),
        "session_id": msg.session_id,
        "roles": {k: x for k, x in msg.roles.items()},
    }


def identity_v1_Namespace_json(msg: identity_pb2.Namespace) -> dict[str, Any]:
    return {"name": msg.name, "description": msg.description, "created_time": rfc3339(msg.created_time)}


def identity_v1_NamespaceRole_json(msg: identity_pb2.NamespaceRole) -> dict[str, Any]:
    return {"namespace": msg.namespace, "role": msg.role}


def identity_v1_RevokeTokenRequest_json(msg: identity_pb2.RevokeTokenRequest) -> dict[str, Any]:
    return {"token_id": msg.token_id, "subject": msg.subject, "session_id": msg.session_id, "reason": msg.reason}


def identity_v1_RevokeTokenRequest_sparse(msg: identity_pb2.RevokeTokenRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_token_id := msg.token_id:
        out["token_id"] = v_token_id
    if v_subject := msg.subject:
        out["subject"] = v_subject
    if v_session_id := msg.session_id:
        out["session_id"] = v_session_id
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def identity_v1_RevokeTokenResponse_json(msg: identity_pb2.RevokeTokenResponse) -> dict[str, Any]:
    return {"revoked": msg.revoked}


def identity_v1_SetGrantRequest_json(msg: identity_pb2.SetGrantRequest) -> dict[str, Any]:
    return {"subject": msg.subject, "role": msg.role}


def identity_v1_SetGrantRequest_sparse(msg: identity_pb2.SetGrantRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_subject := msg.subject:
        out["subject"] = v_subject
    if v_role := msg.role:
        out["role"] = v_role
    return out


def identity_v1_SetGrantResponse_json(msg: identity_pb2.SetGrantResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("grant"):
        out["grant"] = identity_v1_Grant_json(msg.grant)
    return out


def identity_v1_WhoAmIRequest_json(msg: identity_pb2.WhoAmIRequest) -> dict[str, Any]:
    return {}


def identity_v1_WhoAmIRequest_sparse(msg: identity_pb2.WhoAmIRequest) -> dict[str, Any]:
    return {}


def identity_v1_WhoAmIResponse_json(msg: identity_pb2.WhoAmIResponse) -> dict[str, Any]:
    return {
        "subject": msg.subject,
        "org": msg.org,
        "namespace": msg.namespace,
        "role": msg.role,
        "token_roles": [identity_v1_NamespaceRole_json(x) for x in msg.token_roles],
        "token_id": msg.token_id,
        "session_id": msg.session_id,
        "consumer": msg.consumer,
        "parents": list(msg.parents),
        "expires_time": rfc3339(msg.expires_time),
        "agent": msg.agent,
        "user": msg.user,
        "session": msg.session,
    }


def insights_v1_CatalogCap_json(msg: insights_pb2.CatalogCap) -> dict[str, Any]:
    return {"setting": msg.setting, "value": msg.value, "meaning": msg.meaning}


def insights_v1_CatalogColumn_json(msg: insights_pb2.CatalogColumn) -> dict[str, Any]:
    return {"name": msg.name, "type": msg.type, "comment": msg.comment}


def insights_v1_CatalogRequest_json(msg: insights_pb2.CatalogRequest) -> dict[str, Any]:
    return {}


def insights_v1_CatalogRequest_sparse(msg: insights_pb2.CatalogRequest) -> dict[str, Any]:
    return {}


def insights_v1_CatalogResponse_json(msg: insights_pb2.CatalogResponse) -> dict[str, Any]:
    return {
        "tables": [insights_v1_CatalogTable_json(x) for x in msg.tables],
        "notes": list(msg.notes),
        "caps": [insights_v1_CatalogCap_json(x) for x in msg.caps],
        "version": msg.version,
        "available": msg.available,
    }


def insights_v1_CatalogTable_json(msg: insights_pb2.CatalogTable) -> dict[str, Any]:
    return {
        "name": msg.name,
        "comment": msg.comment,
        "shape": msg.shape,
        "note": msg.note,
        "columns": [insights_v1_CatalogColumn_json(x) for x in msg.columns],
    }


def insights_v1_Column_json(msg: insights_pb2.Column) -> dict[str, Any]:
    return {"name": msg.name, "type": msg.type}


def insights_v1_QueryRequest_json(msg: insights_pb2.QueryRequest) -> dict[str, Any]:
    return {"sql": msg.sql, "namespaces": list(msg.namespaces)}


def insights_v1_QueryRequest_sparse(msg: insights_pb2.QueryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_sql := msg.sql:
        out["sql"] = v_sql
    if v_namespaces := msg.namespaces:
        out["namespaces"] = list(v_namespaces)
    return out


def insights_v1_QueryResponse_json(msg: insights_pb2.QueryResponse) -> dict[str, Any]:
    return {
        "columns": [insights_v1_Column_json(x) for x in msg.columns],
        "rows": [well_known_json(x) for x in msg.rows],
        "row_count": msg.row_count,
        "truncated": msg.truncated,
        "elapsed_ms": double_json(msg.elapsed_ms),
        "sql_digest": msg.sql_digest,
    }


def options_v1_FieldOptions_json(msg: options_pb2.FieldOptions) -> dict[str, Any]:
    out: dict[str, Any] = {"text": msg.text, "secret": msg.secret, "required": msg.required}
    if msg.HasField("min_length"):
        out["min_length"] = msg.min_length
    if msg.HasField("max_length"):
        out["max_length"] = msg.max_length
    out["pattern"] = msg.pattern
    if msg.HasField("minimum"):
        out["minimum"] = double_json(msg.minimum)
    if msg.HasField("maximum"):
        out["maximum"] = double_json(msg.maximum)
    out["enum"] = list(msg.enum)
    if msg.HasField("max_items"):
        out["max_items"] = msg.max_items
    out["timestamp"] = msg.timestamp
    out["requires"] = list(msg.requires)
    out["one_required_of"] = msg.one_required_of
    out["exactly_one_of"] = msg.exactly_one_of
    out["grammar"] = msg.grammar
    return out


def options_v1_OpOptions_json(msg: options_pb2.OpOptions) -> dict[str, Any]:
    return {
        "name": msg.name,
        "min_role": _E_options_v1_Role.get(msg.min_role, msg.min_role),
        "rate_class": msg.rate_class,
        "write_shaped": msg.write_shaped,
        "toolsets": list(msg.toolsets),
        "experimental": msg.experimental,
        "unlisted": msg.unlisted,
        "summary": msg.summary,
        "org_level": msg.org_level,
        "tool_name": msg.tool_name,
    }


def policy_v1_CheckPolicyRequest_json(msg: policy_pb2.CheckPolicyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"operation": msg.operation, "agent": msg.agent, "user": msg.user, "session": msg.session}
    if msg.HasField("args"):
        out["args"] = struct_to_dict(msg.args)
    out["rules"] = [policy_v1_RuleSpec_json(x) for x in msg.rules]
    return out


def policy_v1_CheckPolicyRequest_sparse(msg: policy_pb2.CheckPolicyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_operation := msg.operation:
        out["operation"] = v_operation
    if v_agent := msg.agent:
        out["agent"] = v_agent
    if v_user := msg.user:
        out["user"] = v_user
    if v_session := msg.session:
        out["session"] = v_session
    if msg.HasField("args"):
        out["args"] = struct_to_dict(msg.args)
    if v_rules := msg.rules:
        out["rules"] = [policy_v1_RuleSpec_sparse(x) for x in v_rules]
    return out


def policy_v1_CheckPolicyResponse_json(msg: policy_pb2.CheckPolicyResponse) -> dict[str, Any]:
    return {
        "decision": msg.decision,
        "would_enforce": msg.would_enforce,
        "mode": msg.mode,
        "write_shaped": msg.write_shaped,
        "determining_rules": list(msg.determining_rules),
        "errors": [policy_v1_EvaluationError_json(x) for x in msg.errors],
        "rules": [policy_v1_RuleResult_json(x) for x in msg.rules],
        "latency_ms": double_json(msg.latency_ms),
    }


def policy_v1_Decision_json(msg: policy_pb2.Decision) -> dict[str, Any]:
    out: dict[str, Any] = {
        "time": rfc3339(msg.time),
        "operation": msg.operation,
        "subject": msg.subject,
        "agent": msg.agent,
        "user": msg.user,
        "session": msg.session,
        "request_id": msg.request_id,
        "decision": msg.decision,
        "enforced": msg.enforced,
        "mode": msg.mode,
        "write_shaped": msg.write_shaped,
        "determining_rules": list(msg.determining_rules),
        "errors": [policy_v1_EvaluationError_json(x) for x in msg.errors],
        "rules": [policy_v1_RuleResult_json(x) for x in msg.rules],
        "latency_ms": double_json(msg.latency_ms),
        "rule": msg.rule,
        "widened_reasons": list(msg.widened_reasons),
    }
    if msg.HasField("before"):
        out["before"] = struct_to_dict(msg.before)
    if msg.HasField("after"):
        out["after"] = struct_to_dict(msg.after)
    return out


def policy_v1_DeletePolicyRequest_json(msg: policy_pb2.DeletePolicyRequest) -> dict[str, Any]:
    return {"name": msg.name}


def policy_v1_DeletePolicyRequest_sparse(msg: policy_pb2.DeletePolicyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_name := msg.name:
        out["name"] = v_name
    return out


def policy_v1_DeletePolicyResponse_json(msg: policy_pb2.DeletePolicyResponse) -> dict[str, Any]:
    return {"deleted": msg.deleted, "widened": msg.widened}


def policy_v1_EvaluationError_json(msg: policy_pb2.EvaluationError) -> dict[str, Any]:
    return {"rule": msg.rule, "path": msg.path, "message": msg.message}


def policy_v1_LeafResult_json(msg: policy_pb2.LeafResult) -> dict[str, Any]:
    return {
        "path": msg.path,
        "op": msg.op,
        "holds": msg.holds,
        "observed": double_json(msg.observed),
        "cmp": msg.cmp,
        "threshold": double_json(msg.threshold),
        "within_seconds": msg.within_seconds,
        "operation": msg.operation,
        "key": msg.key,
        "key_value": msg.key_value,
        "last_time": rfc3339(msg.last_time),
        "error": msg.error,
    }


def policy_v1_ListDecisionsRequest_json(msg: policy_pb2.ListDecisionsRequest) -> dict[str, Any]:
    return {
        "decision": msg.decision,
        "agent": msg.agent,
        "operation": msg.operation,
        "rule": msg.rule,
        "since": msg.since,
        "limit": msg.limit,
    }


def policy_v1_ListDecisionsRequest_sparse(msg: policy_pb2.ListDecisionsRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_decision := msg.decision:
        out["decision"] = v_decision
    if v_agent := msg.agent:
        out["agent"] = v_agent
    if v_operation := msg.operation:
        out["operation"] = v_operation
    if v_rule := msg.rule:
        out["rule"] = v_rule
    if v_since := msg.since:
        out["since"] = v_since
    if v_limit := msg.limit:
        out["limit"] = v_limit
    return out


def policy_v1_ListDecisionsResponse_json(msg: policy_pb2.ListDecisionsResponse) -> dict[str, Any]:
    return {"decisions": [policy_v1_Decision_json(x) for x in msg.decisions]}


def policy_v1_ListPoliciesRequest_json(msg: policy_pb2.ListPoliciesRequest) -> dict[str, Any]:
    return {}


def policy_v1_ListPoliciesRequest_sparse(msg: policy_pb2.ListPoliciesRequest) -> dict[str, Any]:
    return {}


def policy_v1_ListPoliciesResponse_json(msg: policy_pb2.ListPoliciesResponse) -> dict[str, Any]:
    return {
        "rules": [policy_v1_Rule_json(x) for x in msg.rules],
        "mode": msg.mode,
        "max_window_seconds": msg.max_window_seconds,
        "cache_ttl_seconds": double_json(msg.cache_ttl_seconds),
    }


def policy_v1_ReplayCall_json(msg: policy_pb2.ReplayCall) -> dict[str, Any]:
    return {
        "time": rfc3339(msg.time),
        "operation": msg.operation,
        "subject": msg.subject,
        "agent": msg.agent,
        "request_id": msg.request_id,
        "recorded_ok": msg.recorded_ok,
        "recorded_error_code": msg.recorded_error_code,
        "decision": msg.decision,
        "would_enforce": msg.would_enforce,
        "determining_rules": list(msg.determining_rules),
        "errors": [policy_v1_EvaluationError_json(x) for x in msg.errors],
        "rules": [policy_v1_RuleResult_json(x) for x in msg.rules],
    }


def policy_v1_ReplayPolicyRequest_json(msg: policy_pb2.ReplayPolicyRequest) -> dict[str, Any]:
    return {
        "rules": [policy_v1_RuleSpec_json(x) for x in msg.rules],
        "include_stored": msg.include_stored,
        "names": list(msg.names),
        "mode": msg.mode,
        "since": msg.since,
        "until": msg.until,
        "agent": msg.agent,
        "limit": msg.limit,
        "only_denied": msg.only_denied,
    }


def policy_v1_ReplayPolicyRequest_sparse(msg: policy_pb2.ReplayPolicyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_rules := msg.rules:
        out["rules"] = [policy_v1_RuleSpec_sparse(x) for x in v_rules]
    if v_include_stored := msg.include_stored:
        out["include_stored"] = v_include_stored
    if v_names := msg.names:
        out["names"] = list(v_names)
    if v_mode := msg.mode:
        out["mode"] = v_mode
    if v_since := msg.since:
        out["since"] = v_since
    if v_until := msg.until:
        out["until"] = v_until
    if v_agent := msg.agent:
        out["agent"] = v_agent
    if v_limit := msg.limit:
        out["limit"] = v_limit
    if v_only_denied := msg.only_denied:
        out["only_denied"] = v_only_denied
    return out


def policy_v1_ReplayPolicyResponse_json(msg: policy_pb2.ReplayPolicyResponse) -> dict[str, Any]:
    out: dict[str, Any] = {"calls": [policy_v1_ReplayCall_json(x) for x in msg.calls]}
    if msg.HasField("totals"):
        out["totals"] = policy_v1_ReplayTotals_json(msg.totals)
    out["since_time"] = rfc3339(msg.since_time)
    out["until_time"] = rfc3339(msg.until_time)
    out["truncated"] = msg.truncated
    out["mode"] = msg.mode
    return out


def policy_v1_ReplayTotals_json(msg: policy_pb2.ReplayTotals) -> dict[str, Any]:
    return {
        "calls": msg.calls,
        "evaluated": msg.evaluated,
        "allowed": msg.allowed,
        "denied": msg.denied,
        "would_enforce": msg.would_enforce,
        "errors": msg.errors,
        "newly_denied": msg.newly_denied,
        "by_rule": [policy_v1_RuleTotals_json(x) for x in msg.by_rule],
    }


def policy_v1_Rule_json(msg: policy_pb2.Rule) -> dict[str, Any]:
    out: dict[str, Any] = {"name": msg.name, "effect": msg.effect, "actions": list(msg.actions)}
    if msg.HasField("condition"):
        out["condition"] = struct_to_dict(msg.condition)
    out["description"] = msg.description
    out["mode"] = msg.mode
    out["leaf_count"] = msg.leaf_count
    out["updated_by"] = msg.updated_by
    out["updated_time"] = rfc3339(msg.updated_time)
    out["broken"] = msg.broken
    out["broken_reason"] = msg.broken_reason
    return out


def policy_v1_RuleResult_json(msg: policy_pb2.RuleResult) -> dict[str, Any]:
    return {
        "name": msg.name,
        "effect": msg.effect,
        "mode": msg.mode,
        "condition_holds": msg.condition_holds,
        "denies": msg.denies,
        "leaves": [policy_v1_LeafResult_json(x) for x in msg.leaves],
        "error": msg.error,
    }


def policy_v1_RuleSpec_json(msg: policy_pb2.RuleSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"name": msg.name, "effect": msg.effect, "actions": list(msg.actions)}
    if msg.HasField("condition"):
        out["condition"] = struct_to_dict(msg.condition)
    out["description"] = msg.description
    out["mode"] = msg.mode
    return out


def policy_v1_RuleSpec_sparse(msg: policy_pb2.RuleSpec) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_name := msg.name:
        out["name"] = v_name
    if v_effect := msg.effect:
        out["effect"] = v_effect
    if v_actions := msg.actions:
        out["actions"] = list(v_actions)
    if msg.HasField("condition"):
        out["condition"] = struct_to_dict(msg.condition)
    if v_description := msg.description:
        out["description"] = v_description
    if v_mode := msg.mode:
        out["mode"] = v_mode
    return out


def policy_v1_RuleTotals_json(msg: policy_pb2.RuleTotals) -> dict[str, Any]:
    return {"name": msg.name, "evaluated": msg.evaluated, "denied": msg.denied, "errors": msg.errors}


def policy_v1_SetPolicyRequest_json(msg: policy_pb2.SetPolicyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"name": msg.name, "effect": msg.effect, "actions": list(msg.actions)}
    if msg.HasField("condition"):
        out["condition"] = struct_to_dict(msg.condition)
    out["description"] = msg.description
    out["mode"] = msg.mode
    return out


def policy_v1_SetPolicyRequest_sparse(msg: policy_pb2.SetPolicyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_name := msg.name:
        out["name"] = v_name
    if v_effect := msg.effect:
        out["effect"] = v_effect
    if v_actions := msg.actions:
        out["actions"] = list(v_actions)
    if msg.HasField("condition"):
        out["condition"] = struct_to_dict(msg.condition)
    if v_description := msg.description:
        out["description"] = v_description
    if v_mode := msg.mode:
        out["mode"] = v_mode
    return out


def policy_v1_SetPolicyResponse_json(msg: policy_pb2.SetPolicyResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("rule"):
        out["rule"] = policy_v1_Rule_json(msg.rule)
    out["leaf_count"] = msg.leaf_count
    out["widened"] = msg.widened
    out["widened_reasons"] = list(msg.widened_reasons)
    out["created"] = msg.created
    out["warnings"] = list(msg.warnings)
    out["mode_in_effect"] = msg.mode_in_effect
    return out


def relay_v1_RelayCall_json(msg: relay_pb2.RelayCall) -> dict[str, Any]:
    return {
        "id": msg.id,
        "op": msg.op,
        "metadata": {k: x for k, x in msg.metadata.items()},
        "request": base64.b64encode(msg.request).decode(),
        "cancel": msg.cancel,
    }


def relay_v1_RelayCall_sparse(msg: relay_pb2.RelayCall) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_id := msg.id:
        out["id"] = v_id
    if v_op := msg.op:
        out["op"] = v_op
    if v_metadata := msg.metadata:
        out["metadata"] = {k: x for k, x in v_metadata.items()}
    if v_request := msg.request:
        out["request"] = base64.b64encode(v_request).decode()
    if v_cancel := msg.cancel:
        out["cancel"] = v_cancel
    return out


def relay_v1_RelayCalls_json(msg: relay_pb2.RelayCalls) -> dict[str, Any]:
    return {"calls": [relay_v1_RelayCall_json(x) for x in msg.calls]}


def relay_v1_RelayCalls_sparse(msg: relay_pb2.RelayCalls) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_calls := msg.calls:
        out["calls"] = [relay_v1_RelayCall_sparse(x) for x in v_calls]
    return out


def relay_v1_RelayReplies_json(msg: relay_pb2.RelayReplies) -> dict[str, Any]:
    return {"replies": [relay_v1_RelayReply_json(x) for x in msg.replies]}


def relay_v1_RelayReply_json(msg: relay_pb2.RelayReply) -> dict[str, Any]:
    return {"id": msg.id, "response": base64.b64encode(msg.response).decode(), "status": base64.b64encode(msg.status).decode()}


def tasks_v1_AcceptTaskRequest_json(msg: tasks_pb2.AcceptTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "reason": msg.reason}


def tasks_v1_AcceptTaskRequest_sparse(msg: tasks_pb2.AcceptTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_AcceptTaskResponse_json(msg: tasks_pb2.AcceptTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_BlockTaskRequest_json(msg: tasks_pb2.BlockTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "fence": msg.fence, "blocked_on": msg.blocked_on, "reason": msg.reason}


def tasks_v1_BlockTaskRequest_sparse(msg: tasks_pb2.BlockTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_fence := msg.fence:
        out["fence"] = v_fence
    if v_blocked_on := msg.blocked_on:
        out["blocked_on"] = v_blocked_on
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_BlockTaskResponse_json(msg: tasks_pb2.BlockTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_CancelTaskRequest_json(msg: tasks_pb2.CancelTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "reason": msg.reason}


def tasks_v1_CancelTaskRequest_sparse(msg: tasks_pb2.CancelTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_CancelTaskResponse_json(msg: tasks_pb2.CancelTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_ClaimTaskRequest_json(msg: tasks_pb2.ClaimTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "lease_seconds": msg.lease_seconds}


def tasks_v1_ClaimTaskRequest_sparse(msg: tasks_pb2.ClaimTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_lease_seconds := msg.lease_seconds:
        out["lease_seconds"] = v_lease_seconds
    return out


def tasks_v1_ClaimTaskResponse_json(msg: tasks_pb2.ClaimTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_CompleteTaskRequest_json(msg: tasks_pb2.CompleteTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"task_id": msg.task_id, "fence": msg.fence}
    if msg.HasField("outcome"):
        out["outcome"] = struct_to_dict(msg.outcome)
    out["reason"] = msg.reason
    return out


def tasks_v1_CompleteTaskRequest_sparse(msg: tasks_pb2.CompleteTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_fence := msg.fence:
        out["fence"] = v_fence
    if msg.HasField("outcome"):
        out["outcome"] = struct_to_dict(msg.outcome)
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_CompleteTaskResponse_json(msg: tasks_pb2.CompleteTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_CompleteTaskResult_json(msg: tasks_pb2.CompleteTaskResult) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    if msg.HasField("error"):
        out["error"] = tasks_v1_ItemError_json(msg.error)
    return out


def tasks_v1_CompleteTasksRequest_json(msg: tasks_pb2.CompleteTasksRequest) -> dict[str, Any]:
    return {"tasks": [tasks_v1_CompleteTaskRequest_json(x) for x in msg.tasks]}


def tasks_v1_CompleteTasksRequest_sparse(msg: tasks_pb2.CompleteTasksRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_tasks := msg.tasks:
        out["tasks"] = [tasks_v1_CompleteTaskRequest_sparse(x) for x in v_tasks]
    return out


def tasks_v1_CompleteTasksResponse_json(msg: tasks_pb2.CompleteTasksResponse) -> dict[str, Any]:
    return {"results": [tasks_v1_CompleteTaskResult_json(x) for x in msg.results]}


def tasks_v1_CountTasksRequest_json(msg: tasks_pb2.CountTasksRequest) -> dict[str, Any]:
    return {"inbox": msg.inbox}


def tasks_v1_CountTasksRequest_sparse(msg: tasks_pb2.CountTasksRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_inbox := msg.inbox:
        out["inbox"] = v_inbox
    return out


def tasks_v1_CountTasksResponse_json(msg: tasks_pb2.CountTasksResponse) -> dict[str, Any]:
    return {"counts": {k: x for k, x in msg.counts.items()}, "total": msg.total}


def tasks_v1_CreateTaskRequest_json(msg: tasks_pb2.CreateTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"inbox": msg.inbox, "kind": msg.kind, "title": msg.title}
    if msg.HasField("brief"):
        out["brief"] = struct_to_dict(msg.brief)
    out["disclosure"] = msg.disclosure
    out["priority"] = msg.priority
    out["deadline"] = rfc3339(msg.deadline)
    out["not_before"] = rfc3339(msg.not_before)
    out["origin"] = msg.origin
    out["parent_task_id"] = msg.parent_task_id
    out["idempotency_key"] = msg.idempotency_key
    return out


def tasks_v1_CreateTaskRequest_sparse(msg: tasks_pb2.CreateTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_inbox := msg.inbox:
        out["inbox"] = v_inbox
    if v_kind := msg.kind:
        out["kind"] = v_kind
    if v_title := msg.title:
        out["title"] = v_title
    if msg.HasField("brief"):
        out["brief"] = struct_to_dict(msg.brief)
    if v_disclosure := msg.disclosure:
        out["disclosure"] = v_disclosure
    if v_priority := msg.priority:
        out["priority"] = v_priority
    if v_deadline := msg.deadline:
        out["deadline"] = v_deadline
    if v_not_before := msg.not_before:
        out["not_before"] = v_not_before
    if v_origin := msg.origin:
        out["origin"] = v_origin
    if v_parent_task_id := msg.parent_task_id:
        out["parent_task_id"] = v_parent_task_id
    if v_idempotency_key := msg.idempotency_key:
        out["idempotency_key"] = v_idempotency_key
    return out


def tasks_v1_CreateTaskResponse_json(msg: tasks_pb2.CreateTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    out["created"] = msg.created
    return out


def tasks_v1_CreateTaskResult_json(msg: tasks_pb2.CreateTaskResult) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    out["created"] = msg.created
    if msg.HasField("error"):
        out["error"] = tasks_v1_ItemError_json(msg.error)
    return out


def tasks_v1_CreateTasksRequest_json(msg: tasks_pb2.CreateTasksRequest) -> dict[str, Any]:
    return {"tasks": [tasks_v1_CreateTaskRequest_json(x) for x in msg.tasks]}


def tasks_v1_CreateTasksRequest_sparse(msg: tasks_pb2.CreateTasksRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_tasks := msg.tasks:
        out["tasks"] = [tasks_v1_CreateTaskRequest_sparse(x) for x in v_tasks]
    return out


def tasks_v1_CreateTasksResponse_json(msg: tasks_pb2.CreateTasksResponse) -> dict[str, Any]:
    return {"results": [tasks_v1_CreateTaskResult_json(x) for x in msg.results]}


def tasks_v1_DeferTaskRequest_json(msg: tasks_pb2.DeferTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "fence": msg.fence, "resume_at": rfc3339(msg.resume_at), "reason": msg.reason}


def tasks_v1_DeferTaskRequest_sparse(msg: tasks_pb2.DeferTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_fence := msg.fence:
        out["fence"] = v_fence
    if v_resume_at := msg.resume_at:
        out["resume_at"] = v_resume_at
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_DeferTaskResponse_json(msg: tasks_pb2.DeferTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_Delivery_json(msg: tasks_pb2.Delivery) -> dict[str, Any]:
    return {
        "delivery_id": msg.delivery_id,
        "attempt": msg.attempt,
        "attempted_time": rfc3339(msg.attempted_time),
        "outcome": msg.outcome,
        "status_code": msg.status_code,
        "error": msg.error,
        "url": msg.url,
        "address": msg.address,
        "newest_seq": msg.newest_seq,
        "event_count": msg.event_count,
        "duration_ms": double_json(msg.duration_ms),
    }


def tasks_v1_FailTaskRequest_json(msg: tasks_pb2.FailTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "fence": msg.fence, "reason": msg.reason}


def tasks_v1_FailTaskRequest_sparse(msg: tasks_pb2.FailTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_fence := msg.fence:
        out["fence"] = v_fence
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_FailTaskResponse_json(msg: tasks_pb2.FailTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_GetTaskHistoryRequest_json(msg: tasks_pb2.GetTaskHistoryRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "limit": msg.limit}


def tasks_v1_GetTaskHistoryRequest_sparse(msg: tasks_pb2.GetTaskHistoryRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_limit := msg.limit:
        out["limit"] = v_limit
    return out


def tasks_v1_GetTaskHistoryResponse_json(msg: tasks_pb2.GetTaskHistoryResponse) -> dict[str, Any]:
    return {"events": [tasks_v1_TaskEvent_json(x) for x in msg.events]}


def tasks_v1_GetTaskRequest_json(msg: tasks_pb2.GetTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id}


def tasks_v1_GetTaskRequest_sparse(msg: tasks_pb2.GetTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    return out


def tasks_v1_GetTaskResponse_json(msg: tasks_pb2.GetTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_HeartbeatTaskRequest_json(msg: tasks_pb2.HeartbeatTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "fence": msg.fence, "lease_seconds": msg.lease_seconds}


def tasks_v1_HeartbeatTaskRequest_sparse(msg: tasks_pb2.HeartbeatTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_fence := msg.fence:
        out["fence"] = v_fence
    if v_lease_seconds := msg.lease_seconds:
        out["lease_seconds"] = v_lease_seconds
    return out


def tasks_v1_HeartbeatTaskResponse_json(msg: tasks_pb2.HeartbeatTaskResponse) -> dict[str, Any]:
    return {"task_id": msg.task_id, "fence": msg.fence, "lease_expires_time": rfc3339(msg.lease_expires_time)}


def tasks_v1_Inbox_json(msg: tasks_pb2.Inbox) -> dict[str, Any]:
    return {
        "inbox": msg.inbox,
        "namespace": msg.namespace,
        "owner_agent": msg.owner_agent,
        "posters": list(msg.posters),
        "accept_disclosure": list(msg.accept_disclosure),
        "default_lease_seconds": msg.default_lease_seconds,
        "max_attempts": msg.max_attempts,
        "max_defers": msg.max_defers,
        "triage_escalate_after_seconds": msg.triage_escalate_after_seconds,
        "webhook_url": msg.webhook_url,
        "webhook_secret_ref": msg.webhook_secret_ref,
        "description": msg.description,
        "created_time": rfc3339(msg.created_time),
        "updated_time": rfc3339(msg.updated_time),
        "counts": {k: x for k, x in msg.counts.items()},
    }


def tasks_v1_InboxPolicy_json(msg: tasks_pb2.InboxPolicy) -> dict[str, Any]:
    return {
        "inbox": msg.inbox,
        "poster": msg.poster,
        "kind": msg.kind,
        "mode": msg.mode,
        "require_evidence": list(msg.require_evidence),
        "updated_time": rfc3339(msg.updated_time),
        "updated_by": msg.updated_by,
    }


def tasks_v1_InboxPrincipal_json(msg: tasks_pb2.InboxPrincipal) -> dict[str, Any]:
    return {"subject": msg.subject, "type": msg.type}


def tasks_v1_ItemError_json(msg: tasks_pb2.ItemError) -> dict[str, Any]:
    return {"code": msg.code, "message": msg.message, "http_status": msg.http_status}


def tasks_v1_ListInboxDeliveriesRequest_json(msg: tasks_pb2.ListInboxDeliveriesRequest) -> dict[str, Any]:
    return {"inbox": msg.inbox, "limit": msg.limit}


def tasks_v1_ListInboxDeliveriesRequest_sparse(msg: tasks_pb2.ListInboxDeliveriesRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_inbox := msg.inbox:
        out["inbox"] = v_inbox
    if v_limit := msg.limit:
        out["limit"] = v_limit
    return out


def tasks_v1_ListInboxDeliveriesResponse_json(msg: tasks_pb2.ListInboxDeliveriesResponse) -> dict[str, Any]:
    return {"deliveries": [tasks_v1_Delivery_json(x) for x in msg.deliveries]}


def tasks_v1_ListInboxPoliciesRequest_json(msg: tasks_pb2.ListInboxPoliciesRequest) -> dict[str, Any]:
    return {"inbox": msg.inbox}


def tasks_v1_ListInboxPoliciesRequest_sparse(msg: tasks_pb2.ListInboxPoliciesRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_inbox := msg.inbox:
        out["inbox"] = v_inbox
    return out


def tasks_v1_ListInboxPoliciesResponse_json(msg: tasks_pb2.ListInboxPoliciesResponse) -> dict[str, Any]:
    return {"policies": [tasks_v1_InboxPolicy_json(x) for x in msg.policies]}


def tasks_v1_ListInboxPrincipalsRequest_json(msg: tasks_pb2.ListInboxPrincipalsRequest) -> dict[str, Any]:
    return {}


def tasks_v1_ListInboxPrincipalsRequest_sparse(msg: tasks_pb2.ListInboxPrincipalsRequest) -> dict[str, Any]:
    return {}


def tasks_v1_ListInboxPrincipalsResponse_json(msg: tasks_pb2.ListInboxPrincipalsResponse) -> dict[str, Any]:
    return {"principals": [tasks_v1_InboxPrincipal_json(x) for x in msg.principals]}


def tasks_v1_ListInboxesRequest_json(msg: tasks_pb2.ListInboxesRequest) -> dict[str, Any]:
    return {}


def tasks_v1_ListInboxesRequest_sparse(msg: tasks_pb2.ListInboxesRequest) -> dict[str, Any]:
    return {}


def tasks_v1_ListInboxesResponse_json(msg: tasks_pb2.ListInboxesResponse) -> dict[str, Any]:
    return {"inboxes": [tasks_v1_Inbox_json(x) for x in msg.inboxes]}


def tasks_v1_ListTaskUpdatesRequest_json(msg: tasks_pb2.ListTaskUpdatesRequest) -> dict[str, Any]:
    return {"since_seq": msg.since_seq, "wait_seconds": msg.wait_seconds, "limit": msg.limit}


def tasks_v1_ListTaskUpdatesRequest_sparse(msg: tasks_pb2.ListTaskUpdatesRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_since_seq := msg.since_seq:
        out["since_seq"] = v_since_seq
    if v_wait_seconds := msg.wait_seconds:
        out["wait_seconds"] = v_wait_seconds
    if v_limit := msg.limit:
        out["limit"] = v_limit
    return out


def tasks_v1_ListTaskUpdatesResponse_json(msg: tasks_pb2.ListTaskUpdatesResponse) -> dict[str, Any]:
    return {"events": [tasks_v1_TaskEvent_json(x) for x in msg.events], "next_seq": msg.next_seq}


def tasks_v1_ListTasksRequest_json(msg: tasks_pb2.ListTasksRequest) -> dict[str, Any]:
    return {
        "inbox": msg.inbox,
        "status": list(msg.status),
        "kind": list(msg.kind),
        "poster": msg.poster,
        "mine": msg.mine,
        "limit": msg.limit,
        "page_token": msg.page_token,
    }


def tasks_v1_ListTasksRequest_sparse(msg: tasks_pb2.ListTasksRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_inbox := msg.inbox:
        out["inbox"] = v_inbox
    if v_status := msg.status:
        out["status"] = list(v_status)
    if v_kind := msg.kind:
        out["kind"] = list(v_kind)
    if v_poster := msg.poster:
        out["poster"] = v_poster
    if v_mine := msg.mine:
        out["mine"] = v_mine
    if v_limit := msg.limit:
        out["limit"] = v_limit
    if v_page_token := msg.page_token:
        out["page_token"] = v_page_token
    return out


def tasks_v1_ListTasksResponse_json(msg: tasks_pb2.ListTasksResponse) -> dict[str, Any]:
    return {"tasks": [tasks_v1_Task_json(x) for x in msg.tasks], "next_page_token": msg.next_page_token}


def tasks_v1_PullTasksRequest_json(msg: tasks_pb2.PullTasksRequest) -> dict[str, Any]:
    return {
        "inbox": msg.inbox,
        "kinds": list(msg.kinds),
        "status": msg.status,
        "wait_seconds": msg.wait_seconds,
        "lease_seconds": msg.lease_seconds,
        "max_tasks": msg.max_tasks,
    }


def tasks_v1_PullTasksRequest_sparse(msg: tasks_pb2.PullTasksRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_inbox := msg.inbox:
        out["inbox"] = v_inbox
    if v_kinds := msg.kinds:
        out["kinds"] = list(v_kinds)
    if v_status := msg.status:
        out["status"] = v_status
    if v_wait_seconds := msg.wait_seconds:
        out["wait_seconds"] = v_wait_seconds
    if v_lease_seconds := msg.lease_seconds:
        out["lease_seconds"] = v_lease_seconds
    if v_max_tasks := msg.max_tasks:
        out["max_tasks"] = v_max_tasks
    return out


def tasks_v1_PullTasksResponse_json(msg: tasks_pb2.PullTasksResponse) -> dict[str, Any]:
    return {"tasks": [tasks_v1_Task_json(x) for x in msg.tasks]}


def tasks_v1_ReassignTaskRequest_json(msg: tasks_pb2.ReassignTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "to_inbox": msg.to_inbox, "reason": msg.reason}


def tasks_v1_ReassignTaskRequest_sparse(msg: tasks_pb2.ReassignTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_to_inbox := msg.to_inbox:
        out["to_inbox"] = v_to_inbox
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_ReassignTaskResponse_json(msg: tasks_pb2.ReassignTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_RegisterInboxRequest_json(msg: tasks_pb2.RegisterInboxRequest) -> dict[str, Any]:
    return {
        "inbox": msg.inbox,
        "owner_agent": msg.owner_agent,
        "posters": list(msg.posters),
        "accept_disclosure": list(msg.accept_disclosure),
        "default_lease_seconds": msg.default_lease_seconds,
        "max_attempts": msg.max_attempts,
        "max_defers": msg.max_defers,
        "triage_escalate_after_seconds": msg.triage_escalate_after_seconds,
        "webhook_url": msg.webhook_url,
        "webhook_secret_ref": msg.webhook_secret_ref,
        "description": msg.description,
    }


def tasks_v1_RegisterInboxRequest_sparse(msg: tasks_pb2.RegisterInboxRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_inbox := msg.inbox:
        out["inbox"] = v_inbox
    if v_owner_agent := msg.owner_agent:
        out["owner_agent"] = v_owner_agent
    if v_posters := msg.posters:
        out["posters"] = list(v_posters)
    if v_accept_disclosure := msg.accept_disclosure:
        out["accept_disclosure"] = list(v_accept_disclosure)
    if v_default_lease_seconds := msg.default_lease_seconds:
        out["default_lease_seconds"] = v_default_lease_seconds
    if v_max_attempts := msg.max_attempts:
        out["max_attempts"] = v_max_attempts
    if v_max_defers := msg.max_defers:
        out["max_defers"] = v_max_defers
    if v_triage_escalate_after_seconds := msg.triage_escalate_after_seconds:
        out["triage_escalate_after_seconds"] = v_triage_escalate_after_seconds
    if v_webhook_url := msg.webhook_url:
        out["webhook_url"] = v_webhook_url
    if v_webhook_secret_ref := msg.webhook_secret_ref:
        out["webhook_secret_ref"] = v_webhook_secret_ref
    if v_description := msg.description:
        out["description"] = v_description
    return out


def tasks_v1_RegisterInboxResponse_json(msg: tasks_pb2.RegisterInboxResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("inbox"):
        out["inbox"] = tasks_v1_Inbox_json(msg.inbox)
    out["created"] = msg.created
    return out


def tasks_v1_ReopenTaskRequest_json(msg: tasks_pb2.ReopenTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "reason": msg.reason}


def tasks_v1_ReopenTaskRequest_sparse(msg: tasks_pb2.ReopenTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_ReopenTaskResponse_json(msg: tasks_pb2.ReopenTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_ReportTaskProgressRequest_json(msg: tasks_pb2.ReportTaskProgressRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "fence": msg.fence, "note": msg.note, "percent": msg.percent}


def tasks_v1_ReportTaskProgressRequest_sparse(msg: tasks_pb2.ReportTaskProgressRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_fence := msg.fence:
        out["fence"] = v_fence
    if v_note := msg.note:
        out["note"] = v_note
    if v_percent := msg.percent:
        out["percent"] = v_percent
    return out


def tasks_v1_ReportTaskProgressResponse_json(msg: tasks_pb2.ReportTaskProgressResponse) -> dict[str, Any]:
    return {"task_id": msg.task_id, "event_id": msg.event_id}


def tasks_v1_ResumeTaskRequest_json(msg: tasks_pb2.ResumeTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "reason": msg.reason}


def tasks_v1_ResumeTaskRequest_sparse(msg: tasks_pb2.ResumeTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_ResumeTaskResponse_json(msg: tasks_pb2.ResumeTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_SetInboxPolicyRequest_json(msg: tasks_pb2.SetInboxPolicyRequest) -> dict[str, Any]:
    return {
        "inbox": msg.inbox,
        "poster": msg.poster,
        "kind": msg.kind,
        "mode": msg.mode,
        "require_evidence": list(msg.require_evidence),
        "remove": msg.remove,
    }


def tasks_v1_SetInboxPolicyRequest_sparse(msg: tasks_pb2.SetInboxPolicyRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_inbox := msg.inbox:
        out["inbox"] = v_inbox
    if v_poster := msg.poster:
        out["poster"] = v_poster
    if v_kind := msg.kind:
        out["kind"] = v_kind
    if v_mode := msg.mode:
        out["mode"] = v_mode
    if v_require_evidence := msg.require_evidence:
        out["require_evidence"] = list(v_require_evidence)
    if v_remove := msg.remove:
        out["remove"] = v_remove
    return out


def tasks_v1_SetInboxPolicyResponse_json(msg: tasks_pb2.SetInboxPolicyResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("policy"):
        out["policy"] = tasks_v1_InboxPolicy_json(msg.policy)
    out["removed"] = msg.removed
    return out


def tasks_v1_Task_json(msg: tasks_pb2.Task) -> dict[str, Any]:
    out: dict[str, Any] = {"task_id": msg.task_id, "inbox": msg.inbox, "namespace": msg.namespace, "kind": msg.kind, "title": msg.title}
    if msg.HasField("brief"):
        out["brief"] = struct_to_dict(msg.brief)
    out["status"] = msg.status
    out["disclosure"] = msg.disclosure
    out["priority"] = msg.priority
    out["deadline"] = rfc3339(msg.deadline)
    out["not_before"] = rfc3339(msg.not_before)
    out["origin"] = msg.origin
    out["parent_task_id"] = msg.parent_task_id
    out["poster"] = msg.poster
    out["poster_agent"] = msg.poster_agent
    out["poster_namespace"] = msg.poster_namespace
    out["idempotency_key"] = msg.idempotency_key
    out["reason"] = msg.reason
    out["blocked_on"] = msg.blocked_on
    out["resume_at"] = rfc3339(msg.resume_at)
    if msg.HasField("outcome"):
        out["outcome"] = struct_to_dict(msg.outcome)
    out["claimed_by"] = msg.claimed_by
    out["claimed_agent"] = msg.claimed_agent
    out["fence"] = msg.fence
    out["lease_expires_time"] = rfc3339(msg.lease_expires_time)
    out["attempts"] = msg.attempts
    out["defers"] = msg.defers
    out["version"] = msg.version
    out["created_time"] = rfc3339(msg.created_time)
    out["updated_time"] = rfc3339(msg.updated_time)
    out["escalated_time"] = rfc3339(msg.escalated_time)
    out["owner_agent"] = msg.owner_agent
    return out


def tasks_v1_TaskEvent_json(msg: tasks_pb2.TaskEvent) -> dict[str, Any]:
    out: dict[str, Any] = {
        "seq": msg.seq,
        "event_id": msg.event_id,
        "org": msg.org,
        "namespace": msg.namespace,
        "inbox": msg.inbox,
        "task_id": msg.task_id,
        "kind": msg.kind,
        "poster": msg.poster,
        "status": msg.status,
        "at": rfc3339(msg.at),
        "version": msg.version,
        "reason": msg.reason,
        "actor": msg.actor,
        "actor_agent": msg.actor_agent,
        "task_kind": msg.task_kind,
        "title": msg.title,
    }
    if msg.HasField("data"):
        out["data"] = struct_to_dict(msg.data)
    return out


def tasks_v1_UnblockTaskRequest_json(msg: tasks_pb2.UnblockTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "reason": msg.reason}


def tasks_v1_UnblockTaskRequest_sparse(msg: tasks_pb2.UnblockTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_UnblockTaskResponse_json(msg: tasks_pb2.UnblockTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_UpdateTaskRequest_json(msg: tasks_pb2.UpdateTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {"task_id": msg.task_id, "if_match_version": msg.if_match_version}
    if msg.HasField("title"):
        out["title"] = msg.title
    if msg.HasField("brief"):
        out["brief"] = struct_to_dict(msg.brief)
    if msg.HasField("priority"):
        out["priority"] = msg.priority
    if msg.HasField("deadline"):
        out["deadline"] = rfc3339(msg.deadline)
    if msg.HasField("not_before"):
        out["not_before"] = rfc3339(msg.not_before)
    return out


def tasks_v1_UpdateTaskRequest_sparse(msg: tasks_pb2.UpdateTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_if_match_version := msg.if_match_version:
        out["if_match_version"] = v_if_match_version
    if msg.HasField("title"):
        out["title"] = msg.title
    if msg.HasField("brief"):
        out["brief"] = struct_to_dict(msg.brief)
    if msg.HasField("priority"):
        out["priority"] = msg.priority
    if msg.HasField("deadline"):
        out["deadline"] = msg.deadline
    if msg.HasField("not_before"):
        out["not_before"] = msg.not_before
    return out


def tasks_v1_UpdateTaskResponse_json(msg: tasks_pb2.UpdateTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


def tasks_v1_WatchTaskRequest_json(msg: tasks_pb2.WatchTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "inbox": msg.inbox, "since_seq": msg.since_seq, "wait_seconds": msg.wait_seconds, "limit": msg.limit}


def tasks_v1_WatchTaskRequest_sparse(msg: tasks_pb2.WatchTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_inbox := msg.inbox:
        out["inbox"] = v_inbox
    if v_since_seq := msg.since_seq:
        out["since_seq"] = v_since_seq
    if v_wait_seconds := msg.wait_seconds:
        out["wait_seconds"] = v_wait_seconds
    if v_limit := msg.limit:
        out["limit"] = v_limit
    return out


def tasks_v1_WatchTaskResponse_json(msg: tasks_pb2.WatchTaskResponse) -> dict[str, Any]:
    return {"events": [tasks_v1_TaskEvent_json(x) for x in msg.events], "next_seq": msg.next_seq}


def tasks_v1_WontDoTaskRequest_json(msg: tasks_pb2.WontDoTaskRequest) -> dict[str, Any]:
    return {"task_id": msg.task_id, "reason": msg.reason}


def tasks_v1_WontDoTaskRequest_sparse(msg: tasks_pb2.WontDoTaskRequest) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if v_task_id := msg.task_id:
        out["task_id"] = v_task_id
    if v_reason := msg.reason:
        out["reason"] = v_reason
    return out


def tasks_v1_WontDoTaskResponse_json(msg: tasks_pb2.WontDoTaskResponse) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if msg.HasField("task"):
        out["task"] = tasks_v1_Task_json(msg.task)
    return out


# Each message class -> its converter, a function of exactly that class (a map over many
# message types, which one Callable type cannot state key by key: hence Any).
JSON: dict[type[Message], Callable[[Any], dict[str, Any]]] = {
    assistant_pb2.AskRequest: assistant_v1_AskRequest_json,
    assistant_pb2.AskResponse: assistant_v1_AskResponse_json,
    assistant_pb2.BudgetResponse: assistant_v1_BudgetResponse_json,
    assistant_pb2.Citation: assistant_v1_Citation_json,
    assistant_pb2.GetBudgetRequest: assistant_v1_GetBudgetRequest_json,
    assistant_pb2.GetModelCallsRequest: assistant_v1_GetModelCallsRequest_json,
    assistant_pb2.ModelCallsResponse: assistant_v1_ModelCallsResponse_json,
    assistant_pb2.SetBudgetRequest: assistant_v1_SetBudgetRequest_json,
    assistant_pb2.SetModelCallsRequest: assistant_v1_SetModelCallsRequest_json,
    assistant_pb2.Turn: assistant_v1_Turn_json,
    memory_pb2.ActionResult: decisions_v1_ActionResult_json,
    memory_pb2.ApplyMemoryRequest: decisions_v1_ApplyMemoryRequest_json,
    memory_pb2.ApplyMemoryResponse: decisions_v1_ApplyMemoryResponse_json,
    memory_pb2.AutoSupersedeRequest: decisions_v1_AutoSupersedeRequest_json,
    memory_pb2.AutoSupersedeResponse: decisions_v1_AutoSupersedeResponse_json,
    decisions_pb2.CalibrationBin: decisions_v1_CalibrationBin_json,
    decisions_pb2.CalibrationRow: decisions_v1_CalibrationRow_json,
    decisions_pb2.ChainEdge: decisions_v1_ChainEdge_json,
    decisions_pb2.ChainNode: decisions_v1_ChainNode_json,
    memory_pb2.ClearMemoryRequest: decisions_v1_ClearMemoryRequest_json,
    memory_pb2.ClearMemoryResponse: decisions_v1_ClearMemoryResponse_json,
    code_pb2.CodeReposRequest: decisions_v1_CodeReposRequest_json,
    code_pb2.CodeReposResponse: decisions_v1_CodeReposResponse_json,
    code_pb2.CodeSymbolDefinition: decisions_v1_CodeSymbolDefinition_json,
    code_pb2.CodeSymbolRequest: decisions_v1_CodeSymbolRequest_json,
    code_pb2.CodeSymbolResponse: decisions_v1_CodeSymbolResponse_json,
    memory_pb2.ContextPackRequest: decisions_v1_ContextPackRequest_json,
    memory_pb2.ContextPackResponse: decisions_v1_ContextPackResponse_json,
    decisions_pb2.DecisionCalibrationRequest: decisions_v1_DecisionCalibrationRequest_json,
    decisions_pb2.DecisionCalibrationResponse: decisions_v1_DecisionCalibrationResponse_json,
    decisions_pb2.DecisionChainRequest: decisions_v1_DecisionChainRequest_json,
    decisions_pb2.DecisionChainResponse: decisions_v1_DecisionChainResponse_json,
    decisions_pb2.DecisionItemError: decisions_v1_DecisionItemError_json,
    decisions_pb2.DecisionOutcomeRequest: decisions_v1_DecisionOutcomeRequest_json,
    decisions_pb2.DecisionOutcomeResponse: decisions_v1_DecisionOutcomeResponse_json,
    decisions_pb2.DecisionPrecedentsRequest: decisions_v1_DecisionPrecedentsRequest_json,
    decisions_pb2.DecisionPrecedentsResponse: decisions_v1_DecisionPrecedentsResponse_json,
    memory_pb2.DedupResolveRequest: decisions_v1_DedupResolveRequest_json,
    memory_pb2.DedupResolveResponse: decisions_v1_DedupResolveResponse_json,
    memory_pb2.DeleteMemoryRequest: decisions_v1_DeleteMemoryRequest_json,
    memory_pb2.DeleteMemoryResponse: decisions_v1_DeleteMemoryResponse_json,
    memory_pb2.DeleteMemoryVersionRequest: decisions_v1_DeleteMemoryVersionRequest_json,
    memory_pb2.ForFileEntry: decisions_v1_ForFileEntry_json,
    memory_pb2.GetMemoryRequest: decisions_v1_GetMemoryRequest_json,
    memory_pb2.ListMemoryRequest: decisions_v1_ListMemoryRequest_json,
    memory_pb2.ListMemoryResponse: decisions_v1_ListMemoryResponse_json,
    memory_pb2.LockMemoryRequest: decisions_v1_LockMemoryRequest_json,
    memory_pb2.LockMemoryResponse: decisions_v1_LockMemoryResponse_json,
    memory_pb2.MemoryAction: decisions_v1_MemoryAction_json,
    memory_pb2.MemoryForFileRequest: decisions_v1_MemoryForFileRequest_json,
    memory_pb2.MemoryForFileResponse: decisions_v1_MemoryForFileResponse_json,
    memory_pb2.MemoryHistoryRequest: decisions_v1_MemoryHistoryRequest_json,
    memory_pb2.MemoryHistoryResponse: decisions_v1_MemoryHistoryResponse_json,
    memory_pb2.MemoryRow: decisions_v1_MemoryRow_json,
    memory_pb2.MemoryWriteResponse: decisions_v1_MemoryWriteResponse_json,
    memory_pb2.MoveMemoryRequest: decisions_v1_MoveMemoryRequest_json,
    memory_pb2.MoveMemoryResponse: decisions_v1_MoveMemoryResponse_json,
    memory_pb2.PackedDecision: decisions_v1_PackedDecision_json,
    memory_pb2.PinMemoryRequest: decisions_v1_PinMemoryRequest_json,
    decisions_pb2.Precedent: decisions_v1_Precedent_json,
    decisions_pb2.RecordDecisionRequest: decisions_v1_RecordDecisionRequest_json,
    decisions_pb2.RecordDecisionResponse: decisions_v1_RecordDecisionResponse_json,
    decisions_pb2.RecordDecisionResult: decisions_v1_RecordDecisionResult_json,
    decisions_pb2.RecordDecisionsRequest: decisions_v1_RecordDecisionsRequest_json,
    decisions_pb2.RecordDecisionsResponse: decisions_v1_RecordDecisionsResponse_json,
    memory_pb2.RecordHistoryRequest: decisions_v1_RecordHistoryRequest_json,
    memory_pb2.RecordHistoryResponse: decisions_v1_RecordHistoryResponse_json,
    memory_pb2.RecordVersion: decisions_v1_RecordVersion_json,
    code_pb2.Repository: decisions_v1_Repository_json,
    memory_pb2.RestoreMemoryRequest: decisions_v1_RestoreMemoryRequest_json,
    memory_pb2.RollbackNamespaceRequest: decisions_v1_RollbackNamespaceRequest_json,
    memory_pb2.RollbackNamespaceResponse: decisions_v1_RollbackNamespaceResponse_json,
    memory_pb2.SearchHit: decisions_v1_SearchHit_json,
    memory_pb2.SearchMemoryRequest: decisions_v1_SearchMemoryRequest_json,
    memory_pb2.SearchMemoryResponse: decisions_v1_SearchMemoryResponse_json,
    memory_pb2.SetMemoryRequest: decisions_v1_SetMemoryRequest_json,
    memory_pb2.SetMemoryResponse: decisions_v1_SetMemoryResponse_json,
    search_pb2.UnifiedSearchHit: decisions_v1_UnifiedSearchHit_json,
    search_pb2.UnifiedSearchRequest: decisions_v1_UnifiedSearchRequest_json,
    search_pb2.UnifiedSearchResponse: decisions_v1_UnifiedSearchResponse_json,
    search_pb2.UnifiedSearchSkip: decisions_v1_UnifiedSearchSkip_json,
    memory_pb2.UnlockMemoryRequest: decisions_v1_UnlockMemoryRequest_json,
    memory_pb2.UpdateMemoryByIdRequest: decisions_v1_UpdateMemoryByIdRequest_json,
    memory_pb2.WriteRecordRequest: decisions_v1_WriteRecordRequest_json,
    memory_pb2.WriteRecordResponse: decisions_v1_WriteRecordResponse_json,
    help_pb2.GetRequest: help_v1_GetRequest_json,
    help_pb2.GetResponse: help_v1_GetResponse_json,
    help_pb2.Hit: help_v1_Hit_json,
    help_pb2.OutlineEntry: help_v1_OutlineEntry_json,
    help_pb2.SearchRequest: help_v1_SearchRequest_json,
    help_pb2.SearchResponse: help_v1_SearchResponse_json,
    help_pb2.Verification: help_v1_Verification_json,
    help_pb2.VerifyRequest: help_v1_VerifyRequest_json,
    help_pb2.VerifyResponse: help_v1_VerifyResponse_json,
    identity_pb2.CreateNamespaceRequest: identity_v1_CreateNamespaceRequest_json,
    identity_pb2.CreateNamespaceResponse: identity_v1_CreateNamespaceResponse_json,
    identity_pb2.CreateServiceAccountRequest: identity_v1_CreateServiceAccountRequest_json,
    identity_pb2.CreateServiceAccountResponse: identity_v1_CreateServiceAccountResponse_json,
    identity_pb2.Grant: identity_v1_Grant_json,
    identity_pb2.ListGrantsRequest: identity_v1_ListGrantsRequest_json,
    identity_pb2.ListGrantsResponse: identity_v1_ListGrantsResponse_json,
    identity_pb2.ListNamespacesRequest: identity_v1_ListNamespacesRequest_json,
    identity_pb2.ListNamespacesResponse: identity_v1_ListNamespacesResponse_json,
    identity_pb2.MintTokenRequest: identity_v1_MintTokenRequest_json,
    identity_pb2.MintTokenResponse: identity_v1_MintTokenResponse_json,
    identity_pb2.Namespace: identity_v1_Namespace_json,
    identity_pb2.NamespaceRole: identity_v1_NamespaceRole_json,
    identity_pb2.RevokeTokenRequest: identity_v1_RevokeTokenRequest_json,
    identity_pb2.RevokeTokenResponse: identity_v1_RevokeTokenResponse_json,
    identity_pb2.SetGrantRequest: identity_v1_SetGrantRequest_json,
    identity_pb2.SetGrantResponse: identity_v1_SetGrantResponse_json,
    identity_pb2.WhoAmIRequest: identity_v1_WhoAmIRequest_json,
    identity_pb2.WhoAmIResponse: identity_v1_WhoAmIResponse_json,
    insights_pb2.CatalogCap: insights_v1_CatalogCap_json,
    insights_pb2.CatalogColumn: insights_v1_CatalogColumn_json,
    insights_pb2.CatalogRequest: insights_v1_CatalogRequest_json,
    insights_pb2.CatalogResponse: insights_v1_CatalogResponse_json,
    insights_pb2.CatalogTable: insights_v1_CatalogTable_json,
    insights_pb2.Column: insights_v1_Column_json,
    insights_pb2.QueryRequest: insights_v1_QueryRequest_json,
    insights_pb2.QueryResponse: insights_v1_QueryResponse_json,
    options_pb2.FieldOptions: options_v1_FieldOptions_json,
    options_pb2.OpOptions: options_v1_OpOptions_json,
    policy_pb2.CheckPolicyRequest: policy_v1_CheckPolicyRequest_json,
    policy_pb2.CheckPolicyResponse: policy_v1_CheckPolicyResponse_json,
    policy_pb2.Decision: policy_v1_Decision_json,
    policy_pb2.DeletePolicyRequest: policy_v1_DeletePolicyRequest_json,
    policy_pb2.DeletePolicyResponse: policy_v1_DeletePolicyResponse_json,
    policy_pb2.EvaluationError: policy_v1_EvaluationError_json,
    policy_pb2.LeafResult: policy_v1_LeafResult_json,
    policy_pb2.ListDecisionsRequest: policy_v1_ListDecisionsRequest_json,
    policy_pb2.ListDecisionsResponse: policy_v1_ListDecisionsResponse_json,
    policy_pb2.ListPoliciesRequest: policy_v1_ListPoliciesRequest_json,
    policy_pb2.ListPoliciesResponse: policy_v1_ListPoliciesResponse_json,
    policy_pb2.ReplayCall: policy_v1_ReplayCall_json,
    policy_pb2.ReplayPolicyRequest: policy_v1_ReplayPolicyRequest_json,
    policy_pb2.ReplayPolicyResponse: policy_v1_ReplayPolicyResponse_json,
    policy_pb2.ReplayTotals: policy_v1_ReplayTotals_json,
    policy_pb2.Rule: policy_v1_Rule_json,
    policy_pb2.RuleResult: policy_v1_RuleResult_json,
    policy_pb2.RuleSpec: policy_v1_RuleSpec_json,
    policy_pb2.RuleTotals: policy_v1_RuleTotals_json,
    policy_pb2.SetPolicyRequest: policy_v1_SetPolicyRequest_json,
    policy_pb2.SetPolicyResponse: policy_v1_SetPolicyResponse_json,
    relay_pb2.RelayCall: relay_v1_RelayCall_json,
    relay_pb2.RelayCalls: relay_v1_RelayCalls_json,
    relay_pb2.RelayReplies: relay_v1_RelayReplies_json,
    relay_pb2.RelayReply: relay_v1_RelayReply_json,
    tasks_pb2.AcceptTaskRequest: tasks_v1_AcceptTaskRequest_json,
    tasks_pb2.AcceptTaskResponse: tasks_v1_AcceptTaskResponse_json,
    tasks_pb2.BlockTaskRequest: tasks_v1_BlockTaskRequest_json,
    tasks_pb2.BlockTaskResponse: tasks_v1_BlockTaskResponse_json,
    tasks_pb2.CancelTaskRequest: tasks_v1_CancelTaskRequest_json,
    tasks_pb2.CancelTaskResponse: tasks_v1_CancelTaskResponse_json,
    tasks_pb2.ClaimTaskRequest: tasks_v1_ClaimTaskRequest_json,
    tasks_pb2.ClaimTaskResponse: tasks_v1_ClaimTaskResponse_json,
    tasks_pb2.CompleteTaskRequest: tasks_v1_CompleteTaskRequest_json,
    tasks_pb2.CompleteTaskResponse: tasks_v1_CompleteTaskResponse_json,
    tasks_pb2.CompleteTaskResult: tasks_v1_CompleteTaskResult_json,
    tasks_pb2.CompleteTasksRequest: tasks_v1_CompleteTasksRequest_json,
    tasks_pb2.CompleteTasksResponse: tasks_v1_CompleteTasksResponse_json,
    tasks_pb2.CountTasksRequest: tasks_v1_CountTasksRequest_json,
    tasks_pb2.CountTasksResponse: tasks_v1_CountTasksResponse_json,
    tasks_pb2.CreateTaskRequest: tasks_v1_CreateTaskRequest_json,
    tasks_pb2.CreateTaskResponse: tasks_v1_CreateTaskResponse_json,
    tasks_pb2.CreateTaskResult: tasks_v1_CreateTaskResult_json,
    tasks_pb2.CreateTasksRequest: tasks_v1_CreateTasksRequest_json,
    tasks_pb2.CreateTasksResponse: tasks_v1_CreateTasksResponse_json,
    tasks_pb2.DeferTaskRequest: tasks_v1_DeferTaskRequest_json,
    tasks_pb2.DeferTaskResponse: tasks_v1_DeferTaskResponse_json,
    tasks_pb2.Delivery: tasks_v1_Delivery_json,
    tasks_pb2.FailTaskRequest: tasks_v1_FailTaskRequest_json,
    tasks_pb2.FailTaskResponse: tasks_v1_FailTaskResponse_json,
    tasks_pb2.GetTaskHistoryRequest: tasks_v1_GetTaskHistoryRequest_json,
    tasks_pb2.GetTaskHistoryResponse: tasks_v1_GetTaskHistoryResponse_json,
    tasks_pb2.GetTaskRequest: tasks_v1_GetTaskRequest_json,
    tasks_pb2.GetTaskResponse: tasks_v1_GetTaskResponse_json,
    tasks_pb2.HeartbeatTaskRequest: tasks_v1_HeartbeatTaskRequest_json,
    tasks_pb2.HeartbeatTaskResponse: tasks_v1_HeartbeatTaskResponse_json,
    tasks_pb2.Inbox: tasks_v1_Inbox_json,
    tasks_pb2.InboxPolicy: tasks_v1_InboxPolicy_json,
    tasks_pb2.InboxPrincipal: tasks_v1_InboxPrincipal_json,
    tasks_pb2.ItemError: tasks_v1_ItemError_json,
    tasks_pb2.ListInboxDeliveriesRequest: tasks_v1_ListInboxDeliveriesRequest_json,
    tasks_pb2.ListInboxDeliveriesResponse: tasks_v1_ListInboxDeliveriesResponse_json,
    tasks_pb2.ListInboxPoliciesRequest: tasks_v1_ListInboxPoliciesRequest_json,
    tasks_pb2.ListInboxPoliciesResponse: tasks_v1_ListInboxPoliciesResponse_json,
    tasks_pb2.ListInboxPrincipalsRequest: tasks_v1_ListInboxPrincipalsRequest_json,
    tasks_pb2.ListInboxPrincipalsResponse: tasks_v1_ListInboxPrincipalsResponse_json,
    tasks_pb2.ListInboxesRequest: tasks_v1_ListInboxesRequest_json,
    tasks_pb2.ListInboxesResponse: tasks_v1_ListInboxesResponse_json,
    tasks_pb2.ListTaskUpdatesRequest: tasks_v1_ListTaskUpdatesRequest_json,
    tasks_pb2.ListTaskUpdatesResponse: tasks_v1_ListTaskUpdatesResponse_json,
    tasks_pb2.ListTasksRequest: tasks_v1_ListTasksRequest_json,
    tasks_pb2.ListTasksResponse: tasks_v1_ListTasksResponse_json,
    tasks_pb2.PullTasksRequest: tasks_v1_PullTasksRequest_json,
    tasks_pb2.PullTasksResponse: tasks_v1_PullTasksResponse_json,
    tasks_pb2.ReassignTaskRequest: tasks_v1_ReassignTaskRequest_json,
    tasks_pb2.ReassignTaskResponse: tasks_v1_ReassignTaskResponse_json,
    tasks_pb2.RegisterInboxRequest: tasks_v1_RegisterInboxRequest_json,
    tasks_pb2.RegisterInboxResponse: tasks_v1_RegisterInboxResponse_json,
    tasks_pb2.ReopenTaskRequest: tasks_v1_ReopenTaskRequest_json,
    tasks_pb2.ReopenTaskResponse: tasks_v1_ReopenTaskResponse_json,
    tasks_pb2.ReportTaskProgressRequest: tasks_v1_ReportTaskProgressRequest_json,
    tasks_pb2.ReportTaskProgressResponse: tasks_v1_ReportTaskProgressResponse_json,
    tasks_pb2.ResumeTaskRequest: tasks_v1_ResumeTaskRequest_json,
    tasks_pb2.ResumeTaskResponse: tasks_v1_ResumeTaskResponse_json,
    tasks_pb2.SetInboxPolicyRequest: tasks_v1_SetInboxPolicyRequest_json,
    tasks_pb2.SetInboxPolicyResponse: tasks_v1_SetInboxPolicyResponse_json,
    tasks_pb2.Task: tasks_v1_Task_json,
    tasks_pb2.TaskEvent: tasks_v1_TaskEvent_json,
    tasks_pb2.UnblockTaskRequest: tasks_v1_UnblockTaskRequest_json,
    tasks_pb2.UnblockTaskResponse: tasks_v1_UnblockTaskResponse_json,
    tasks_pb2.UpdateTaskRequest: tasks_v1_UpdateTaskRequest_json,
    tasks_pb2.UpdateTaskResponse: tasks_v1_UpdateTaskResponse_json,
    tasks_pb2.WatchTaskRequest: tasks_v1_WatchTaskRequest_json,
    tasks_pb2.WatchTaskResponse: tasks_v1_WatchTaskResponse_json,
    tasks_pb2.WontDoTaskRequest: tasks_v1_WontDoTaskRequest_json,
    tasks_pb2.WontDoTaskResponse: tasks_v1_WontDoTaskResponse_json,
}
SPARSE: dict[type[Message], Callable[[Any], dict[str, Any]]] = {
    assistant_pb2.AskRequest: assistant_v1_AskRequest_sparse,
    assistant_pb2.GetBudgetRequest: assistant_v1_GetBudgetRequest_sparse,
    assistant_pb2.GetModelCallsRequest: assistant_v1_GetModelCallsRequest_sparse,
    assistant_pb2.SetBudgetRequest: assistant_v1_SetBudgetRequest_sparse,
    assistant_pb2.SetModelCallsRequest: assistant_v1_SetModelCallsRequest_sparse,
    assistant_pb2.Turn: assistant_v1_Turn_sparse,
    memory_pb2.ApplyMemoryRequest: decisions_v1_ApplyMemoryRequest_sparse,
    memory_pb2.AutoSupersedeRequest: decisions_v1_AutoSupersedeRequest_sparse,
    memory_pb2.ClearMemoryRequest: decisions_v1_ClearMemoryRequest_sparse,
    code_pb2.CodeReposRequest: decisions_v1_CodeReposRequest_sparse,
    code_pb2.CodeSymbolRequest: decisions_v1_CodeSymbolRequest_sparse,
    memory_pb2.ContextPackRequest: decisions_v1_ContextPackRequest_sparse,
    decisions_pb2.DecisionCalibrationRequest: decisions_v1_DecisionCalibrationRequest_sparse,
    decisions_pb2.DecisionChainRequest: decisions_v1_DecisionChainRequest_sparse,
    decisions_pb2.DecisionOutcomeRequest: decisions_v1_DecisionOutcomeRequest_sparse,
    decisions_pb2.DecisionPrecedentsRequest: decisions_v1_DecisionPrecedentsRequest_sparse,
    memory_pb2.DedupResolveRequest: decisions_v1_DedupResolveRequest_sparse,
    memory_pb2.DeleteMemoryRequest: decisions_v1_DeleteMemoryRequest_sparse,
    memory_pb2.DeleteMemoryVersionRequest: decisions_v1_DeleteMemoryVersionRequest_sparse,
    memory_pb2.GetMemoryRequest: decisions_v1_GetMemoryRequest_sparse,
    memory_pb2.ListMemoryRequest: decisions_v1_ListMemoryRequest_sparse,
    memory_pb2.LockMemoryRequest: decisions_v1_LockMemoryRequest_sparse,
    memory_pb2.MemoryAction: decisions_v1_MemoryAction_sparse,
    memory_pb2.MemoryForFileRequest: decisions_v1_MemoryForFileRequest_sparse,
    memory_pb2.MemoryHistoryRequest: decisions_v1_MemoryHistoryRequest_sparse,
    memory_pb2.MoveMemoryRequest: decisions_v1_MoveMemoryRequest_sparse,
    memory_pb2.PinMemoryRequest: decisions_v1_PinMemoryRequest_sparse,
    decisions_pb2.RecordDecisionRequest: decisions_v1_RecordDecisionRequest_sparse,
    decisions_pb2.RecordDecisionsRequest: decisions_v1_RecordDecisionsRequest_sparse,
    memory_pb2.RecordHistoryRequest: decisions_v1_RecordHistoryRequest_sparse,
    memory_pb2.RestoreMemoryRequest: decisions_v1_RestoreMemoryRequest_sparse,
    memory_pb2.RollbackNamespaceRequest: decisions_v1_RollbackNamespaceRequest_sparse,
    memory_pb2.SearchMemoryRequest: decisions_v1_SearchMemoryRequest_sparse,
    memory_pb2.SetMemoryRequest: decisions_v1_SetMemoryRequest_sparse,
    search_pb2.UnifiedSearchRequest: decisions_v1_UnifiedSearchRequest_sparse,
    memory_pb2.UnlockMemoryRequest: decisions_v1_UnlockMemoryRequest_sparse,
    memory_pb2.UpdateMemoryByIdRequest: decisions_v1_UpdateMemoryByIdRequest_sparse,
    memory_pb2.WriteRecordRequest: decisions_v1_WriteRecordRequest_sparse,
    help_pb2.GetRequest: help_v1_GetRequest_sparse,
    help_pb2.SearchRequest: help_v1_SearchRequest_sparse,
    help_pb2.VerifyRequest: help_v1_VerifyRequest_sparse,
    identity_pb2.CreateNamespaceRequest: identity_v1_CreateNamespaceRequest_sparse,
    identity_pb2.CreateServiceAccountRequest: identity_v1_CreateServiceAccountRequest_sparse,
    identity_pb2.ListGrantsRequest: identity_v1_ListGrantsRequest_sparse,
    identity_pb2.ListNamespacesRequest: identity_v1_ListNamespacesRequest_sparse,
    identity_pb2.MintTokenRequest: identity_v1_MintTokenRequest_sparse,
    identity_pb2.RevokeTokenRequest: identity_v1_RevokeTokenRequest_sparse,
    identity_pb2.SetGrantRequest: identity_v1_SetGrantRequest_sparse,
    identity_pb2.WhoAmIRequest: identity_v1_WhoAmIRequest_sparse,
    insights_pb2.CatalogRequest: insights_v1_CatalogRequest_sparse,
    insights_pb2.QueryRequest: insights_v1_QueryRequest_sparse,
    policy_pb2.CheckPolicyRequest: policy_v1_CheckPolicyRequest_sparse,
    policy_pb2.DeletePolicyRequest: policy_v1_DeletePolicyRequest_sparse,
    policy_pb2.ListDecisionsRequest: policy_v1_ListDecisionsRequest_sparse,
    policy_pb2.ListPoliciesRequest: policy_v1_ListPoliciesRequest_sparse,
    policy_pb2.ReplayPolicyRequest: policy_v1_ReplayPolicyRequest_sparse,
    policy_pb2.RuleSpec: policy_v1_RuleSpec_sparse,
    policy_pb2.SetPolicyRequest: policy_v1_SetPolicyRequest_sparse,
    relay_pb2.RelayCall: relay_v1_RelayCall_sparse,
    relay_pb2.RelayCalls: relay_v1_RelayCalls_sparse,
    tasks_pb2.AcceptTaskRequest: tasks_v1_AcceptTaskRequest_sparse,
    tasks_pb2.BlockTaskRequest: tasks_v1_BlockTaskRequest_sparse,
    tasks_pb2.CancelTaskRequest: tasks_v1_CancelTaskRequest_sparse,
    tasks_pb2.ClaimTaskRequest: tasks_v1_ClaimTaskRequest_sparse,
    tasks_pb2.CompleteTaskRequest: tasks_v1_CompleteTaskRequest_sparse,
    tasks_pb2.CompleteTasksRequest: tasks_v1_CompleteTasksRequest_sparse,
    tasks_pb2.CountTasksRequest: tasks_v1_CountTasksRequest_sparse,
    tasks_pb2.CreateTaskRequest: tasks_v1_CreateTaskRequest_sparse,
    tasks_pb2.CreateTasksRequest: tasks_v1_CreateTasksRequest_sparse,
    tasks_pb2.DeferTaskRequest: tasks_v1_DeferTaskRequest_sparse,
    tasks_pb2.FailTaskRequest: tasks_v1_FailTaskRequest_sparse,
    tasks_pb2.GetTaskHistoryRequest: tasks_v1_GetTaskHistoryRequest_sparse,
    tasks_pb2.GetTaskRequest: tasks_v1_GetTaskRequest_sparse,
    tasks_pb2.HeartbeatTaskRequest: tasks_v1_HeartbeatTaskRequest_sparse,
    tasks_pb2.ListInboxDeliveriesRequest: tasks_v1_ListInboxDeliveriesRequest_sparse,
    tasks_pb2.ListInboxPoliciesRequest: tasks_v1_ListInboxPoliciesRequest_sparse,
    tasks_pb2.ListInboxPrincipalsRequest: tasks_v1_ListInboxPrincipalsRequest_sparse,
    tasks_pb2.ListInboxesRequest: tasks_v1_ListInboxesRequest_sparse,
    tasks_pb2.ListTaskUpdatesRequest: tasks_v1_ListTaskUpdatesRequest_sparse,
    tasks_pb2.ListTasksRequest: tasks_v1_ListTasksRequest_sparse,
    tasks_pb2.PullTasksRequest: tasks_v1_PullTasksRequest_sparse,
    tasks_pb2.ReassignTaskRequest: tasks_v1_ReassignTaskRequest_sparse,
    tasks_pb2.RegisterInboxRequest: tasks_v1_RegisterInboxRequest_sparse,
    tasks_pb2.ReopenTaskRequest: tasks_v1_ReopenTaskRequest_sparse,
    tasks_pb2.ReportTaskProgressRequest: tasks_v1_ReportTaskProgressRequest_sparse,
    tasks_pb2.ResumeTaskRequest: tasks_v1_ResumeTaskRequest_sparse,
    tasks_pb2.SetInboxPolicyRequest: tasks_v1_SetInboxPolicyRequest_sparse,
    tasks_pb2.UnblockTaskRequest: tasks_v1_UnblockTaskRequest_sparse,
    tasks_pb2.UpdateTaskRequest: tasks_v1_UpdateTaskRequest_sparse,
    tasks_pb2.WatchTaskRequest: tasks_v1_WatchTaskRequest_sparse,
    tasks_pb2.WontDoTaskRequest: tasks_v1_WontDoTaskRequest_sparse,
}
